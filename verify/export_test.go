package verify

// For the external tests (package verify_test), which use the bbolt inbox
// of verify/boltinbox and so cannot be in package verify.
const TestSecret = testSecret

var (
	ExpectedSignatures = expectedSignatures
	DelStd             = delStd
)
