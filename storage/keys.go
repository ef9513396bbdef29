package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Bucket names. Every bucket is created by Open, in one transaction, so a
// method never finds one missing. doc.go has the key layout of each.
var (
	bucketMeta             = []byte("meta")
	bucketTenants          = []byte("tenants")
	bucketEventTypes       = []byte("event_types")
	bucketEndpoints        = []byte("endpoints")
	bucketEvents           = []byte("events")
	bucketEventIDs         = []byte("event_ids")
	bucketDeliveries       = []byte("deliveries")
	bucketEventDeliveries  = []byte("event_deliveries") // until schema 8: read by the schema 1 migration, then dropped
	bucketRetryIndex       = []byte("retry_index")
	bucketDeadLetters      = []byte("dead_letters")
	bucketIdempotency      = []byte("idempotency")
	bucketIdempotencyIndex = []byte("idempotency_expiry")
	bucketTenantEvents     = []byte("tenant_events")     // schema 2
	bucketTenantDeliveries = []byte("tenant_deliveries") // schema 2
	bucketPaused           = []byte("paused")            // schema 2

	// Tenant access tokens (tokens.go). New buckets need no migration:
	// Open creates any that are missing.
	bucketAccessTokens       = []byte("access_tokens")
	bucketTenantAccessTokens = []byte("tenant_access_tokens")

	// Tenants deleted and not yet purged (tenantdelete.go).
	bucketDeletedTenants = []byte("deleted_tenants")

	// Each tenant's last event Sequence (schema 4), kept when the tenant
	// is deleted.
	bucketTenantSequences = []byte("tenant_sequences")

	// Ordered lines (schema 5; savedelivery.go): each line's head and
	// its waiting deliveries by Sequence.
	bucketLineHeads   = []byte("line_heads")
	bucketLineWaiting = []byte("line_waiting")

	// The last delivery made for each (endpoint, ordering key) (schema
	// 6; events.go): the PreviousSequence of the key's next one there.
	bucketKeyTails = []byte("key_tails")

	// Each tenant's held deliveries: waiting, paused, dead and blocking
	// (schema 9; held.go).
	bucketTenantHeld = []byte("tenant_held")

	// Background tasks (tasks.go): each task, and its indexes.
	bucketTasks         = []byte("tasks")
	bucketTenantTasks   = []byte("tenant_tasks")
	bucketRunningTasks  = []byte("running_tasks")
	bucketFinishedTasks = []byte("finished_tasks")

	// Owed fan-outs (schema 12; fanout.go): the plan of the deliveries
	// of each event whose ingest was acknowledged before they were
	// stored.
	bucketFanOuts = []byte("fanouts")

	allBuckets = [][]byte{
		bucketMeta, bucketTenants, bucketEventTypes, bucketEndpoints,
		bucketEvents, bucketEventIDs, bucketDeliveries,
		bucketRetryIndex, bucketDeadLetters, bucketIdempotency, bucketIdempotencyIndex,
		bucketTenantEvents, bucketTenantDeliveries, bucketPaused,
		bucketAccessTokens, bucketTenantAccessTokens, bucketDeletedTenants,
		bucketTenantSequences, bucketLineHeads, bucketLineWaiting, bucketKeyTails,
		bucketTenantHeld, bucketFanOuts,
		bucketTasks, bucketTenantTasks, bucketRunningTasks, bucketFinishedTasks,
	}
)

// keySchema is the key in the meta bucket that holds the schema version.
var keySchema = []byte("schema")

// schemaVersion is the layout of buckets and keys this code reads and
// writes. A file with a higher version is refused at Open. Schema 2 added
// the tenant indexes; schema 3 writes deliveries and event headers in the
// binary formatV2 (encoding.go); schema 4 numbers each tenant's events
// (tenant_sequences, event records in formatV3); schema 5 keeps ordered
// lines (line_heads, line_waiting, delivery records in formatV3); schema
// 6 keeps each ordering key's last delivery per endpoint (key_tails,
// delivery records in formatV4); schema 7 marks test events (event
// records in formatV4, delivery records in formatV5); schema 8 drops
// event_deliveries (an event's deliveries are listed by tenant_deliveries);
// schema 9 counts each tenant's held deliveries (tenant_held, meta "held");
// schema 10 keeps attempts' response headers (delivery records in
// formatV6); schema 11 keeps background tasks (tasks, tenant_tasks,
// running_tasks, finished_tasks); schema 12 leaves an ingest's fan-out
// owed (fanouts), which an older webhookd would not finish.
const schemaVersion = 12

// sep ends a variable-length key part (a tenant ID, an event ID) that is
// followed by more key. Tenant and event IDs never contain it.
const sep = 0x00

// u64 returns n as 8 big-endian bytes: keys sort in numeric order.
func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// Bounds of time.UnixNano; outside them its result is undefined.
var (
	minKeyTime = time.Unix(0, 0)
	maxKeyTime = time.Unix(0, math.MaxInt64)
)

// unixNano returns t as nanoseconds since the Unix epoch for a key, clamped
// to [0, MaxInt64] so that keys of any time sort in time order (times
// before 1970 all sort first).
func unixNano(t time.Time) uint64 {
	switch {
	case t.Before(minKeyTime):
		return 0
	case t.After(maxKeyTime):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

// keyTime is the inverse of unixNano.
func keyTime(n uint64) time.Time {
	if n > math.MaxInt64 {
		n = math.MaxInt64
	}
	return time.Unix(0, int64(n)).UTC()
}

// tenantPrefix returns tenant ‖ 0x00, the start of every key of tenant in a
// bucket shared by all tenants.
func tenantPrefix(tenant string) []byte {
	b := make([]byte, 0, len(tenant)+1)
	b = append(b, tenant...)
	return append(b, sep)
}

// endpointKey is tenant ‖ 0x00 ‖ endpoint ID. Endpoint IDs are time
// ordered, so a tenant's endpoints sort in creation order.
func endpointKey(tenant, id string) []byte {
	return append(tenantPrefix(tenant), id...)
}

// idempotencyKey is tenant ‖ 0x00 ‖ Idempotency-Key.
func idempotencyKey(tenant, key string) []byte {
	return append(tenantPrefix(tenant), key...)
}

// expiryKey is expires(8) ‖ tenant ‖ 0x00 ‖ Idempotency-Key: the
// idempotency_expiry index, oldest expiry first.
func expiryKey(expires time.Time, tenant, key string) []byte {
	b := make([]byte, 8, 8+len(tenant)+1+len(key))
	binary.BigEndian.PutUint64(b, unixNano(expires))
	b = append(b, tenant...)
	b = append(b, sep)
	return append(b, key...)
}

// decodeExpiryKey splits an idempotency_expiry key into the expiry and the
// idempotency bucket key (tenant ‖ 0x00 ‖ key).
func decodeExpiryKey(k []byte) (expires uint64, idemKey []byte, err error) {
	if len(k) < 8+2 || bytes.IndexByte(k[8:], sep) < 1 {
		return 0, nil, errors.New("malformed idempotency expiry key")
	}
	return binary.BigEndian.Uint64(k), k[8:], nil
}

// eventDeliveryKey is event ID ‖ 0x00 ‖ delivery ID.
func eventDeliveryKey(eventID, deliveryID string) []byte {
	b := make([]byte, 0, len(eventID)+1+len(deliveryID))
	b = append(b, eventID...)
	b = append(b, sep)
	return append(b, deliveryID...)
}

// retryKey is due(8) ‖ delivery ID: the retry index in due order, so
// First() is the next delivery due.
func retryKey(due time.Time, deliveryID string) []byte {
	b := make([]byte, 8, 8+len(deliveryID))
	binary.BigEndian.PutUint64(b, unixNano(due))
	return append(b, deliveryID...)
}

// decodeRetryKey splits a retry index key.
func decodeRetryKey(k []byte) (due time.Time, deliveryID string, err error) {
	if len(k) <= 8 {
		return time.Time{}, "", errors.New("malformed retry index key")
	}
	return keyTime(binary.BigEndian.Uint64(k)), string(k[8:]), nil
}

// deadLetterKey is tenant ‖ 0x00 ‖ deadAt(8) ‖ delivery ID: a tenant's
// dead letters, oldest death first.
func deadLetterKey(tenant string, deadAt time.Time, deliveryID string) []byte {
	return append(tenantPrefix(tenant), deadLetterSuffix(deadAt, deliveryID)...)
}

// deadLetterSuffix is the part of a dead-letter key after the tenant
// prefix: deadAt(8) ‖ delivery ID. A page cursor encodes it.
func deadLetterSuffix(deadAt time.Time, deliveryID string) []byte {
	b := make([]byte, 8, 8+len(deliveryID))
	binary.BigEndian.PutUint64(b, unixNano(deadAt))
	return append(b, deliveryID...)
}

// decodeDeadLetterSuffix splits deadAt(8) ‖ delivery ID.
func decodeDeadLetterSuffix(s []byte) (deadAt time.Time, deliveryID string, err error) {
	if len(s) <= 8 {
		return time.Time{}, "", errors.New("malformed dead letter key")
	}
	return keyTime(binary.BigEndian.Uint64(s)), string(s[8:]), nil
}

// encodeCursor makes the opaque page cursor for a dead-letter key suffix.
func encodeCursor(suffix []byte) string {
	return base64.RawURLEncoding.EncodeToString(suffix)
}

// decodeCursor returns the dead-letter key suffix a cursor stands for.
func decodeCursor(cursor string) ([]byte, error) {
	s, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, err
	}
	if _, _, err := decodeDeadLetterSuffix(s); err != nil {
		return nil, err
	}
	return s, nil
}

// tenantEventKey is tenant ‖ 0x00 ‖ seq(8): a tenant's events in log order.
func tenantEventKey(tenant string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(tenantPrefix(tenant), seq)
}

// tenantDeliveryKey is tenant ‖ 0x00 ‖ event seq(8) ‖ delivery ID: a
// tenant's deliveries in the log order of their events.
func tenantDeliveryKey(tenant string, seq uint64, deliveryID string) []byte {
	return append(tenantEventKey(tenant, seq), deliveryID...)
}

// pausedKey is tenant ‖ 0x00 ‖ endpoint ID ‖ 0x00 ‖ delivery ID: an
// endpoint's paused deliveries.
func pausedKey(tenant, endpointID, deliveryID string) []byte {
	b := append(tenantPrefix(tenant), endpointID...)
	b = append(b, sep)
	return append(b, deliveryID...)
}

// lineKey is endpoint ID ‖ 0x00 ‖ line: a line's entry in line_heads,
// and the start of its entries in line_waiting. Endpoint IDs and lines
// never contain 0x00 (ordering keys have no control characters).
func lineKey(endpointID, line string) []byte {
	b := make([]byte, 0, len(endpointID)+1+len(line)+1)
	b = append(b, endpointID...)
	b = append(b, sep)
	return append(b, line...)
}

// keyTailKey is endpoint ID ‖ 0x00 ‖ ordering key: the key of an
// ordering key's last delivery to an endpoint in key_tails.
func keyTailKey(endpointID, orderingKey string) []byte {
	return lineKey(endpointID, orderingKey)
}

// lineWaitingPrefix is lineKey ‖ 0x00: the start of a line's waiting
// deliveries in line_waiting.
func lineWaitingPrefix(endpointID, line string) []byte {
	return append(lineKey(endpointID, line), sep)
}

// lineWaitingKey is endpoint ID ‖ 0x00 ‖ line ‖ 0x00 ‖ sequence(8) ‖
// delivery ID: a line's waiting deliveries in line order (Sequence, then
// ID), so the first is the next to be promoted.
func lineWaitingKey(endpointID, line string, sequence uint64, deliveryID string) []byte {
	b := binary.BigEndian.AppendUint64(lineWaitingPrefix(endpointID, line), sequence)
	return append(b, deliveryID...)
}
