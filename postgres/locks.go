package postgres

import "fmt"

// Advisory locks.
//
// PostgreSQL's advisory locks belong to the database, not to a schema:
// two webhookd deployments in one database (two [storage] schemas) would
// share every lock keyed by a tenant's ID or a line alone, so a wait for
// one deployment's tenant "acme" would hold up the other's, past
// LockTimeout into 503s. So every lock of a tenant or a line is keyed by
// the schema too: its key is the 64-bit hashtextextended of
// current_schema() ‖ U+0001 ‖ the tenant's ID (or the line's endpoint
// ID ‖ U+0001 ‖ line), seeded by the lock's kind (tenantLock,
// sequenceLock, lineLock), in the one-key space (lockKeySQL). The
// transaction's search_path is its store's schema (Open's sessions, and
// EnqueueTx's for the call), so current_schema() is the schema whose
// tables the lock guards. Two tenants or lines whose keys collide (one
// chance in 2⁶⁴ a pair) take turns, no more.
//
// The locks of a whole schema are keyed by its name in the two-key
// space: (pruneLock, hashtext(schema)) and (importLock, hashtext(schema)).
// migrationLock is one key for the database: migrations at start take
// turns across schemas.
//
// Rolling upgrades: a node of a version before schema 6 keys a tenant's
// and a line's locks by the ID alone, in the two-key space (kind,
// hashtext(ID)): its old key. While such a node may still run, a new
// node must also hold the old key of every lock it takes, or an old
// node and a new one could both hold "the" lock of one tenant (two
// ingests numbering one tenant's events at once, an ingest beside its
// tenant's deletion, two writers of one line). schema_version's
// old_lock_keys says so: migration 6 sets it (a schema made by this
// version from nothing has never had an old node and starts without
// it), and a node's heartbeat clears it when the nodes table has held no
// row of an old node (nodes.lock_keys 1: old nodes do not write the
// column) at two heartbeats in a row, a third of a lease apart, so that
// an old node that opened the schema before migration 6 has written
// itself in by then. Every lock statement reads it (oldLockKeysSQL) and
// takes the old key first, then the new one, so old and new nodes
// exclude each other while both run, and no lock is shared across
// schemas once the old nodes are gone. The limit: an old node frozen for
// more than ten leases (its row then deleted) that resumes after the
// switch runs beside new nodes with only its old keys.
//
// Order, which rules out deadlocks among them (with the old keys in
// place or not): a tenant's lock, then its sequence lock (ingest; a
// batch of ingests takes them tenant by tenant in ID order) or an
// endpoint's backfill lock and the prune lock shared (a backfill's
// step, backfill.go), then line locks in the order of (old key, new
// key) (lockLinesSQL), then row locks; each lock's old key right before
// its new key. PruneEvents only tries the prune lock, so never waits
// for it.

// tenantLock is the kind of a tenant's lock ("whte" in ASCII), which an
// ingest holds shared and DeleteTenant alone, so that an ingest and the
// deletion of its tenant never interleave; so does the selection of an
// endpoint's paused deliveries (UpdateDeliveries, as the endpoint is
// enabled), which must see those of the ingests in flight.
const tenantLock = 0x77687465

// sequenceLock is the kind of a tenant's sequence lock ("whts"), which
// an ingest holds from before its first write to its commit (see the
// schema's comment on tenant_sequences).
const sequenceLock = 0x77687473

// lockKeySQL is the SQL of the key of the lock of kind on the SQL text
// id in the transaction's schema.
func lockKeySQL(kind int32, id string) string {
	return fmt.Sprintf("hashtextextended(current_schema() || chr(1) || %s, %d)", id, kind)
}

// oldLockKeysSQL is true while nodes that key locks by the ID alone may
// run (schema_version.old_lock_keys).
const oldLockKeysSQL = "(SELECT old_lock_keys FROM schema_version)"

// lockSQL is two columns of a select list that take the lock fn
// (pg_advisory_xact_lock or pg_advisory_xact_lock_shared) of kind on the
// SQL text id: its old key while oldLockKeysSQL, then its key.
func lockSQL(fn string, kind int32, id string) string {
	return lockKeysSQL(fn, kind, "hashtext("+id+")", lockKeySQL(kind, id))
}

// lockKeysSQL is lockSQL from the SQL of the lock's old key (an int4,
// the second of the two-key space) and its key (an int8).
func lockKeysSQL(fn string, kind int32, old, key string) string {
	return fmt.Sprintf("CASE WHEN %s THEN %s(%d, %s)::text END, %s(%s)::text", oldLockKeysSQL, fn, kind, old, fn, key)
}

// lockTenantSharedSQL takes tenant $1's lock, shared: an ingest's.
var lockTenantSharedSQL = "SELECT " + lockSQL("pg_advisory_xact_lock_shared", tenantLock, "$1")

// lockTenantSQL takes tenant $1's lock alone: its deletion's.
var lockTenantSQL = "SELECT " + lockSQL("pg_advisory_xact_lock", tenantLock, "$1")

// lockSequenceSQL takes tenant $1's sequence lock.
var lockSequenceSQL = "SELECT " + lockSQL("pg_advisory_xact_lock", sequenceLock, "$1")

// lockIngestSQL takes tenant $1's lock, shared, and then its sequence
// lock: an ingest's locks, in one statement.
var lockIngestSQL = "SELECT " + lockSQL("pg_advisory_xact_lock_shared", tenantLock, "$1") + ", " +
	lockSQL("pg_advisory_xact_lock", sequenceLock, "$1")
