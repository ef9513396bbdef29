package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/postgres/pgtest"
	"github.com/webhookd/webhookd/storage"
)

// The drivers a node can run on, and what each offers an operator besides
// serving: a check of the stored state, a hot backup and its restore,
// compaction and the secret key's rotation.
const (
	bbolt      = "bbolt"
	postgreSQL = "postgres"
)

// pgBinEnv names the bin directory of a PostgreSQL installation: its
// pg_dump and psql back up and restore a schema, and a test that runs
// servers of its own runs them from it (.ci/postgres sets it).
const pgBinEnv = "WEBHOOKD_TEST_PGBIN"

// store is where a test's node keeps its state.
type store struct {
	driver string
	dir    string // the test's directory
	path   string // bbolt: the database file
	url    string // postgres: the server
	schema string // postgres: the node's schema
	pgBin  string // postgres: pg_dump and psql are here
	n      int    // backups taken, to name them
}

// newStore returns the store of a test on driver, in dir. On postgres it
// makes a schema of its own (pgtest) and skips t when the server or the
// tools are not there (fails it in CI).
func newStore(t testing.TB, driver, dir string) *store {
	t.Helper()
	s := &store{driver: driver, dir: dir, path: filepath.Join(dir, "data", "webhookd.db")}
	if driver == postgreSQL {
		s.url, s.schema = pgtest.URL(t), pgtest.Schema(t)
		s.pgBin = os.Getenv(pgBinEnv)
		for _, tool := range []string{"pg_dump", "psql"} {
			if _, err := os.Stat(filepath.Join(s.pgBin, tool)); s.pgBin == "" || err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s=%q has no %s: .ci/postgres sets it", pgBinEnv, s.pgBin, tool)
				}
				t.Skipf("no %s: set %s to a PostgreSQL bin directory (e.g. /usr/lib/postgresql/15/bin)", tool, pgBinEnv)
			}
		}
	}
	return s
}

// configure sets c's [storage] for the store.
func (s *store) configure(c config) {
	c.set("storage", "path", s.path)
	if s.driver == postgreSQL {
		c.set("storage", "driver", postgreSQL)
		c.set("storage", "url", s.url)
		c.set("storage", "schema", s.schema)
	}
}

// check checks the stored state with a node stopped (on postgres, also
// with nodes running): the bbolt file with storage.DB.Check (bbolt's
// page check and webhookd's index invariants), the schema with
// pgInvariants.
func (s *store) check(ctx context.Context, key []byte) error {
	if s.driver == postgreSQL {
		return pgInvariants(ctx, s.url, s.schema)
	}
	return checkFile(s.path, key)
}

// checkFile opens the bbolt file at path as a node would and checks it.
func checkFile(path string, key []byte) error {
	db, err := storage.Open(path, storage.Options{SecretKey: key, LockTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Check()
}

// opensWith reports whether the stopped store opens with key: whether
// its endpoint secrets are sealed with it.
func (s *store) opensWith(ctx context.Context, key []byte) bool {
	if s.driver == postgreSQL {
		st, err := postgres.Open(ctx, s.url, postgres.Options{Schema: s.schema, SecretKey: key})
		if err == nil {
			st.Close()
		}
		return err == nil
	}
	db, err := storage.Open(s.path, storage.Options{SecretKey: key, LockTimeout: 10 * time.Second})
	if err == nil {
		db.Close()
	}
	return err == nil
}

// backup takes a hot backup of the running node n (config file
// configPath) as an operator would, restores it where a node could start
// on it, opens and checks it, and returns the IDs of the events it
// holds.
//
// bbolt: webhookd backup -url (GET /v1/admin/backup, which checks the
// copy before it keeps it), the copy placed as a database file of its
// own, opened with storage.Open and Check. postgres: pg_dump of the
// node's schema while it runs (one consistent snapshot, as
// docs/cluster.md says to back up), restored with psql into a new
// schema, opened with postgres.Open (the schema's version and the secret
// key) and checked with pgInvariants.
func (s *store) backup(ctx context.Context, t testing.TB, n *node, configPath string, key []byte) (map[string]bool, error) {
	s.n++
	if s.driver == postgreSQL {
		return s.pgBackup(ctx, t, key)
	}
	out := filepath.Join(s.dir, "backups", fmt.Sprintf("backup-%d.db", s.n))
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return nil, err
	}
	if msg, err := command(t, "backup", "-config", configPath, "-url", n.URL, "-o", out); err != nil {
		return nil, fmt.Errorf("webhookd backup: %v: %s", err, strings.TrimSpace(msg))
	}
	restored := filepath.Join(s.dir, "restored", fmt.Sprintf("%d", s.n), "webhookd.db")
	if err := copyFile(out, restored); err != nil {
		return nil, err
	}
	db, err := storage.Open(restored, storage.Options{SecretKey: key})
	if err != nil {
		return nil, fmt.Errorf("open the restored backup: %w", err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		return nil, fmt.Errorf("the restored backup: %w", err)
	}
	ids := map[string]bool{}
	err = db.ForEachEvent(ctx, func(ev engine.Event, _ []engine.Delivery) error {
		ids[ev.ID] = true
		return nil
	})
	return ids, err
}

func (s *store) pgBackup(ctx context.Context, t testing.TB, key []byte) (map[string]bool, error) {
	target := pgtest.Schema(t)
	dump, err := exec.CommandContext(ctx, filepath.Join(s.pgBin, "pg_dump"), "--schema="+s.schema, "--no-owner", "--no-privileges", "--dbname="+s.url).Output()
	if err != nil {
		return nil, fmt.Errorf("pg_dump: %w: %s", err, stderrOf(err))
	}
	// The schema's name is "test_" and 12 random hex digits: nothing
	// else in the dump spells it.
	script := strings.ReplaceAll(string(dump), s.schema, target)
	psql := exec.CommandContext(ctx, filepath.Join(s.pgBin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "--dbname="+s.url)
	psql.Stdin = strings.NewReader(script)
	if out, err := psql.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("psql (restore): %w: %s", err, out)
	}
	st, err := postgres.Open(ctx, s.url, postgres.Options{Schema: target, SecretKey: key})
	if err != nil {
		return nil, fmt.Errorf("open the restored schema: %w", err)
	}
	st.Close()
	if err := pgInvariants(ctx, s.url, target); err != nil {
		return nil, fmt.Errorf("the restored schema: %w", err)
	}
	return pgEventIDs(ctx, s.url, target)
}

// compact compacts the stopped node's database in place (webhookd compact
// -in-place). On postgres the command refuses, saying that autovacuum
// does it: that refusal is its success.
func (s *store) compact(t testing.TB, configPath string) error {
	msg, err := command(t, "compact", "-config", configPath, "-in-place")
	if s.driver == postgreSQL {
		if err == nil || !strings.Contains(msg, "autovacuum") {
			return fmt.Errorf("webhookd compact on postgres: want a refusal naming autovacuum, got %v: %s", err, msg)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("webhookd compact -in-place: %v: %s", err, strings.TrimSpace(msg))
	}
	return nil
}

// rotateKey re-seals the stopped node's endpoint secrets under the key in
// newKeyFile (webhookd rotate-key), and reports whether it did: on
// postgres the command refuses (it works on the bbolt file), and the
// node keeps its key.
func (s *store) rotateKey(t testing.TB, configPath, newKeyFile string) (bool, error) {
	msg, err := command(t, "rotate-key", "-config", configPath, "-new-key-file", newKeyFile)
	if s.driver == postgreSQL {
		if err == nil || !strings.Contains(msg, "bbolt file") {
			return false, fmt.Errorf("webhookd rotate-key on postgres: want a refusal naming the bbolt file, got %v: %s", err, msg)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("webhookd rotate-key: %v: %s", err, strings.TrimSpace(msg))
	}
	return true, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// pgInvariants checks a schema's rows against each other, what the
// bbolt file's Check holds of its indexes and more that PostgreSQL's own
// constraints do not (a pending delivery has its due time, a dead one
// its time of death, a line at most one head: those are CHECK and UNIQUE
// constraints of the schema): every delivery's event is stored, at the
// place the delivery names; every waiting delivery's line has a head; a
// tenant's event sequences are unique and at most its last; a live
// idempotency key names a stored event; no event or endpoint outlives
// its tenant. It returns nil or the problems found, at most five of each.
func pgInvariants(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return err
	}
	checks := []struct{ what, sql string }{
		{"deliveries whose event is not stored where they say", `SELECT d.id FROM deliveries d LEFT JOIN events e ON e.id = d.event_id
			WHERE e.id IS NULL OR e.seq <> d.event_seq OR e.tenant_id <> d.tenant_id LIMIT 5`},
		{"waiting deliveries of a line without a head", `SELECT w.id FROM deliveries w WHERE w.state = 'waiting' AND NOT EXISTS (
			SELECT 1 FROM deliveries h WHERE h.endpoint_id = w.endpoint_id AND h.line = w.line AND h.line <> ''
			AND (h.state IN ('pending', 'paused') OR h.blocking)) LIMIT 5`},
		{"events numbered above their tenant's last sequence", `SELECT e.id FROM events e LEFT JOIN tenant_sequences s ON s.tenant_id = e.tenant_id
			WHERE e.sequence > 0 AND (s.last IS NULL OR e.sequence > s.last) LIMIT 5`},
		{"sequences given to two events of a tenant", `SELECT tenant_id || ' ' || sequence FROM events WHERE sequence > 0
			GROUP BY tenant_id, sequence HAVING count(*) > 1 LIMIT 5`},
		{"live idempotency keys whose event is gone", `SELECT i.tenant_id || ' ' || i.key FROM idempotency i
			WHERE i.expires > $1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = i.event_id)
			AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = i.tenant_id AND t.deleted_at IS NOT NULL) LIMIT 5`},
		{"events without a tenant", `SELECT e.id FROM events e WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = e.tenant_id) LIMIT 5`},
		{"endpoints of a deleted tenant", `SELECT ep.id FROM endpoints ep LEFT JOIN tenants t ON t.id = ep.tenant_id
			WHERE t.id IS NULL OR t.deleted_at IS NOT NULL LIMIT 5`},
	}
	var errs []error
	if err := pgDocuments(ctx, conn); err != nil {
		errs = append(errs, fmt.Errorf("postgres: check %s: %w", schema, err))
	}
	for _, c := range checks {
		var args []any
		if strings.Contains(c.sql, "$1") {
			args = append(args, time.Now().UnixNano())
		}
		rows, err := conn.Query(ctx, c.sql, args...)
		if err != nil {
			return fmt.Errorf("check %s: %w", c.what, err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("check %s: %w", c.what, err)
		}
		if len(found) > 0 {
			errs = append(errs, fmt.Errorf("postgres: check %s: %s: %s", schema, c.what, strings.Join(found, ", ")))
		}
	}
	return errors.Join(errs...)
}

// pgDocuments checks that each delivery's columns (state, line) are its
// document's: what SQL selects by is what the engine reads.
func pgDocuments(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, "SELECT id, state, line, doc FROM deliveries")
	if err != nil {
		return err
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id, state, line string
		var doc []byte
		if err := rows.Scan(&id, &state, &line, &doc); err != nil {
			return err
		}
		var d struct { // of the document, only what the columns repeat: the rest is the store's own shape
			State string `json:"state"`
			Line  string `json:"line"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", id, err))
		} else if string(d.State) != state || d.Line != line {
			bad = append(bad, fmt.Sprintf("%s: row %s %q, document %s %q", id, state, line, d.State, d.Line))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d deliveries whose columns are not their document's, e.g. %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
	}
	return nil
}

// pgEventIDs returns the IDs of the events a schema holds.
func pgEventIDs(ctx context.Context, url, schema string) (map[string]bool, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM "+pgx.Identifier{schema}.Sanitize()+".events")
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, err
}
