package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencies is a set of measured durations; its methods sort it in place.
type latencies []time.Duration

// quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank method,
// or 0 for an empty set. It sorts l.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	if !slices.IsSorted(l) {
		slices.Sort(l)
	}
	i := int(q*float64(len(l))+0.999999) - 1
	i = max(0, min(i, len(l)-1))
	return l[i]
}

// summary returns p50, p99 and max in milliseconds.
func (l latencies) summary() Latency {
	return Latency{P50: ms(l.quantile(0.50)), P99: ms(l.quantile(0.99)), Max: ms(l.quantile(1)), N: len(l)}
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	N   int     `json:"n"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// series buckets timed samples by whole seconds since start, for the
// per-second chart: a count and the latencies of each second.
type series struct {
	start time.Time
	secs  []bucket
}

type bucket struct {
	n   int
	lat latencies
}

func newSeries(start time.Time) *series { return &series{start: start} }

// add counts one sample at t with latency lat.
func (s *series) add(t time.Time, lat time.Duration) {
	i := int(t.Sub(s.start) / time.Second)
	if i < 0 {
		i = 0
	}
	for len(s.secs) <= i {
		s.secs = append(s.secs, bucket{})
	}
	s.secs[i].n++
	s.secs[i].lat = append(s.secs[i].lat, lat)
}

// Point is one second of a run: how many events were acknowledged and
// delivered in it, and the p99 latencies of those.
type Point struct {
	Second    int     `json:"t"`
	Ingested  int     `json:"ingested"`
	Delivered int     `json:"delivered"`
	IngestP99 float64 `json:"ingest_p99_ms"`
	E2EP99    float64 `json:"e2e_p99_ms"`
}

// points merges the ingest and delivery series into per-second points.
func points(ingest, deliver *series) []Point {
	n := 0
	if ingest != nil {
		n = len(ingest.secs)
	}
	if deliver != nil {
		n = max(n, len(deliver.secs))
	}
	out := make([]Point, n)
	for i := range out {
		out[i].Second = i
		if ingest != nil && i < len(ingest.secs) {
			b := ingest.secs[i]
			out[i].Ingested, out[i].IngestP99 = b.n, ms(b.lat.quantile(0.99))
		}
		if deliver != nil && i < len(deliver.secs) {
			b := deliver.secs[i]
			out[i].Delivered, out[i].E2EP99 = b.n, ms(b.lat.quantile(0.99))
		}
	}
	return out
}

// memSampler records the peak Go heap while it runs; peak RSS comes from
// the kernel's high-water mark (VmHWM), reset when the sampler starts.
type memSampler struct {
	peakHeap atomic.Uint64
	stop     chan struct{}
	done     sync.WaitGroup
	hwmReset bool
}

var heapMetric = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapBytes() uint64 {
	s := slices.Clone(heapMetric)
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// startMemSampler resets the process's peak RSS (Linux: clear_refs 5) and
// samples the heap every 50ms until stopped.
func startMemSampler() *memSampler {
	m := &memSampler{stop: make(chan struct{})}
	m.hwmReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	m.peakHeap.Store(heapBytes())
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				if h := heapBytes(); h > m.peakHeap.Load() {
					m.peakHeap.Store(h)
				}
			}
		}
	}()
	return m
}

// finish stops the sampler and returns what it saw.
func (m *memSampler) finish() Memory {
	close(m.stop)
	m.done.Wait()
	if h := heapBytes(); h > m.peakHeap.Load() {
		m.peakHeap.Store(h)
	}
	st := procStatus()
	return Memory{
		PeakRSS:     st["VmHWM"],
		PeakHeap:    m.peakHeap.Load(),
		RSS:         st["VmRSS"],
		PeakIsOfRun: m.hwmReset,
	}
}

// Memory is what a run cost in memory. In-process runs share the process
// with the harness (clients and receivers), so the figures include it.
type Memory struct {
	PeakRSS     uint64 `json:"peak_rss_bytes"`  // VmHWM
	PeakHeap    uint64 `json:"peak_heap_bytes"` // Go heap objects, sampled every 50ms
	RSS         uint64 `json:"rss_bytes"`       // VmRSS at the end
	PeakIsOfRun bool   `json:"peak_is_of_run"`  // VmHWM was reset at the start (else: since process start)
}

// procStatus returns the kB fields of /proc/self/status in bytes (empty
// off Linux).
func procStatus() map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				out[name] = n << 10
			}
		}
	}
	return out
}

// Machine describes where a run ran.
type Machine struct {
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu,omitempty"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	MemTotal   uint64 `json:"mem_total_bytes,omitempty"`
}

func machine() Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" {
				if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
					m.MemTotal = n << 10
				}
			}
		}
	}
	return m
}
