package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	// Commit is the latency of those commits: what a client alone, whose
	// every request waits for a commit of its own, pays at the least.
	Commit *Latency `json:"bbolt_commit_latency,omitempty"`
	// DurableFloor is the durable floor, in writes acknowledged per second:
	// the least a durable ingest can do (see floorServer: read the body,
	// group-commit it into bbolt with fsync on, answer 202 after the
	// commit), posted to by the same clients with the same body for the
	// same time as Ingest. It is the ceiling of any bbolt-backed durable
	// ingest on this disk and CPU, where Ingest is the ceiling of any
	// ingest at all. 0: not measured (a remote target, whose disk the
	// harness does not see, or a load paced at no more than Commits,
	// which one write per commit keeps up with).
	DurableFloor float64 `json:"durable_floor_rps,omitempty"`
	// FloorSingle is the durable floor's latency with one client, one
	// request at a time, measured right after webhookd's own one-client
	// phase (ingest-only): the least a durably acknowledged request costs
	// here when each waits for a commit of its own. nil: not measured.
	FloorSingle *Latency `json:"durable_floor_single_client_latency,omitempty"`
}

// commitCeiling measures bbolt on a file in dir, one 1 KiB put per
// transaction, for d: commits per second and their latency.
func commitCeiling(ctx context.Context, dir string, d time.Duration) (float64, *Latency, error) {
	path := filepath.Join(dir, "commit-probe.db")
	defer os.Remove(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistArrayType})
	if err != nil {
		return 0, nil, err
	}
	defer db.Close()
	val := bytes.Repeat([]byte("x"), 1024)
	key := make([]byte, 8)
	var lat latencies
	start := time.Now()
	for ctx.Err() == nil && time.Since(start) < d {
		binary.BigEndian.PutUint64(key, uint64(len(lat)))
		t := time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("probe"))
			if err != nil {
				return err
			}
			return b.Put(key, val)
		})
		if err != nil {
			return 0, nil, err
		}
		lat = append(lat, time.Since(t))
	}
	l := lat.summary()
	return float64(len(lat)) / time.Since(start).Seconds(), &l, nil
}

// bare204 answers every request 204 after reading its body.
var bare204 = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.WriteHeader(http.StatusNoContent)
})

// serveLocal serves h on a new port of 127.0.0.1 and returns the server
// and its URL.
func serveLocal(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/", nil
}

// hammer runs conns goroutines posting body with client, goroutine i to
// urls[i%len(urls)], for d, and returns the requests per second answered
// with status want after a warm-up of a tenth of d.
func hammer(ctx context.Context, client *http.Client, urls []string, conns int, body []byte, want int, d time.Duration) float64 {
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
				if resp.StatusCode == want && time.Now().After(warm) {
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
	return hammerIngest(ctx, bare204, http.StatusNoContent, clients, body, d)
}

// hammerIngest serves h on 127.0.0.1 and hammers it as the harness's
// ingest clients would (clients keep-alive clients, their transport,
// body, for d): the setup every ingest ceiling shares. It returns the
// requests per second answered with status want.
func hammerIngest(ctx context.Context, h http.Handler, want, clients int, body []byte, d time.Duration) (float64, error) {
	srv, u, err := serveLocal(h)
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	api := newAPIClient(u, "", clients)
	return hammer(ctx, api.hc, []string{u}, clients, body, want, d), nil
}

// durableFloor measures the durable floor (see floorServer) on a new
// bbolt file at path, with the setup of ingestCeiling, and returns the
// writes acknowledged per second. It leaves the file at path, holding
// every acknowledged write, for the caller to inspect and remove.
func durableFloor(ctx context.Context, path string, clients int, body []byte, d time.Duration) (float64, error) {
	fs, err := openFloorServer(path)
	if err != nil {
		return 0, err
	}
	rate, err := hammerIngest(ctx, fs, http.StatusAccepted, clients, body, d)
	if cerr := fs.Close(); err == nil {
		err = cerr
	}
	return rate, err
}

// floorLoad runs spec against a durable floor on a new bbolt file at
// path, with the harness's own load and client, and removes the file.
func floorLoad(ctx context.Context, path string, spec loadSpec) (loadResult, error) {
	defer os.Remove(path)
	fs, err := openFloorServer(path)
	if err != nil {
		return loadResult{}, err
	}
	srv, u, err := serveLocal(fs)
	if err != nil {
		fs.Close()
		return loadResult{}, err
	}
	var sent atomic.Int64
	lr := runLoad(ctx, newAPIClient(u, "", spec.clients), spec, &sent)
	srv.Close()
	if err := fs.Close(); err != nil {
		return lr, err
	}
	if len(lr.acks) == 0 {
		return lr, fmt.Errorf("durable floor: no write acknowledged: %v", lr.firstErr)
	}
	return lr, nil
}

// floorBucket is the durable floor's one bucket: 8-byte big-endian
// NextSequence keys, request bodies verbatim.
var floorBucket = []byte("events")

// floorServer is the durable floor: the least an HTTP ingest that makes
// each write durable before answering can do with bbolt. Its handler
// reads the body and queues it for one commit loop. The loop takes the
// first queued write, drains whatever else is queued right now, puts
// them all in one bbolt transaction (NextSequence keys, FillPercent 1,
// fsync on, the array freelist as webhookd's), answers every writer after
// the commit, and yields its P (runtime.Gosched) to the writers it woke. The handler
// then answers 202 with a small JSON body. Nothing is parsed, checked,
// encoded or indexed, so webhookd's durable ingest, which does all of
// that on the same commit pattern, cannot be faster.
type floorServer struct {
	db    *bolt.DB
	queue chan floorWrite // unbuffered: a write is queued only when the loop takes it
	stop  chan struct{}   // closed by Close
	done  chan struct{}   // closed when the loop has returned
	err   error           // the first failed commit; the loop's, read after done
}

// floorWrite is one request's body and where its outcome goes.
type floorWrite struct {
	body   []byte
	result chan floorResult // buffered; receives exactly one value
}

// floorResult is a write's key sequence once committed, or why it is not.
type floorResult struct {
	seq uint64
	err error
}

// openFloorServer opens (creating) the bbolt file at path, creates its
// bucket and starts the commit loop. Close stops it.
func openFloorServer(path string) (*floorServer, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      time.Second,
		NoSync:       false, // IMPORTANT: a 202 means the write is on disk
		FreelistType: bolt.FreelistArrayType,
	})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(floorBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	fs := &floorServer{db: db, queue: make(chan floorWrite), stop: make(chan struct{}), done: make(chan struct{})}
	go fs.run()
	return fs, nil
}

// ServeHTTP answers 202 once the request's body is committed, 500 when
// its commit failed, 503 after Close.
func (fs *floorServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fw := floorWrite{body: body, result: make(chan floorResult, 1)}
	select {
	case fs.queue <- fw:
	case <-fs.stop:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	res := <-fw.result // the loop answers every write it took
	if res.err != nil {
		http.Error(w, res.err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(http.StatusAccepted)
	w.Write(append(strconv.AppendUint([]byte(`{"seq":`), res.seq, 10), "}\n"...))
}

// run is the commit loop. It returns when Close has closed stop, after
// answering every write it took.
func (fs *floorServer) run() {
	defer close(fs.done)
	var batch []floorWrite
	for {
		select {
		case fw := <-fs.queue:
			batch = append(batch[:0], fw)
		case <-fs.stop:
			return
		}
	drain:
		for {
			select {
			case fw := <-fs.queue:
				batch = append(batch, fw)
			default:
				break drain
			}
		}
		fs.commit(batch)
		clear(batch) // let the answered bodies be collected
		runtime.Gosched()
	}
}

// commit puts batch in one fsynced transaction and answers every write:
// its sequence, or the transaction's error (then none of batch is
// written).
func (fs *floorServer) commit(batch []floorWrite) {
	seqs := make([]uint64, len(batch))
	err := fs.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(floorBucket)
		b.FillPercent = 1 // append-only: keys only grow
		for i, fw := range batch {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), fw.body); err != nil {
				return err
			}
			seqs[i] = seq
		}
		return nil
	})
	if err != nil && fs.err == nil {
		fs.err = fmt.Errorf("durable floor: commit %d writes: %w", len(batch), err)
	}
	for i, fw := range batch {
		if err != nil {
			fw.result <- floorResult{err: err}
		} else {
			fw.result <- floorResult{seq: seqs[i]}
		}
	}
}

// Close stops the commit loop, once it has answered every write it took,
// and closes the file. It returns the first failed commit's error, if
// any. Handlers still waiting to queue a write answer 503.
func (fs *floorServer) Close() error {
	close(fs.stop)
	<-fs.done
	return errors.Join(fs.err, fs.db.Close())
}

// deliveryCeiling measures the dispatcher's HTTP client (as
// engine.NewHTTPClient builds it for workers and perHost) posting to
// endpoints bare 204 receivers, with as many requests in flight as the
// dispatcher allows itself against them.
func deliveryCeiling(ctx context.Context, workers, perHost, endpoints int, body []byte, d time.Duration) (float64, int, error) {
	urls := make([]string, endpoints)
	for i := range urls {
		srv, u, err := serveLocal(bare204)
		if err != nil {
			return 0, 0, err
		}
		defer srv.Close()
		urls[i] = u
	}
	conns := min(workers, perHost*endpoints)
	return hammer(ctx, engine.NewHTTPClient(workers, perHost, loopbackTargets), urls, conns, body, http.StatusNoContent, d), conns, nil
}
