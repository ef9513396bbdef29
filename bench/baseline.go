package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// Baselines are the ceilings of the machine a run is measured against, in
// requests per second, taken in the same run.
type Baselines struct {
	// Ingest is a bare net/http server answering 204 to Clients
	// keep-alive clients posting the run's event body: the loopback HTTP
	// ceiling for ingest.
	Ingest        float64 `json:"ingest_ceiling_rps"`
	IngestClients int     `json:"ingest_clients"`
	// Delivery is the dispatcher's HTTP client posting the event body to
	// Endpoints bare 204 receivers with Conns requests in flight (as many
	// as the dispatcher may run against them): the ceiling for delivery.
	Delivery  float64 `json:"delivery_ceiling_rps,omitempty"`
	Endpoints int     `json:"delivery_endpoints,omitempty"`
	Conns     int     `json:"delivery_conns,omitempty"`
	// Commits is bbolt committing one 1 KiB write per fsynced transaction,
	// back to back, on the scenario's disk: what one writer gets without
	// group commit, and the unit every commit's cost is paid in.
	Commits float64 `json:"bbolt_commits_per_second,omitempty"`
}

// commitCeiling measures bbolt on a file in dir, one 1 KiB put per
// transaction, for d.
func commitCeiling(ctx context.Context, dir string, d time.Duration) (float64, error) {
	path := filepath.Join(dir, "commit-probe.db")
	defer os.Remove(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	val := bytes.Repeat([]byte("x"), 1024)
	key := make([]byte, 8)
	start := time.Now()
	n := 0
	for ctx.Err() == nil && time.Since(start) < d {
		binary.BigEndian.PutUint64(key, uint64(n))
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("probe"))
			if err != nil {
				return err
			}
			return b.Put(key, val)
		})
		if err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// bareServer answers every request 204 after reading its body.
func bareServer() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          discardLog,
	}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/", nil
}

// hammer runs conns goroutines posting body with client, goroutine i to
// urls[i%len(urls)], for d, and returns the completed requests per second
// after a warm-up of a tenth of d.
func hammer(ctx context.Context, client *http.Client, urls []string, conns int, body []byte, d time.Duration) float64 {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	warm := time.Now().Add(d / 10)
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := urls[i%len(urls)]
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
				if err != nil {
					return
				}
				req.Header["Content-Type"] = []string{"application/json"}
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusNoContent && time.Now().After(warm) {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(warm)
	client.CloseIdleConnections()
	if elapsed <= 0 {
		return 0
	}
	return float64(n.Load()) / elapsed.Seconds()
}

// ingestCeiling measures a bare 204 server under clients keep-alive
// clients, with the transport the harness's ingest clients use.
func ingestCeiling(ctx context.Context, clients int, body []byte, d time.Duration) (float64, error) {
	srv, u, err := bareServer()
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	api := newAPIClient(u, "", clients)
	return hammer(ctx, api.hc, []string{u}, clients, body, d), nil
}

// deliveryCeiling measures the dispatcher's HTTP client (as
// engine.NewHTTPClient builds it for workers and perHost) posting to
// endpoints bare 204 receivers, with as many requests in flight as the
// dispatcher allows itself against them.
func deliveryCeiling(ctx context.Context, workers, perHost, endpoints int, body []byte, d time.Duration) (float64, int, error) {
	urls := make([]string, endpoints)
	for i := range urls {
		srv, u, err := bareServer()
		if err != nil {
			return 0, 0, err
		}
		defer srv.Close()
		urls[i] = u
	}
	conns := min(workers, perHost*endpoints)
	return hammer(ctx, engine.NewHTTPClient(workers, perHost, loopbackTargets), urls, conns, body, d), conns, nil
}
