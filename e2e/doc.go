// Package e2e holds webhookd's end-to-end tests: each drives the real
// webhookd binary, built once per run (TestMain), over HTTP and its
// commands, against loopback receivers that verify every signature with
// package verify, on the bbolt file and on PostgreSQL.
//
// The package has no code of its own beside its tests. Its helpers are
// named for what they are: node_test.go starts and stops a webhookd
// process, receiver_test.go is a signature-checking receiver, api_test.go
// the calls a test makes, store_test.go what each driver offers an
// operator offline (check, backup and restore, compact, rotate-key),
// ledger_test.go what a test acknowledged and where it must be.
//
// Run them with go test ./e2e (skipped under -short). The PostgreSQL half
// wants WEBHOOKD_TEST_DATABASE_URL and WEBHOOKD_TEST_PGBIN (.ci/postgres
// sets both); without them it is skipped, and in CI (CI set) it fails.
// The lifecycle test's long run is opt-in: WEBHOOKD_LIFECYCLE_DAYS and
// WEBHOOKD_LIFECYCLE_DAY (docs/reliability.md).
package e2e
