// Package boltinbox is a verify.Inbox in a bbolt file: the receiver's
// record of which events it processed, its durable tasks and its
// per-object ordering check, with the receiver's own writes in the same
// bbolt transaction (Tx.Bolt). It is the only part of verify's tree that
// imports anything beyond the standard library.
//
// Open (or New, in a bbolt database the receiver already owns) gives an
// Inbox; hand it to verify.Handler. In the handler's fn, tx is a *Tx:
// Tx.Bolt for the receiver's writes, Tx.EnqueueTask for external effects,
// Tx.Advance to refuse an event older than the last one applied to an
// object. A worker drains the tasks with ClaimTask, CompleteTask and
// FailTask.
//
// # File layout
//
// The buckets below are the inbox's; the receiver's own buckets may live
// in the same file under other names, and it must not write these. Files
// written by webhookd releases in which this inbox was verify.BoltInbox
// have this layout and open as they are (TestOpen_v1File).
//
//	bucket            key                                  value
//	verify.events     eventKey                             eventRecord v1: 0x01 ‖ receivedAt ‖ sha256(body)
//	verify.tasks      eventKey ‖ task name                 taskRecord v1 (see taskRecord.encode)
//	verify.due        due ‖ eventKey ‖ task name           empty
//	verify.versions   objectKey                            0x01 ‖ version ‖ updated ‖ event id
//	verify.conflicts  objectKey ‖ seq u64                  0x01 ‖ at ‖ version ‖ current version ‖ len(event id) u16 ‖ event id ‖ current event id
//	verify.sequences  orderKey                             highest sequence processed u64 (Tx.InOrder); the sender's floor under orderKey of ""
//
// verify.events, verify.tasks and verify.due are created at open, the
// versions and conflicts by the first Tx.Advance, verify.sequences by the
// first Tx.InOrder. eventKey is verify.AppendEventKey(sender,
// event id): len(sender) ‖ sender ‖ len(event id) ‖ event id with
// big-endian uint16 lengths; objectKey is the same encoding of (sender,
// object), orderKey of (sender, ordering key). Times are int64 Unix
// nanoseconds, big-endian (zero for "none"); versions are big-endian
// int64. verify.due holds exactly the
// pending and processing tasks, keyed by their Due time, so its First()
// is the next task to claim. seq comes from the bucket's NextSequence, so
// an object's conflicts are in arrival order.
package boltinbox
