package tracing_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/tracing"
)

// BenchmarkIngest is durable ingest over HTTP into a bbolt file, as
// serve wires it, with [tracing] off and on (exporting to a sink), in
// the same process one after the other: what tracing adds to an
// ingest's CPU (cpu-µs/op, the process's user and system time).
func BenchmarkIngest(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "off"
		if traced {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var tr *tracing.Tracer
			var tracer engine.Tracer
			var so storage.Options
			if traced {
				tr = benchTracer(b)
				tracer, so.ObserveCommit = tr, tr.ObserveCommit
			}
			db, err := storage.Open(filepath.Join(b.TempDir(), "webhookd.db"), so)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			n := engine.NewNode(db, engine.NodeOptions{Tracer: tracer})
			var api http.Handler = httpapi.New(n.Service, httpapi.Options{Tokens: []string{token}})
			if tr != nil {
				api = tr.Handler(api)
			}
			srv := httptest.NewServer(api)
			defer srv.Close()
			put := func(path, body string) {
				req, _ := http.NewRequest("PUT", srv.URL+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					b.Fatalf("PUT %s: %d", path, resp.StatusCode)
				}
			}
			put("/v1/tenants/acme", `{"name":"Acme"}`)
			put("/v1/event-types/order.created", `{"description":"x"}`)
			body := []byte(`{"type":"order.created","data":{"note":"` + strings.Repeat("x", 1000) + `"}}`)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu0 := cpuNow()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", srv.URL+"/v1/tenants/acme/events", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+token)
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 202 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			if tr != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				tr.Flush(ctx)
				cancel()
			}
			b.ReportMetric(float64((cpuNow()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
