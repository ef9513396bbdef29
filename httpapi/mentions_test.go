// The OpenAPI validator is large: the race run (.ci/run) leaves it out.

//go:build !race

package httpapi_test

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// mentionFiles are where users read about the API: the README, the
// guides, the console's pages and the package documentation.
func mentionFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "doc.go"}
	for _, glob := range []string{"../docs/*.md", "console/templates/*.html"} {
		m, err := filepath.Glob(glob)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no files (%v)", glob, err)
		}
		files = append(files, m...)
	}
	return files
}

var (
	// routeMention is "METHOD /path?query" written in prose or a table.
	routeMention = regexp.MustCompile("\\b(GET|PUT|POST|PATCH|DELETE)`?,?\\s+`?(/[^\\s`'\")<,]*)")
	// curlURL is the API URL of a curl command: $API/… or http://host/….
	curlURL = regexp.MustCompile(`(?:\$\{?API\}?|https?://[^/\s"']+)(/[^\s"']*)`)
	// curlMethod and curlData are its -X and -d.
	curlMethod = regexp.MustCompile(`(?:-X|--request)\s+([A-Z]+)`)
	curlData   = regexp.MustCompile(`(?:-d|--data(?:-raw)?)\s+'([^']*)'`)
)

// placeholder says whether a path segment of a mention stands for any
// value: {tenant}, :id, $DELIVERY, <cursor>, {{.Tenant.ID}}, %s, ….
func placeholder(seg string) bool {
	return strings.ContainsAny(seg, "{:$<%…")
}

// matchRoute returns the documented route path a mentioned path is, or
// "" when none is.
func (o *openAPI) matchRoute(method, path string) (string, *v3.Operation) {
	segs := strings.Split(path, "/")
	for p, item := range o.model.Paths.PathItems.FromOldest() {
		op := item.GetOperations().GetOrZero(strings.ToLower(method))
		if op == nil {
			continue
		}
		tsegs := strings.Split(p, "/")
		if len(tsegs) != len(segs) {
			continue
		}
		match := true
		for i, s := range tsegs {
			if !strings.HasPrefix(s, "{") && s != segs[i] && !placeholder(segs[i]) {
				match = false
				break
			}
		}
		if match {
			return p, op
		}
	}
	return "", nil
}

// TestOpenAPI_MentionsAreDocumented reads every route the README, the
// guides, the console's pages and doc.go mention ("POST /v1/…" in prose
// and tables, and each curl command) and checks it against the
// document: the route exists, each query parameter named is one it
// takes, and a curl command whose path and body are written out passes
// the validator as it stands. A route renamed or a parameter dropped in
// the document then fails here until the text that teaches it follows.
func TestOpenAPI_MentionsAreDocumented(t *testing.T) {
	o := loadOpenAPI(t)
	seen := 0
	for _, file := range mentionFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range routeMention.FindAllStringSubmatch(text, -1) {
			o.checkMention(t, file, m[1], m[2])
			seen++
		}
		// Shell: join continued lines, then read each curl command.
		for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
			_, cmd, ok := strings.Cut(line, "curl ")
			if !ok {
				continue
			}
			u := curlURL.FindStringSubmatch(cmd)
			if u == nil || !strings.HasPrefix(u[1], "/v1/") {
				continue // a receiver's URL, not the API
			}
			method, body := "GET", ""
			if d := curlData.FindStringSubmatch(cmd); d != nil {
				method, body = "POST", d[1]
			}
			if x := curlMethod.FindStringSubmatch(cmd); x != nil {
				method = x[1]
			}
			o.checkMention(t, file, method, u[1])
			seen++
			if strings.ContainsAny(u[1]+body, "$…") {
				continue // values the reader fills in
			}
			r, err := http.NewRequest(method, "http://webhookd"+u[1], strings.NewReader(body))
			if err != nil {
				t.Errorf("%s: curl %s %s: %v", file, method, u[1], err)
				continue
			}
			r.Header.Set("Authorization", "Bearer whk_example")
			if body != "" {
				r.Header.Set("Content-Type", "application/json")
				r.Body = nopBody(body)
			}
			if ok, errs := o.v.ValidateHttpRequestSync(r); !ok {
				for _, e := range errs {
					t.Errorf("%s: curl -X %s %s: breaks openapi.json: %v", file, method, u[1], e)
				}
			}
		}
	}
	if seen < 20 {
		t.Errorf("found %d route mentions: the reader is broken", seen)
	}
}

func nopBody(s string) *readCloser { return &readCloser{bytes.NewReader([]byte(s))} }

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// checkMention checks one mentioned method and path (with its query).
func (o *openAPI) checkMention(t *testing.T, file, method, mention string) {
	t.Helper()
	path, query, _ := strings.Cut(strings.TrimRight(mention, ".,;:"), "?")
	path = strings.TrimRight(path, ".,;:")
	if !strings.HasPrefix(path, "/v1/") && !slices.Contains([]string{"/healthz", "/readyz", "/metrics"}, path) {
		return // the console's pages, a receiver's path
	}
	p, op := o.matchRoute(method, path)
	if op == nil {
		t.Errorf("%s: %s %s is not a route of openapi.json", file, method, mention)
		return
	}
	if query == "" {
		return
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Errorf("%s: %s %s: %v", file, method, mention, err)
		return
	}
	for name := range q {
		if !slices.ContainsFunc(op.Parameters, func(prm *v3.Parameter) bool { return prm.In == "query" && prm.Name == name }) {
			t.Errorf("%s: %s %s: %s takes no query parameter %q", file, method, mention, p, name)
		}
	}
}
