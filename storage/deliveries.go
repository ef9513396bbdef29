package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// getDelivery reads delivery id, or CodeDeliveryNotFound; a waiting one
// with WaitingBehind its line's head as stored in tx.
func getDelivery(tx *bolt.Tx, id string) (engine.Delivery, error) {
	v := tx.Bucket(bucketDeliveries).Get([]byte(id))
	if v == nil {
		return engine.Delivery{}, engine.DeliveryNotFound()
	}
	d, err := decodeDelivery(v)
	if err == nil && d.State == engine.StateWaiting {
		d.WaitingBehind = string(tx.Bucket(bucketLineHeads).Get(lineKey(d.EndpointID, d.Line)))
	}
	return d, err
}

// LineHead returns the head of the line (endpointID, line) and whether
// the line has one.
func (db *DB) LineHead(ctx context.Context, endpointID, line string) (engine.Delivery, bool, error) {
	var out engine.Delivery
	var found bool
	err := db.view(ctx, func(tx *bolt.Tx) error {
		if line == "" {
			return nil
		}
		id := tx.Bucket(bucketLineHeads).Get(lineKey(endpointID, line))
		if id == nil {
			return nil
		}
		d, err := getDelivery(tx, string(id))
		if err != nil {
			return fmt.Errorf("head %s: %w", id, err)
		}
		out, found = d, true
		return nil
	})
	if err != nil {
		return engine.Delivery{}, false, wrap("line head of "+endpointID, err)
	}
	return out, found, nil
}

// putDelivery stores d and returns it as stored (times in UTC), which is
// what a later read returns.
func putDelivery(tx *bolt.Tx, d engine.Delivery) (engine.Delivery, error) {
	v, err := encodeDelivery(d)
	if err != nil {
		return engine.Delivery{}, err
	}
	if err := tx.Bucket(bucketDeliveries).Put([]byte(d.ID), v); err != nil {
		return engine.Delivery{}, err
	}
	return storedDelivery(d)
}

// Delivery returns delivery id of tenant, or CodeDeliveryNotFound (also
// when the delivery belongs to another tenant).
func (db *DB) Delivery(ctx context.Context, tenant, id string) (engine.Delivery, error) {
	var out engine.Delivery
	err := db.view(ctx, func(tx *bolt.Tx) error {
		d, err := getDelivery(tx, id)
		if err != nil {
			return err
		}
		if d.TenantID != tenant {
			return engine.DeliveryNotFound()
		}
		out = d
		return nil
	})
	if err != nil {
		return engine.Delivery{}, wrap("delivery "+id, err)
	}
	return out, nil
}

// AttemptInput reads, in one read transaction, the delivery id (of any
// tenant; CodeDeliveryNotFound when there is none), its event's body
// verbatim and its endpoint. A deleted endpoint is EndpointFound false.
func (db *DB) AttemptInput(ctx context.Context, deliveryID string) (engine.AttemptInput, error) {
	var in engine.AttemptInput
	var epKey, epRaw []byte // set when the endpoint was decoded, not cached
	var readBody bool       // the body was read from the log, not cached
	err := db.view(ctx, func(tx *bolt.Tx) error {
		d, err := getDelivery(tx, deliveryID)
		if err != nil {
			return err
		}
		body, trace, ok := db.attemptBodies.get(d.EventID)
		if !ok {
			logged, logTrace, err := getEventBody(tx, d.EventID)
			if err != nil {
				return fmt.Errorf("event %s of the delivery: %w", d.EventID, err)
			}
			body, trace, readBody = bytes.Clone(logged), logTrace, true
		}
		in = engine.AttemptInput{Delivery: d, Body: body, IngestTrace: trace}
		if !validTenantID(d.TenantID) {
			return nil
		}
		key := endpointKey(d.TenantID, d.EndpointID)
		v := tx.Bucket(bucketEndpoints).Get(key)
		if v == nil {
			return nil
		}
		in.EndpointFound = true
		if ep, ok := db.attemptEndpoints.get(key, v); ok {
			in.Endpoint = ep
			return nil
		}
		if in.Endpoint, err = decodeEndpoint(v); err != nil {
			return err
		}
		epKey, epRaw = key, bytes.Clone(v)
		return nil
	})
	if err == nil && readBody {
		db.attemptBodies.put(in.Delivery.EventID, in.Body, in.IngestTrace)
	}
	if err == nil && epRaw != nil {
		if err = db.openSecrets(&in.Endpoint); err == nil { // outside the transaction
			db.attemptEndpoints.put(epKey, epRaw, in.Endpoint)
		}
	}
	if err != nil {
		return engine.AttemptInput{}, wrap("attempt input of delivery "+deliveryID, err)
	}
	return in, nil
}

// UpdateDelivery reads delivery id (of any tenant; CodeDeliveryNotFound),
// calls fn with it and stores what fn returns with its state's index entry
// (see saveDelivery), in one transaction. An error from fn aborts the
// update and is returned as is.
func (db *DB) UpdateDelivery(ctx context.Context, id string, fn func(engine.Delivery) (engine.Delivery, error)) (engine.Delivery, error) {
	var out engine.Delivery
	err := db.update(ctx, func(tx *bolt.Tx) error {
		d, err := getDelivery(tx, id)
		if err != nil {
			return err
		}
		after, err := fn(d)
		if err != nil {
			return &callerError{err}
		}
		out, err = saveDelivery(tx, d, after)
		return err
	})
	if ce := (*callerError)(nil); errors.As(err, &ce) {
		return engine.Delivery{}, ce.err
	}
	if err != nil {
		return engine.Delivery{}, wrap("update delivery "+id, err)
	}
	return out, nil
}

// RecordOutcome stores u.Delivery with its state's index entries (see
// saveDelivery) if the stored delivery is still at version u.Read, and
// merges u.Endpoint into its endpoint (if it still exists), in one
// transaction, telling u.OnHealth after the commit; engine.ErrDeliveryChanged, as is, when the delivery is at
// another version. It holds no leases: it never answers
// engine.ErrClaimLost.
func (db *DB) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	id := u.Delivery.ID
	var out engine.Delivery
	var stored, merged *engine.Endpoint
	err := db.update(ctx, func(tx *bolt.Tx) error {
		stored, merged = nil, nil
		d, err := getDelivery(tx, id)
		if err != nil {
			return err
		}
		if engine.VersionOf(d) != u.Read {
			return engine.ErrDeliveryChanged
		}
		if out, err = saveDelivery(tx, d, u.Delivery); err != nil {
			return err
		}
		if u.Endpoint == nil {
			return nil
		}
		_, err = db.updateEndpoint(tx, d.TenantID, d.EndpointID, func(ep *engine.Endpoint) error {
			before, after := *ep, u.Merge(*ep)
			*ep, stored, merged = after, &before, &after
			return nil
		})
		if engine.ErrorCode(err) == engine.CodeEndpointNotFound {
			stored, merged = nil, nil
			return nil // deleted: its deliveries stay
		}
		return err
	})
	if errors.Is(err, engine.ErrDeliveryChanged) {
		return engine.Delivery{}, err
	}
	if err != nil {
		return engine.Delivery{}, wrap("update delivery "+id, err)
	}
	if merged != nil {
		u.Merged(*stored, *merged)
	}
	return out, nil
}

// UpdateDeliveries applies fn, in one transaction, to at most max of the
// deliveries sel selects (see engine.Selection), found through the paused
// index or the dead letters, and returns them as stored; none only when
// none is selected (or every one found moved before the write). The
// deliveries are found in a
// read transaction first, however many other dead letters it must read
// past, so that the write transaction, which holds the commit loop, only
// reads again (each must still be selected) and writes what it changes.
func (db *DB) UpdateDeliveries(ctx context.Context, sel engine.Selection, max int, fn func(engine.Delivery) engine.Delivery) ([]engine.Delivery, error) {
	if sel.State != engine.StatePaused && sel.State != engine.StateDead {
		return nil, fmt.Errorf("storage: update deliveries: cannot select by state %q", sel.State)
	}
	if !validTenantID(sel.Tenant) {
		return []engine.Delivery{}, nil
	}
	var ids []string
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		ids, err = selectDeliveries(tx, sel, max)
		return err
	})
	if err != nil {
		return nil, wrap("select "+string(sel.State)+" deliveries of "+sel.Tenant, err)
	}
	var out []engine.Delivery
	err = db.update(ctx, func(tx *bolt.Tx) error {
		out = []engine.Delivery{}
		for _, id := range ids {
			d, err := getDelivery(tx, id)
			if err != nil {
				return err
			}
			if !selected(sel, d) {
				continue // moved meanwhile
			}
			out = append(out, d)
		}
		// Saved in line order (a range replay makes the lowest Sequence
		// of a line its head), returned in the selection's.
		order := make([]int, len(out))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return engine.CompareLineOrder(out[a], out[b]) })
		for _, i := range order {
			d, err := saveDelivery(tx, out[i], fn(out[i]))
			if err != nil {
				return err
			}
			out[i] = d
		}
		return nil
	})
	if err != nil {
		return nil, wrap("update "+string(sel.State)+" deliveries of "+sel.Tenant, err)
	}
	return out, nil
}

// selected reports whether d is among the deliveries sel selects.
func selected(sel engine.Selection, d engine.Delivery) bool {
	if d.TenantID != sel.Tenant || d.State != sel.State || sel.EndpointID != "" && d.EndpointID != sel.EndpointID {
		return false
	}
	if sel.State == engine.StateDead {
		return !d.DeadAt.Before(sel.Since) && (sel.Until.IsZero() || d.DeadAt.Before(sel.Until))
	}
	return true
}

// selectDeliveries returns the IDs of at most max of the deliveries sel
// selects, in the order of their index.
func selectDeliveries(tx *bolt.Tx, sel engine.Selection, max int) ([]string, error) {
	var ids []string
	if sel.State == engine.StatePaused {
		if sel.EndpointID == "" {
			return nil, nil
		}
		prefix := pausedKey(sel.Tenant, sel.EndpointID, "")
		c := tx.Bucket(bucketPaused).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(ids) < max; k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix):]))
		}
		return ids, nil
	}
	prefix := tenantPrefix(sel.Tenant)
	c := tx.Bucket(bucketDeadLetters).Cursor()
	for k, _ := c.Seek(append(bytes.Clone(prefix), u64(unixNano(sel.Since))...)); k != nil && bytes.HasPrefix(k, prefix) && len(ids) < max; k, _ = c.Next() {
		deadAt, id, err := decodeDeadLetterSuffix(k[len(prefix):])
		if err != nil {
			return nil, err
		}
		if !sel.Until.IsZero() && !deadAt.Before(sel.Until) {
			break
		}
		if sel.EndpointID != "" {
			d, err := getDelivery(tx, id)
			if err != nil {
				return nil, err
			}
			if d.EndpointID != sel.EndpointID {
				continue
			}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// DeadLetters lists tenant's dead deliveries, oldest death first, starting
// after cursor (empty: from the start), at most limit (which must be at
// least 1). It returns the cursor of the next page, empty when there is no
// more. A page is read by key (Seek to the cursor), never by offset, so a
// replay between pages neither repeats nor skips a dead letter. A cursor
// that does not decode is CodeInvalidField ("cursor").
func (db *DB) DeadLetters(ctx context.Context, tenant, cursor string, limit int) ([]engine.Delivery, string, error) {
	if limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	var after []byte
	if cursor != "" {
		var err error
		if after, err = decodeCursor(cursor); err != nil {
			return nil, "", engine.InvalidCursor()
		}
	}
	out := []engine.Delivery{}
	var next string
	var last []byte // key suffix of the last dead letter in out
	err := db.view(ctx, func(tx *bolt.Tx) error {
		if !validTenantID(tenant) {
			return nil
		}
		prefix := tenantPrefix(tenant)
		c := tx.Bucket(bucketDeadLetters).Cursor()
		k, _ := c.Seek(append(bytes.Clone(prefix), after...))
		if after != nil && k != nil && bytes.Equal(k[len(prefix):], after) {
			k, _ = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(out) == limit {
				next = encodeCursor(last) // there is more
				return nil
			}
			_, id, err := decodeDeadLetterSuffix(k[len(prefix):])
			if err != nil {
				return fmt.Errorf("dead letter key %x: %w", k, err)
			}
			d, err := getDelivery(tx, id)
			if err != nil {
				return fmt.Errorf("dead letter %s: %w", id, err)
			}
			out = append(out, d)
			last = bytes.Clone(k[len(prefix):])
		}
		return nil
	})
	if err != nil {
		return nil, "", wrap("dead letters of "+tenant, err)
	}
	return out, next, nil
}

// retryIndexCheckEvery is how many entries RetryIndex visits between
// checks of its context; retryIndexDropEvery, between calls of
// dropMapped.
const (
	retryIndexCheckEvery = 1024
	retryIndexDropEvery  = 64 * 1024
)

// RetryIndex calls fn for every entry of the retry index in due order, in
// one read transaction (a consistent snapshot). It is how the timer is
// rebuilt at start. fn runs inside the transaction: it must be quick and
// must not call the DB. An error from fn (or the end of ctx) stops the walk
// and is returned.
//
// The walk lets go of the file's pages it has read as it goes (see
// dropMapped), so a million pending deliveries do not leave the process
// holding hundreds of MB of the file mapped after recovery.
func (db *DB) RetryIndex(ctx context.Context, fn func(engine.RetryEntry) error) error {
	err := db.view(ctx, func(tx *bolt.Tx) error {
		defer dropMapped(db.bolt, tx.Size())
		tenants := endpointTenants(tx)
		c := tx.Bucket(bucketRetryIndex).Cursor()
		n := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if n++; n%retryIndexCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				if n%retryIndexDropEvery == 0 {
					dropMapped(db.bolt, tx.Size())
				}
			}
			due, id, err := decodeRetryKey(k)
			if err != nil {
				return fmt.Errorf("retry index key %x: %w", k, err)
			}
			if err := fn(engine.RetryEntry{Due: due, DeliveryID: id, EndpointID: string(v), TenantID: tenants[string(v)]}); err != nil {
				return &callerError{err}
			}
		}
		return nil
	})
	if ce := (*callerError)(nil); errors.As(err, &ce) {
		return ce.err
	}
	if err != nil {
		return wrap("retry index", err)
	}
	return nil
}

// endpointTenants maps every endpoint ID to its tenant, from the keys of
// the endpoints bucket alone (tenant ‖ 0x00 ‖ endpoint ID).
func endpointTenants(tx *bolt.Tx) map[string]string {
	m := make(map[string]string)
	c := tx.Bucket(bucketEndpoints).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if tenant, id, ok := bytes.Cut(k, []byte{0}); ok {
			m[string(id)] = string(tenant)
		}
	}
	return m
}
