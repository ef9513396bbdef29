package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateAPIDoc = flag.Bool("update-api-doc", false, "rewrite the route table of docs/api.md from openapi.json")

// apiDocPath is docs/api.md, seen from this package's directory (where go
// test runs it).
const apiDocPath = "../docs/api.md"

// The route table of docs/api.md sits between these two lines.
const (
	routesBegin = "<!-- routes:begin -->\n"
	routesEnd   = "<!-- routes:end -->\n"
)

// apiDocMethods is the order of a path's operations in the route table.
var apiDocMethods = []string{"get", "put", "post", "patch", "delete"}

// TestAPIDocRoutesTable requires the route table of docs/api.md to be the
// one routesTable renders from openAPIDocument, so that the document
// stays the one description of the routes. With -update-api-doc it
// rewrites the table instead.
func TestAPIDocRoutesTable(t *testing.T) {
	want, err := routesTable(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(doc, []byte(routesBegin))
	if !ok {
		t.Fatalf("docs/api.md has no line %q", strings.TrimSpace(routesBegin))
	}
	got, after, ok := bytes.Cut(rest, []byte(routesEnd))
	if !ok {
		t.Fatalf("docs/api.md has no line %q after %q", strings.TrimSpace(routesEnd), strings.TrimSpace(routesBegin))
	}
	if string(got) == want {
		return
	}
	if *updateAPIDoc {
		var b bytes.Buffer
		b.Write(before)
		b.WriteString(routesBegin)
		b.WriteString(want)
		b.WriteString(routesEnd)
		b.Write(after)
		if err := os.WriteFile(apiDocPath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the route table of docs/api.md")
		return
	}
	t.Errorf("the route table of docs/api.md is not the one httpapi/openapi.json gives; run\n"+
		"\tgo test ./httpapi -run TestAPIDocRoutesTable -update-api-doc\n"+
		"first difference:\n%s", firstDifference(string(got), want))
}

// routesTable renders the Markdown table of every operation of the OpenAPI
// document doc: method, path and summary, in the document's path order
// and, within a path, in apiDocMethods order.
func routesTable(doc []byte) (string, error) {
	var top struct {
		Paths json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		return "", fmt.Errorf("openapi.json: %w", err)
	}
	paths, err := orderedObject(top.Paths)
	if err != nil {
		return "", fmt.Errorf("openapi.json paths: %w", err)
	}
	var b strings.Builder
	b.WriteString("| method | path | summary |\n|---|---|---|\n")
	for _, p := range paths {
		var ops map[string]json.RawMessage
		if err := json.Unmarshal(p.value, &ops); err != nil {
			return "", fmt.Errorf("openapi.json path %s: %w", p.key, err)
		}
		for _, m := range apiDocMethods {
			raw, ok := ops[m]
			if !ok {
				continue
			}
			var op struct {
				Summary string `json:"summary"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return "", fmt.Errorf("openapi.json %s %s: %w", m, p.key, err)
			}
			if op.Summary == "" {
				return "", fmt.Errorf("openapi.json %s %s has no summary", m, p.key)
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", strings.ToUpper(m), p.key, markdownCell(op.Summary))
		}
	}
	return b.String(), nil
}

// member is one name and value of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

// orderedObject returns the members of the JSON object raw in the order
// they are written (a map would lose it).
func orderedObject(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object (%v, %v)", tok, err)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var m member
		m.key = tok.(string) // a key inside an object is always a string
		if err := dec.Decode(&m.value); err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// markdownCell escapes s for a cell of a Markdown table.
func markdownCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d of the table:\n\tdocs/api.md:  %q\n\topenapi.json: %q", i+1, gl, wl)
		}
	}
	return "(none)"
}
