package storage

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

// Encryption at rest of endpoint secrets.
//
// With Options.SecretKey set, every endpoint secret (each signing key and
// each custom header's value) is stored sealed by package sealing (AES-256-GCM; the format is in its doc), so that a copy of
// the database file (a backup, a stolen disk) does not give away the keys
// that sign webhooks.
//
// The meta bucket's "secret_key_id" holds the ID of the key the file's
// secrets are sealed with, and is absent while they are stored in plain.
// Open checks it: a file with it refuses to open without the key
// (ErrSecretKeyRequired) or with another key (ErrSecretKeyMismatch); a file
// without it, opened with a key, has its plain secrets sealed in the same
// transaction as the key ID is written. RotateSecretKey re-seals a stopped
// database under a new key and rewrites the file.
//
// Only secrets are sealed: event bodies, URLs, header names and the rest
// are stored in plain. Nothing here ever logs or returns a key or a secret.

// SecretKeySize is the size of Options.SecretKey: AES-256.
const SecretKeySize = sealing.KeySize

// keySecretKeyID is the meta key that holds the ID of the key the secrets
// are sealed with.
var keySecretKeyID = []byte("secret_key_id")

// ErrSecretKeyRequired is returned (wrapped) by Open for a file whose
// secrets are sealed when Options.SecretKey is not set. It is
// sealing.ErrKeyRequired.
var ErrSecretKeyRequired = sealing.ErrKeyRequired

// ErrSecretKeyMismatch is returned (wrapped) by Open when Options.SecretKey
// is not the key the file's secrets are sealed with. It is
// sealing.ErrKeyMismatch.
var ErrSecretKeyMismatch = sealing.ErrKeyMismatch

// SecretKeyID returns the 8-byte ID of key, as stored in the meta bucket
// and shown (in hex) in errors: it tells keys apart without revealing them.
// It is sealing.KeyID.
func SecretKeyID(key []byte) [8]byte { return sealing.KeyID(key) }

// initSecrets makes the file's secrets agree with s at Open: see the
// comment at the top of this file.
func initSecrets(tx *bolt.Tx, s *sealing.Sealer) error {
	meta := tx.Bucket(bucketMeta)
	stored := meta.Get(keySecretKeyID)
	if s == nil {
		if stored != nil {
			return fmt.Errorf("%w (key id %x): set WEBHOOKD_SECRET_KEY or [storage] secret_key_file to the key they were encrypted with", ErrSecretKeyRequired, stored)
		}
		return nil
	}
	id := s.ID()
	switch {
	case stored != nil && !bytes.Equal(stored, id[:]):
		return fmt.Errorf("%w (the file's key id is %x, the configured key's %x); to change keys, stop webhookd and run webhookd rotate-key", ErrSecretKeyMismatch, stored, id)
	case stored == nil:
		if _, err := resealAll(tx, nil, s); err != nil {
			return err
		}
		return meta.Put(keySecretKeyID, id[:])
	}
	return nil
}

// resealAll rewrites every endpoint record with its secrets opened by from
// (nil: they are plain) and sealed by to (nil: stored plain). It returns
// how many endpoints it rewrote.
func resealAll(tx *bolt.Tx, from, to *sealing.Sealer) (int, error) {
	b := tx.Bucket(bucketEndpoints)
	var keys, values [][]byte
	err := b.ForEach(func(k, v []byte) error {
		ep, err := decodeEndpoint(v)
		if err != nil {
			return fmt.Errorf("endpoint %q: %w", k, err)
		}
		if err := from.OpenSecrets(&ep); err != nil {
			return err
		}
		nv, err := encodeEndpoint(to.SealSecrets(ep))
		if err != nil {
			return err
		}
		keys, values = append(keys, bytes.Clone(k)), append(values, nv)
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i := range keys {
		if err := b.Put(keys[i], values[i]); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// openSecrets opens ep's sealed secrets with the database's key.
func (db *DB) openSecrets(ep *engine.Endpoint) error {
	return db.secrets.OpenSecrets(ep)
}

// sealSecrets returns ep with its secrets sealed with the database's key
// (as is when it has none).
func (db *DB) sealSecrets(ep engine.Endpoint) engine.Endpoint {
	return db.secrets.SealSecrets(ep)
}

// SecretKeyID returns the hex ID of the key the database's secrets are
// sealed with, or "" when they are stored in plain.
func (db *DB) SecretKeyID() string {
	if db.secrets == nil {
		return ""
	}
	id := db.secrets.ID()
	return hex.EncodeToString(id[:])
}

// RotateResult is what RotateSecretKey did.
type RotateResult struct {
	// Endpoints is how many endpoints had their secrets re-sealed.
	Endpoints int
	// AlreadyRotated: the file was under the new key already, sealed by
	// an earlier run that was stopped before its rewrite; only the
	// rewrite was left to do.
	AlreadyRotated bool
	// Stale: a path + ".rotate" left by an interrupted run was replaced.
	Stale bool
}

// RotateSecretKey re-seals every endpoint secret (signing keys and custom
// header values) of the database file at path, now sealed with oldKey (or
// stored in plain, when oldKey is empty and the file has no key ID), under
// newKey, and rewrites the file.
//
// IMPORTANT: it needs the file to itself: webhookd must be stopped (Open
// fails with ErrInUse otherwise). The re-sealing is one transaction, so a
// crash leaves every secret under the old key or every one under the new.
// Then the file is rewritten (rewriteFile): bbolt does not clear the pages
// a transaction frees, and the rewrite leaves no copy of a secret under the
// old key (or in plain) behind in them.
//
// A run stopped between the two leaves the file under the new key with
// old copies in its free pages (and perhaps a half-written .rotate).
// Running the same rotation again finishes it: when the file does not open
// with oldKey but does with newKey, the re-sealing is skipped and the
// rewrite done (AlreadyRotated), and a stale .rotate is replaced (Stale).
func RotateSecretKey(path string, oldKey, newKey []byte, opts Options) (RotateResult, error) {
	var res RotateResult
	to, err := sealing.New(newKey)
	if err != nil {
		return res, fmt.Errorf("storage: rotate secret key: new key: %w", err)
	}
	if to == nil {
		return res, errors.New("storage: rotate secret key: no new key")
	}
	opts.SecretKey = oldKey
	db, err := Open(path, opts)
	if errors.Is(err, ErrSecretKeyMismatch) || errors.Is(err, ErrSecretKeyRequired) {
		opts.SecretKey = newKey
		if again, err2 := Open(path, opts); err2 == nil {
			db, err, res.AlreadyRotated = again, nil, true
		}
	}
	if err != nil {
		return res, err
	}
	defer db.Close() // after the rewrite is in place: see rewriteFile
	if !res.AlreadyRotated {
		err = db.update(context.Background(), func(tx *bolt.Tx) error {
			var err error
			if res.Endpoints, err = resealAll(tx, db.secrets, to); err != nil {
				return err
			}
			id := to.ID()
			return tx.Bucket(bucketMeta).Put(keySecretKeyID, id[:])
		})
		if err != nil {
			return res, fmt.Errorf("storage: rotate secret key of %s: %w", path, err)
		}
	}
	if res.Stale, err = rewriteFile(db, path); err != nil {
		return res, fmt.Errorf("storage: rotate secret key of %s: the secrets are under the new key, but the file was not rewritten (run the same rotate-key again to finish): %w", path, err)
	}
	return res, nil
}

// rewriteFile copies the live records of db, open on path, into
// path + ".rotate" and renames that over path once it is complete, fsynced
// and checked (see Replacement). It reports whether a .rotate left by an
// interrupted run was replaced.
//
// IMPORTANT: db must stay open until rewriteFile returns, and be closed
// after without another write. Its lock on the old file is what keeps
// every other process off the file until the new one is in place: one that
// tries waits for the lock, then finds the old file replaced and opens the
// new one (openBolt), whose lock rewriteFile holds until it returns. A
// write to db after the rename would go to the old, unlinked file.
func rewriteFile(db *DB, path string) (stale bool, err error) {
	r, err := NewReplacement(path, ".rotate")
	if err != nil {
		return false, err
	}
	defer r.Close()
	_, err = compactInto(r, db.bolt)
	return r.Stale(), err
}
