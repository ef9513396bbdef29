package engine_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

func TestKeepResponseHeaders(t *testing.T) {
	many := http.Header{}
	for i := range 50 {
		many.Set(fmt.Sprintf("X-H-%02d", i), "v")
	}
	var first20 []engine.Header
	for i := range engine.MaxResponseHeaders {
		first20 = append(first20, engine.Header{Name: fmt.Sprintf("X-H-%02d", i), Value: "v"})
	}
	long := strings.Repeat("x", 1000)
	// Eight headers whose cut values (256 bytes) and names (4 bytes) take
	// 260 bytes each: seven fit in 2048, the eighth does not, the short
	// one after it does.
	budget := http.Header{"Z-Ok": {"1"}}
	var budgetWant []engine.Header
	for i := range 8 {
		name := fmt.Sprintf("B-0%d", i)
		budget[name] = []string{long}
		if i < 7 {
			budgetWant = append(budgetWant, engine.Header{Name: name, Value: long[:engine.MaxResponseHeaderValue]})
		}
	}
	budgetWant = append(budgetWant, engine.Header{Name: "Z-Ok", Value: "1"})

	tests := []struct {
		name string
		in   http.Header
		want []engine.Header
	}{
		{"none", http.Header{}, nil},
		{"nil", nil, nil},
		{"sorted by name", http.Header{"Server": {"x"}, "Date": {"d"}, "Content-Type": {"text/plain"}},
			[]engine.Header{{"Content-Type", "text/plain"}, {"Date", "d"}, {"Server", "x"}}},
		{"values joined", http.Header{"Vary": {"Accept", "Origin"}}, []engine.Header{{"Vary", "Accept, Origin"}}},
		{"an empty value is kept", http.Header{"X-Empty": {""}}, []engine.Header{{"X-Empty", ""}}},
		{"a name without values is not", http.Header{"X-None": {}}, nil},
		{"credentials left out", http.Header{
			"Set-Cookie": {"a=1", "b=2"}, "Authorization": {"Bearer t"}, "Proxy-Authorization": {"Basic x"},
			"Www-Authenticate": {`Bearer realm="r"`}, "Proxy-Authenticate": {"Basic"}, "Authentication-Info": {"nextnonce=1"},
			"Cookie": {"c=3"}, "Set-Cookie2": {"d=4"}, "X-Api-Key": {"k"}, "X-Auth-Token": {"t"}, "X-Csrf-Token": {"c"},
			"X-Request-Id": {"req_1"},
		}, []engine.Header{{"X-Request-Id", "req_1"}}},
		{"names canonical, credentials too", http.Header{"set-cookie": {"a=1"}, "x-request-id": {"r"}}, []engine.Header{{"X-Request-Id", "r"}}},
		{"two keys of one canonical name: one", http.Header{"X-A": {"1"}, "x-a": {"2"}}, []engine.Header{{"X-A", "1"}}},
		{"a value cut", http.Header{"Link": {long}}, []engine.Header{{"Link", long[:engine.MaxResponseHeaderValue]}}},
		{"joined values cut", http.Header{"Link": {long[:200], long[:200]}}, []engine.Header{{"Link", (long[:200] + ", " + long)[:engine.MaxResponseHeaderValue]}}},
		{"cut at a character", http.Header{"X-U": {strings.Repeat("x", engine.MaxResponseHeaderValue-1) + "é"}},
			[]engine.Header{{"X-U", strings.Repeat("x", engine.MaxResponseHeaderValue-1)}}},
		{"invalid UTF-8 replaced", http.Header{"X-B": {"a\xffb"}}, []engine.Header{{"X-B", "a\uFFFDb"}}},
		{"the first 20 by name", many, first20},
		{"the total bound skips what does not fit", budget, budgetWant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := engine.KeepResponseHeaders(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("KeepResponseHeaders =\n\t%q\nwant\n\t%q", got, tt.want)
			}
			total := 0
			for _, h := range got {
				total += len(h.Name) + len(h.Value)
			}
			if len(got) > engine.MaxResponseHeaders || total > engine.MaxResponseHeadersBytes {
				t.Errorf("%d headers, %d bytes: over the bounds", len(got), total)
			}
		})
	}
}

// TestKeepResponseHeaders_allocs: the dispatch path pays one allocation
// for the headers of a usual response, none for a response without any.
func TestKeepResponseHeaders_allocs(t *testing.T) {
	h := http.Header{
		"Content-Type": {"application/json"}, "Content-Length": {"2"}, "Date": {"Mon, 02 Jan 2006 15:04:05 GMT"},
		"Server": {"nginx"}, "X-Request-Id": {"req_1"}, "Set-Cookie": {"s=1"},
	}
	if n := testing.AllocsPerRun(100, func() { engine.KeepResponseHeaders(h) }); n != 1 {
		t.Errorf("KeepResponseHeaders of %d headers: %v allocations, want 1", len(h), n)
	}
	if n := testing.AllocsPerRun(100, func() { engine.KeepResponseHeaders(http.Header{}) }); n != 0 {
		t.Errorf("KeepResponseHeaders of none: %v allocations, want 0", n)
	}
}
