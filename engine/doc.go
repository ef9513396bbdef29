// Package engine is webhookd's domain: events, endpoints, deliveries and
// attempts, the retry policy, signing, and the dispatcher that makes the
// attempts. It imports no infrastructure: storage and postgres implement
// its Backend (the Store and what a process asks of its database beside
// it), httpapi calls its Service, and main wires them together.
//
// # The delivery contract
//
// webhookd delivers at least once inside a bounded window, never exactly
// once: a receiver must be idempotent on the event id (the webhook-id
// header), because a lost acknowledgement, a crash between an attempt and
// its record, or a replay sends the same event again.
//
// An event acknowledged by ingest (202) is on disk, fsynced, together with
// one pending delivery per subscribed, enabled endpoint of its tenant, or
// (a store that leaves the fan-out owed, Log.AppendEvent) with the plan of
// those deliveries, which the store writes in the commits after it
// (fanout.go) and, after a crash, before anything is attempted. Each
// delivery gets its first attempt at once. An attempt is a POST of the
// stored envelope bytes, signed at send time, with a timeout that covers
// connect, TLS, headers and body. Its outcome (see classify):
//
//   - 2xx: succeeded, whatever its headers say.
//   - anything else with the header webhook-delivery: abort (any case):
//     dead at once, "the receiver asked to stop retrying".
//   - 408, 425, 429, 5xx, a timeout, a connection error or response headers
//     over 64 KiB: retried by the delivery's RetryPolicy; a 429 or 503 with
//     Retry-After waits at least that long (capped at RetryAfterMax).
//   - a 3xx or 4xx its policy lists in RetryStatuses: retried the same way.
//   - every other 3xx and 4xx: dead at once, with a reason that says to
//     check the endpoint's configuration. Redirects are never followed.
//
// A delivery follows a named retry policy (DispatcherOptions.Policy, the
// standard one, and Policies): its endpoint's, or its tenant's, as they
// were when its cycle started (CyclePolicy; stored as
// Delivery.RetryPolicy), so that a change of choice or configuration
// never reshuffles retries already scheduled. A name the node does not
// have is followed as standard.
//
// The default RetryPolicy makes an attempt at once and retries after 5s,
// 30s, 2m, 10m and 1h, each ±20% jitter: 6 attempts, about 72.6 minutes of
// waiting, inside a 75-minute deadline that runs from the first attempt and
// counts every attempt's own time. When attempts or the deadline run out,
// the delivery is dead and listed in the dead letters with its reason, last
// status and attempt count, until a replay starts a new cycle (same event
// id, same body, fresh timestamp and signature).
//
// Order is not guaranteed, unless the endpoint asks for it: attempts of
// different events run concurrently and retries overtake nothing in
// particular. An endpoint whose ordering is key (one line per ordering
// key) or endpoint (one line) gets each line's events one at a time, in
// sequence order: the next is not attempted until the one ahead of it has
// succeeded or died, and across a crash too (a restart may send the same
// one again). The head's retries keep their schedule and deadline; what
// waits behind it waits, and its deadline runs from when its turn comes.
// A head that dies lets the line go on (on_dead skip, recorded on the dead
// letter) or stops it until it is replayed and succeeds, or skipped
// (on_dead block). A delivery's line is fixed when it is made, so a change
// of ordering applies to the events ingested after it. lines.go has the
// rules.
//
// # Who decides, who stores
//
// The engine decides; a Store stores (store.go). Which deliveries an event
// creates, how an attempt's outcome, a hold, a pause, a replay or a resume
// changes a delivery, how an endpoint's health merges, and every reason
// text are pure functions in transitions.go. A Store saves what they
// return, in one transaction each (RecordOutcome, UpdateDelivery,
// UpdateDeliveries, AppendEvent's fan-out callback), and derives from the
// new state alone where the delivery is listed: due (Pending), among the
// dead letters (Dead), held for its endpoint (Paused), or waiting in its
// line (Waiting; the store settles an ordered delivery in its line, and
// promotes the next when a head leaves, in the same transaction with
// the line rules of lines.go). The conformance suite in
// engine/storetest is the Store contract that every backend must pass.
//
// # Durability
//
// Every state change of a delivery is one store transaction, so the
// store's pending deliveries are the durable schedule. An attempt runs
// outside any transaction; only its outcome is written. A delivery that
// was in flight when the process died is still pending in the store and
// is attempted again (at-least-once).
//
// # Tracing
//
// A Tracer (tracing.go; package tracing implements it, main sets it) is
// told of each ingest and each attempt. The engine hands it only what a
// span may show and keeps the ingest span's context with the event
// (Event.IngestTrace), which every store stores and hands back with each
// attempt (AttemptInput.IngestTrace): an attempt's span, a trace of its
// own, links to its ingest across restarts. Without a Tracer nothing of
// it runs, is stored or is sent.
//
// # Who owns due work: claims and leases
//
// A Scheduler (scheduler.go) hands due deliveries to the Dispatcher, each
// claimed by one caller under a lease, and takes them back settled; its
// doc comment is the contract a scheduler must meet:
//
//   - a pending delivery is offered at or after its due time;
//   - until its claim is settled or its lease ends, no other claim gets
//     it, so a delivery is never attempted twice at the same time;
//   - a claim that is never settled (its process died, or it outlived its
//     lease) is offered again: at-least-once;
//   - a settled delivery is offered again only at the next time its
//     outcome gave, or never when it is no longer pending.
//
// The order of one attempt: Claim, read the delivery (AttemptInput), make
// the request, store the outcome (RecordOutcome: RecordAttempt of the
// delivery as read, applied only if it is still at that version; else
// read again and decide again, outcome.go), Settle with the next due
// time. A backend shared by several processes
// claims in the store with leases (a lease ends by time, and a settle
// must only apply while its lease holds); LocalScheduler, the single
// process's, keeps every pending delivery in a timer queue in memory,
// rebuilt at start from the store's retry index (Recover), and its leases
// last as long as the process: the bbolt file is locked to one process.
//
// # Who may implement the store contract, and how
//
// Any package may implement a store; engine imports none of them, and
// main picks one by [storage] driver. There are three: storage.DB (one
// bbolt file, locked to one process), postgres.Store (a database shared
// by several processes) and memstore.Store (memory, for tests). What a
// store must implement is engine.Backend, every method of it: the Store
// by role (store.go) — Log, the transactional core; Records, the plain
// records and the background tasks (tasks.go: the engine claims, renews
// and ends a task through UpdateTask, so a store keeps no lease logic of
// its own); Listings, reads only; Maintenance, what the janitor deletes —
// and Backend's own (backend.go): Writable, OldestDue, SecretKeyID,
// Backup (nil when there is none), Close. The engine finds no capability
// of a store by type assertion; a Backend that compiles has them all.
//
// The scheduler goes with the store. A store one process owns needs
// nothing more: LocalScheduler keeps its due work in memory, rebuilt
// from the store's RetryIndex. A store several processes share brings its
// own Scheduler, and it must be a SharedScheduler (leases that may end,
// shared endpoint bounds, tenant skipping, held counts): the one
// capability the Dispatcher asks for, once, because a single process's
// scheduler has none of it.
//
// How to write one:
//
//   - Start from engine/memstore, the template: the whole contract with
//     nothing of a database in the way. One mutex is its transaction,
//     records are copied in and out, times are kept in UTC, and where a
//     delivery is listed follows from its state alone.
//   - The specification is engine/storetest, not the bbolt code: run
//     storetest.Run from a test of the new package and make every case
//     pass (a new store starts by failing them). Harness.Check verifies
//     the store's own indexes after each case; Purge says DeleteTenant
//     leaves the purge for later; Scheduler and EndLeases bring a shared
//     store's scheduler under the Scheduler cases.
//   - Durability: a write that returns nil is durable (fsynced, or
//     committed by the database) and survives a crash; ingest's 202 and
//     every recorded outcome rest on it. Any other answer means nothing
//     was written: a *Error with its Code for what is not there or not
//     valid, CodeUnavailable for what may be tried again.
//   - The store decides nothing. An attempt's outcome comes decided
//     (RecordOutcome's OutcomeUpdate, outcome.go): the store writes it
//     only while the delivery is at the version the engine read, and
//     otherwise answers ErrDeliveryChanged and writes nothing. The rarer
//     API paths hand it a transition (transitions.go) that it applies in
//     a transaction, perhaps more than once. Either way it derives every
//     index entry from the new state in one place, settling lines as
//     Store's doc says.
//   - A record or state it adds has a whole life: retention, a tenant's
//     purge, its own check, backup and the conformance suite's
//     Maintenance cases must know it.
//
// # Security
//
// Attempts go only where TargetPolicy allows: by default https only and
// public addresses only, checked when an endpoint URL is stored and again,
// after DNS, on every connection (ssrf.go); redirects are never followed
// and a response is read up to a cap, of which an attempt keeps a bounded
// excerpt and bounded headers, never a credential header of the
// receiver's (headers.go). An endpoint signs with its current
// secret and, during a rotation's grace window, its previous one too
// (secrets.go); a revocation drops old keys at once. An endpoint may have
// to pass the Standard Webhooks challenge before its first delivery, its
// deliveries held meanwhile (verification.go). An endpoint's custom
// headers go with each of its requests; their values are secrets, masked
// in its JSON, and the headers webhookd owns are not theirs to set
// (customheaders.go). Tenants are test or live,
// and a test caller acts on test tenants only (environment.go). Secrets
// never appear in an error, a log line or a delivery's reason.
package engine
