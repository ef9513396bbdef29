// Package e2e holds webhookd's end-to-end tests: each drives the real
// webhookd binary, built once per run (TestMain), as a process, over HTTP
// and its commands, against loopback receivers that verify every
// signature, on the bbolt file or on PostgreSQL.
//
// The package has no code of its own beside its tests. Its helpers are
// named for what they are: node_test.go starts and stops a webhookd
// process and runs its commands; instance_test.go is a webhookd on a
// test's config and database (startInstance, startProc), the driver the
// tests run on, and the calls most tests make; receiver_test.go holds the
// receivers (one that checks each request with the official Standard
// Webhooks and Stripe libraries, one that verifies with package verify
// and keeps what each event got); api_test.go the typed calls of package
// client; store_test.go what each driver offers an operator offline
// (check, backup and restore, compact, rotate-key); ledger_test.go what
// a test acknowledged and where it must be.
//
// Run them with go test ./e2e (skipped under -short): on the bbolt file,
// or with WEBHOOKD_TEST_DRIVER=postgres on PostgreSQL, where the tests of
// the bbolt file itself skip and the cluster tests run. PostgreSQL wants
// WEBHOOKD_TEST_DATABASE_URL and, for backups and servers of a test's
// own, WEBHOOKD_TEST_PGBIN (.ci/postgres sets both); without them those
// tests are skipped, and in CI (CI set) they fail. CI runs the package
// once on each driver. The long runs are opt-in (docs/reliability.md):
// WEBHOOKD_LIFECYCLE_DAYS and WEBHOOKD_LIFECYCLE_DAY, WEBHOOKD_CRASH_KILLS,
// WEBHOOKD_OPS_KILLS, WEBHOOKD_SOAK.
package e2e
