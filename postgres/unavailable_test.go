package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// cutProxy is a loopback TCP proxy to a database server whose
// connections the test can cut at once, as a server that crashes (or a
// primary that a failover leaves behind) ends them: without a word.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go io.Copy(s, c)
		go io.Copy(c, s)
	}
}

// cut closes the listener and every connection through it.
func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestStore_ServerGoneMidStatement: a write whose connection ends while
// it waits for the server's answer (the server crashed or was failed
// over) is CodeUnavailable, so that ingest answers 503 with Retry-After
// rather than a 500.
func TestStore_ServerGoneMidStatement(t *testing.T) {
	direct := pgtest.URL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, u.String(), Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Hold the tenants table so that the store's write waits on it, its
	// statement sent and its answer not yet come.
	locker, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, fmt.Sprintf("LOCK TABLE %s.tenants IN ACCESS EXCLUSIVE MODE", pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme"})
		done <- err
	}()
	// Wait until the write waits on the lock.
	if !poll(10*time.Second, func() bool {
		var waiting int
		if err := locker.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	}) {
		t.Fatal("the store's write never waited on the lock")
	}
	proxy.cut()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("PutTenant did not return within 10 s of its connection's end")
	}
	if got := engine.ErrorCode(err); got != engine.CodeUnavailable {
		t.Errorf("PutTenant with its connection cut: %v (code %q), want code %q", err, got, engine.CodeUnavailable)
	}
}

// TestUnavailable is the classification of errors as the database's
// absence, against pgx's own errors for a connection that ended.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the server's answer cut short", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"the server's connection ended", io.EOF, true},
		{"a connection pgx closed after a failure", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"no rows", pgx.ErrNoRows, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unavailable(tc.err); got != tc.want {
				t.Errorf("unavailable(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}
