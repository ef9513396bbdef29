package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

// ExportSink receives what Export reads from a database file, record by
// record, in the order of its methods below. An error from one ends the
// export with that error. A method must not keep the slices it is given
// past its return unless it copies them (Export gives each call its own,
// but a sink that buffers should not count on more).
//
// The PostgreSQL driver's bulk import (postgres.Import) is one: the
// migration command passes it to Export as it is.
type ExportSink interface {
	// Tenant is a live tenant.
	Tenant(engine.Tenant) error
	// DeletedTenant is a tenant deleted at at whose events, deliveries
	// and idempotency keys are still being purged: they are exported
	// with the others, and the target goes on purging them.
	DeletedTenant(id string, at time.Time) error
	// Sequence is the last event Sequence tenant (live, deleted or
	// purged) gave: the target numbers the tenant's next event one more.
	Sequence(tenant string, last uint64) error
	EventType(engine.EventType) error
	// Endpoint is an endpoint with its secrets in plain.
	Endpoint(engine.Endpoint) error
	// AccessToken is a tenant access token under hash, the token's
	// SHA-256 (the token itself is never stored).
	AccessToken(hash [sha256.Size]byte, t engine.AccessToken) error
	// Task is a background task, as stored (a running one with its
	// progress and lease: the target's runner resumes it).
	Task(engine.Task) error
	// Event is an event, in log order, its Seq its place in this file's
	// log and its Body the stored bytes verbatim, with its deliveries
	// (every state, with their attempts and replays) in ID order.
	Event(ev engine.Event, ds []engine.Delivery) error
	// Idempotency is an Idempotency-Key record: ingest of key by tenant
	// with the request of requestHash made eventID, until expires.
	Idempotency(tenant, key string, requestHash [sha256.Size]byte, eventID string, expires time.Time) error
}

// ExportCounts are how many records of each kind Export read.
type ExportCounts struct {
	Tenants, DeletedTenants, EventTypes, Endpoints, AccessTokens int
	Events, Deliveries, IdempotencyKeys                          int
	Tasks                                                        int
}

// Export reads everything of the stopped database file at path that a
// copy into another store needs, in one read transaction, and hands it to
// sink: tenants (and tenants deleted but not purged yet), the event-type
// catalogue, endpoints, access tokens, tasks, events in log order with
// their deliveries, and idempotency records. It never writes to the file.
//
// The file is opened read-only under its shared lock (opts.LockTimeout;
// the other fields of opts but SecretKey are ignored): while a webhookd
// runs on it, Export fails with an error wrapping ErrInUse, and a webhookd
// started during the export waits for it and then fails the same way.
// A file of a newer schema than this webhookd's is refused, as Open does.
//
// Secrets are given to sink in plain, opened with opts.SecretKey, which
// must be the file's key when its secrets are sealed (ErrSecretKeyRequired,
// ErrSecretKeyMismatch otherwise, as at Open). They are not passed on
// sealed because a sealed secret is bound to this file's key and to
// nothing else of use: the target seals them again with its own key
// (which may be another one) and records that key as its own, as it does
// for every endpoint written to it. The plain secrets are only in memory.
//
// Export also checks the file against itself: every delivery must belong
// to an event of the log (a delivery no event lists fails the export).
func Export(path string, opts Options, sink ExportSink) (ExportCounts, error) {
	sealer, err := sealing.New(opts.SecretKey)
	if err != nil {
		return ExportCounts{}, fmt.Errorf("storage: export %s: %w", path, err)
	}
	db, err := openReadOnly(path, opts.LockTimeout)
	if err != nil {
		return ExportCounts{}, err
	}
	defer db.Close()
	var n ExportCounts
	err = db.View(func(tx *bolt.Tx) error {
		if err := exportCheck(tx, sealer); err != nil {
			return err
		}
		return exportAll(tx, sealer, sink, &n)
	})
	if err != nil {
		return n, fmt.Errorf("storage: export %s: %w", path, err)
	}
	return n, nil
}

// CheckExportable reports, without exporting anything, what Export would
// refuse the file at path for before it reads a record: in use by a
// running webhookd (ErrInUse), not a webhookd database, a newer schema,
// owed fan-outs (ErrFanOutsOwed), secrets sealed with another key than
// opts.SecretKey's or none. A migration asks it before it connects to
// its target, so that a file it cannot copy leaves the target untouched.
func CheckExportable(path string, opts Options) error {
	sealer, err := sealing.New(opts.SecretKey)
	if err != nil {
		return fmt.Errorf("storage: export %s: %w", path, err)
	}
	db, err := openReadOnly(path, opts.LockTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error { return exportCheck(tx, sealer) }); err != nil {
		return fmt.Errorf("storage: export %s: %w", path, err)
	}
	return nil
}

// ErrFanOutsOwed is returned (wrapped) by Export for a file whose owed
// fan-outs (fanout.go) are not stored yet, as a kill or a crash leaves
// them: Open stores them, so a start of webhookd on the file and a stop
// make it exportable.
var ErrFanOutsOwed = errors.New("owed fan-outs")

// exportCheck refuses a file Open would refuse: a newer schema, or
// secrets sealed with a key other than sealer's (or none).
func exportCheck(tx *bolt.Tx, sealer *sealing.Sealer) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return errors.New("not a webhookd database (no meta bucket)")
	}
	v := meta.Get(keySchema)
	if len(v) != 8 {
		return errors.New("not a webhookd database (no schema version)")
	}
	if got := binary.BigEndian.Uint64(v); got > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this webhookd understands (%d): run a newer webhookd", got, schemaVersion)
	}
	if c := tx.Bucket(bucketFanOuts); c != nil {
		if n := c.Stats().KeyN; n > 0 {
			return fmt.Errorf("%w: %d events acknowledged just before webhookd stopped have their deliveries not written yet", ErrFanOutsOwed, n)
		}
	}
	stored := meta.Get(keySecretKeyID)
	switch {
	case stored != nil && sealer == nil:
		return fmt.Errorf("%w (key id %x): set WEBHOOKD_SECRET_KEY or [storage] secret_key_file to the key they were encrypted with", ErrSecretKeyRequired, stored)
	case stored != nil:
		if id := sealer.ID(); !bytes.Equal(stored, id[:]) {
			return fmt.Errorf("%w (the file's key id is %x, the configured key's %x)", ErrSecretKeyMismatch, stored, id)
		}
	}
	return nil
}

// exportAll walks tx into sink, counting into n.
func exportAll(tx *bolt.Tx, sealer *sealing.Sealer, sink ExportSink, n *ExportCounts) error {
	err := forEach(tx, bucketTenants, func(k, v []byte) error {
		t, err := decodeTenant(v)
		if err != nil {
			return fmt.Errorf("tenant %q: %w", k, err)
		}
		n.Tenants++
		return sink.Tenant(t)
	})
	if err != nil {
		return err
	}
	err = forEach(tx, bucketDeletedTenants, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("deleted tenant %q: malformed deletion time", k)
		}
		n.DeletedTenants++
		return sink.DeletedTenant(string(k), keyTime(binary.BigEndian.Uint64(v)))
	})
	if err != nil {
		return err
	}
	err = forEach(tx, bucketTenantSequences, func(k, v []byte) error {
		last, err := decodeSeq(v)
		if err != nil {
			return fmt.Errorf("sequence of tenant %q: %w", k, err)
		}
		return sink.Sequence(string(k), last)
	})
	if err != nil {
		return err
	}
	err = forEach(tx, bucketEventTypes, func(k, v []byte) error {
		et, err := decodeEventType(v)
		if err != nil {
			return fmt.Errorf("event type %q: %w", k, err)
		}
		n.EventTypes++
		return sink.EventType(et)
	})
	if err != nil {
		return err
	}
	err = forEach(tx, bucketEndpoints, func(k, v []byte) error {
		ep, err := decodeEndpoint(v)
		if err != nil {
			return fmt.Errorf("endpoint %q: %w", k, err)
		}
		if err := sealer.OpenSecrets(&ep); err != nil {
			return err
		}
		n.Endpoints++
		return sink.Endpoint(ep)
	})
	if err != nil {
		return err
	}
	err = forEach(tx, bucketAccessTokens, func(k, v []byte) error {
		if len(k) != sha256.Size {
			return fmt.Errorf("access token key of %d bytes, want %d", len(k), sha256.Size)
		}
		t, err := decodeAccessToken(v)
		if err != nil {
			return fmt.Errorf("access token %x: %w", k[:4], err)
		}
		n.AccessTokens++
		return sink.AccessToken([sha256.Size]byte(k), t)
	})
	if err != nil {
		return err
	}
	err = forEach(tx, bucketTasks, func(k, v []byte) error {
		t, err := decodeTask(v)
		if err != nil {
			return fmt.Errorf("task %q: %w", k, err)
		}
		n.Tasks++
		return sink.Task(t)
	})
	if err != nil {
		return err
	}
	if err := exportEvents(tx, sink, n); err != nil {
		return err
	}
	return forEach(tx, bucketIdempotency, func(k, v []byte) error {
		i := bytes.IndexByte(k, sep)
		if i < 1 {
			return fmt.Errorf("malformed idempotency key %q", k)
		}
		r, err := decodeIdempotency(v)
		if err != nil {
			return fmt.Errorf("idempotency key %q: %w", k, err)
		}
		n.IdempotencyKeys++
		return sink.Idempotency(string(k[:i]), string(k[i+1:]), r.RequestHash, r.EventID, r.Expires)
	})
}

// exportEvents hands sink every event in log order with its deliveries,
// and checks that no delivery was left out.
func exportEvents(tx *bolt.Tx, sink ExportSink, n *ExportCounts) error {
	err := eachEvent(tx, nil, func(ev engine.Event, ds []engine.Delivery) error {
		n.Events++
		n.Deliveries += len(ds)
		return sink.Event(ev, ds)
	})
	if err != nil {
		return err
	}
	if all := tx.Bucket(bucketDeliveries).Stats().KeyN; all != n.Deliveries {
		return fmt.Errorf("the file has %d deliveries and its events list %d of them: the file is damaged", all, n.Deliveries)
	}
	return nil
}

// forEach calls fn for every key of bucket name in key order; a bucket an
// older file does not have yet is empty.
func forEach(tx *bolt.Tx, name []byte, fn func(k, v []byte) error) error {
	b := tx.Bucket(name)
	if b == nil {
		return nil
	}
	return b.ForEach(fn)
}
