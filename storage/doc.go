// Package storage keeps webhookd's durable state in one bbolt file. DB
// implements engine.Store.
//
// # Buckets
//
// Every bucket is created by Open in one transaction. Integers in keys are
// fixed-width big-endian, so byte order is numeric order; times in keys are
// Unix nanoseconds (clamped to [0, 2^63-1]). "‖" is concatenation; 0x00
// ends a tenant or event ID that is followed by more key (they never
// contain it). Records begin with a format version byte: 1 is JSON (or a
// fixed binary layout where the table says so), 2 the binary format of
// binary.go, which deliveries and event headers are written in since
// schema 3; records written as 1 before that are read as they are.
//
//	bucket              key                                          value
//	meta                "schema"                                     schema version, uint64 (12)
//	meta                "secret_key_id"                              ID(8) of the key secrets are sealed with; absent: plain
//	meta                "held"                                       v1 ‖ waiting(8) ‖ paused(8) ‖ blocking(8): every tenant's held deliveries (schema 9); absent: none
//	tenants             tenant ID                                    tenant record (v1 ‖ JSON)
//	event_types         type name                                    event type record (v1 ‖ JSON)
//	endpoints           tenant ‖ 0x00 ‖ endpoint ID                  endpoint record with secrets and custom headers, sealed or plain (v1 ‖ JSON)
//	events              seq(8)                                       event record (see below); never rewritten
//	event_ids           event ID                                     seq(8)
//	deliveries          delivery ID                                  delivery record (v2 to v6 ‖ binary, encodeDelivery: v6 with attempts' response headers; v1 ‖ JSON before schema 3)
//	retry_index         due(8) ‖ delivery ID                         endpoint ID
//	dead_letters        tenant ‖ 0x00 ‖ deadAt(8) ‖ delivery ID      empty
//	idempotency         tenant ‖ 0x00 ‖ Idempotency-Key              v1 ‖ expires(8) ‖ request hash(32) ‖ event ID
//	idempotency_expiry  expires(8) ‖ tenant ‖ 0x00 ‖ Idempotency-Key  empty
//	tenant_events       tenant ‖ 0x00 ‖ seq(8)                       empty (a tenant's events, log order)
//	tenant_deliveries   tenant ‖ 0x00 ‖ seq(8) ‖ delivery ID         empty (a tenant's deliveries, by their event; an event's are under tenant ‖ 0x00 ‖ its seq)
//	paused              tenant ‖ 0x00 ‖ endpoint ID ‖ 0x00 ‖ dlv ID  empty (deliveries held for a disabled endpoint)
//	access_tokens       sha256(token)(32)                            access token record (v1 ‖ JSON)
//	tenant_access_tokens tenant ‖ 0x00 ‖ token ID                    sha256(token)(32)
//	deleted_tenants     tenant ID                                    deleted at(8): a deleted tenant whose data is being purged
//	tenant_sequences    tenant ID                                    last event Sequence(8) of the tenant; kept when it is deleted
//	line_heads          endpoint ID ‖ 0x00 ‖ line                    the delivery ID of the line's head (schema 5)
//	line_waiting        endpoint ID ‖ 0x00 ‖ line ‖ 0x00 ‖ sequence(8) ‖ dlv ID   empty (a line's waiting deliveries, next first)
//	key_tails           endpoint ID ‖ 0x00 ‖ ordering key            Sequence(8) of the key's last delivery to the endpoint (schema 6); gone with that delivery
//	tenant_held         tenant ID                                    v1 ‖ waiting(8) ‖ paused(8) ‖ blocking(8): the tenant's held deliveries (schema 9); absent: none
//	tasks               task ID                                      task record (v1 ‖ JSON; tasks.go)
//	tenant_tasks        tenant ‖ 0x00 ‖ task ID                      empty (a tenant's tasks, creation order; the operator's are not here)
//	running_tasks       task ID                                      the task's tenant: the running tasks
//	finished_tasks      finished(8) ‖ task ID                        the task's tenant: the finished tasks, by when they finished
//	fanouts             seq(8)                                       v1 ‖ count ‖ per delivery: ID, endpoint ID, line, retry policy, flags: the plan of an event whose fan-out is owed (schema 12; fanout.go)
//
// Schema 2 added tenant_events and tenant_deliveries (the delivery log and
// the reconciliation feed page by them); Open fills them from the log when
// it migrates a schema 1 file. A delivery is in paused if and only if it is
// paused. Retention (PruneEvents) deletes whole finished events with every
// entry of theirs, and the purge of a deleted tenant (PurgeDeletedTenants)
// whole events of that tenant, whatever their deliveries' state; otherwise
// the log is never rewritten. A tenant is in tenants or in deleted_tenants,
// never both. Until schema 8 an event_deliveries bucket (event ID ‖ 0x00 ‖
// delivery ID) listed each event's deliveries again; tenant_deliveries
// lists them under the event's place in the log, so Open drops it. A
// backfill (Backfill) adds deliveries to events already in the log,
// under their places in tenant_deliveries, where an event has none to
// the endpoint: an event has at most one delivery to an endpoint.
//
// The events bucket is the append-only event log: the key is the bucket's
// NextSequence, so cursor order is ingest order. An event record is
//
//	version(4) ‖ id ‖ tenant ‖ type ‖ created ‖ api_version ‖ sequence ‖ ordering key ‖ flags ‖ [channels] ‖ [deliver at] ‖ [ingest trace] ‖ body   (a test event, one on channels, scheduled, or whose ingest was traced: the W3C traceparent of its span)
//	version(3) ‖ id ‖ tenant ‖ type ‖ created ‖ api_version ‖ sequence ‖ ordering key ‖ body   (binary.go's fields)
//	version(2) ‖ id ‖ tenant ‖ type ‖ created ‖ api_version ‖ body       (before schema 4: no sequence)
//	version(1) ‖ header length(4) ‖ header JSON {id, tenant, type, created, api_version} ‖ body   (before schema 3)
//
// where body is the envelope exactly as ingested: every attempt and replay
// signs and sends those bytes, so they are never re-encoded.
//
// Endpoint IDs are time ordered, so a tenant's endpoints are listed in
// creation order. A delivery is in retry_index if and only if its state is
// pending, under its NextAttemptAt, so First() is the next delivery due;
// it is in dead_letters if and only if it is dead. DeadLetters pages by
// key: the opaque cursor is base64url(deadAt(8) ‖ delivery ID) of the last
// dead letter of the page, and the next page Seeks after it. The
// idempotency_expiry index lets PruneIdempotency delete expired records
// without reading the live ones. A tenant's numbered events (schema 4) have
// Sequences that rise in log order, each at most its tenant_sequences
// value; not one apart: retention deletes a finished event and keeps an
// earlier one that still has a pending or dead delivery, and a later one
// inside retention, so the Sequences left may have gaps anywhere (the
// purge of a deleted tenant deletes all of them). An ordered delivery (schema 5; engine/lines.go) is in
// line_waiting if and only if it is waiting, and in line_heads, as the
// value of its line's entry, if and only if it holds its line (pending,
// paused, or dead and blocking); saveDelivery keeps both from the state
// like the other indexes and promotes a line's first waiting delivery in
// the transaction that ends its head, so a line with waiting deliveries
// has a head. A tenant's held deliveries (engine.Held: waiting, paused,
// dead and blocking) are counted in tenant_held, and every tenant's in
// meta "held", by the same transactions (held.go), so the pending bounds
// read two keys at each ingest. Check verifies these invariants.
//
// The encoding types (tenantRecord, deliveryRecord, ...) are not the
// domain types: the API's JSON may change without changing the file.
//
// With Options.SecretKey set, endpoint secrets (signing keys and custom
// header values: a header's value is under "sealed" in the record when
// it is sealed, "value" when not) are sealed with AES-256-GCM before they
// are written and opened after they are read, outside the encoding
// functions; package sealing has the format, crypt.go the key ID
// in meta and what Open does with a file and a key that do not agree.
//
// # Group commit
//
// Every exported method that writes is one transaction and returns only
// after it is committed and fsynced (bbolt's NoSync is never set). To keep
// ingest from paying one fsync per request, writes go through a commit
// loop of our own: a writer sends an op (a func(*bolt.Tx) error and a
// result channel) to a queue (a channel of Options.MaxBatch ops) and waits; one goroutine takes the first
// queued op, drains whatever else is queued at that moment (at most
// Options.MaxBatch), runs them all in one bbolt Update and answers every op
// after the commit. It does not wait to fill a batch (unlike bbolt's Batch
// and its 10 ms delay): while one commit fsyncs, the next batch queues up,
// so batches grow with load by themselves.
//
// Ingest's writes have a queue of their own, taken first, and so does
// FanOut's (see run): the deliveries of acknowledged events ride the
// next commit, not the end of the queue of attempt outcomes.
//
// When an op returns an error the transaction is rolled back, that op gets
// its error and the batch runs again without it, so ops must be safe to
// run more than once (they assign their results). Reruns cost the whole
// batch, so AppendEvent makes its checks (tenant, type, Idempotency-Key)
// in a read transaction first: refused and duplicate ingests, the common
// client mistakes and retries, never reach the loop. Ops in a batch run in
// queue order and each sees the writes of the ops before it (two ingests
// with one Idempotency-Key in one batch: the second is the duplicate). When
// the commit itself fails (disk full, I/O error), every op of the batch
// gets a CodeUnavailable *engine.Error wrapping the cause, which ingest
// answers with 503; bbolt reloads its free list on rollback, so writes
// succeed again once the disk recovers. A writer's context is honoured
// until its transaction begins; after that the outcome is reported even if
// the context has ended. Reads are bbolt read transactions of their own
// and do not wait for the commit loop. No transaction does network I/O or
// waits on a channel, and a *bolt.Tx never leaves this package.
//
// # Recovery contract
//
// bbolt commits by writing the new pages, fsyncing, then writing and
// fsyncing a meta page; a crash at any point leaves the file as of the
// last committed transaction. So a crash leaves each write either whole or
// absent: an ingest leaves its event, the plan of its deliveries (or,
// for an event with an ordering key or an ordered delivery, the
// deliveries with their retry index entries) and its idempotency record,
// or none of them; a fan-out (FanOut) leaves an event's deliveries with
// their indexes and no plan, or the plan alone; a recorded attempt
// leaves its log entry together with the state change and the index moves,
// or none of them. A write whose method returned nil survives. A write that
// got CodeUnavailable was rolled back and is not reported as done; if the
// cause was a failed fsync the operating system may still have written some
// of it, which is why an ingest retry should carry its Idempotency-Key.
//
// An ingest's fan-out is owed from its acknowledgement until FanOut
// stores its deliveries in a later commit (fanout.go): the commit a
// client waits for writes two keys at the end of two buckets (events,
// fanouts) instead of some forty B+tree writes for ten deliveries. Open
// finishes every owed fan-out before it returns, so the retry index is
// whole before the dispatcher rebuilds its timer from it; retention
// keeps an event whose fan-out is owed, the purge of a deleted tenant
// deletes its plans with its events, a backfill counts a planned
// delivery as made, Check verifies each plan against the log, and
// Export refuses a file with one (start webhookd on it once).
//
// The retry index is the durable schedule. At start the dispatcher rebuilds
// its timer from it (RetryIndex): every pending delivery is there,
// including one whose attempt was in flight at the crash (it was never
// written as anything but pending), so that attempt is made again
// (at-least-once). Succeeded and dead deliveries are not in it and are not
// retried; dead ones wait in dead_letters for a replay.
package storage
