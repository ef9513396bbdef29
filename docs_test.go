package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink is a Markdown link's target: ](target) or ](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestDocs_LinksResolve follows every relative link of the README and
// the guides (docs/*.md, and the READMEs of clients/ when there are
// any): the file it names must exist, and its #anchor must be a heading
// of that page, as GitHub makes anchors. A page moved or a heading
// renamed breaks no reader's link unnoticed.
func TestDocs_LinksResolve(t *testing.T) {
	t.Parallel()
	pages := []string{"README.md"}
	for _, glob := range []string{"docs/*.md", "clients/*/README.md"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	anchors := map[string]map[string]bool{} // page → its anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		a := markdownAnchors(t, page)
		anchors[page] = a
		return a
	}
	for _, page := range pages {
		for _, line := range markdownProse(t, page) {
			n := line.n
			for _, m := range mdLink.FindAllStringSubmatch(line.text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "<") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s:%d: link %s: %v", page, n, target, err)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", page, n, target, file, anchor)
				}
			}
		}
	}
}

// proseLine is a line of a Markdown page outside its code blocks.
type proseLine struct {
	n    int // from 1
	text string
}

// markdownProse returns page's lines in order, those in fenced code
// blocks left out.
func markdownProse(t *testing.T, page string) []proseLine {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []proseLine
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, proseLine{n, line})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// markdownAnchors returns the anchors GitHub makes of page's headings:
// lowercased, every character but letters, digits, spaces, '-' and '_'
// dropped, spaces made '-', and a repeated one suffixed -1, -2, ….
func markdownAnchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range markdownProse(t, page) {
		if !strings.HasPrefix(line.text, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line.text, "#"))) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestREADME_FrontDoor: the README stays a front door: at most 300
// lines, its first screen (30 lines) the two commands of a fresh machine,
// and an index of the guides to go on from.
func TestREADME_FrontDoor(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 300 {
		t.Errorf("README.md has %d lines, want at most 300: move the detail to docs/ and link it", len(lines))
	}
	first := strings.Join(lines[:min(30, len(lines))], "\n")
	for _, want := range []string{"go run .", "go test ./...", ".ci/run"} {
		if !strings.Contains(first, want) {
			t.Errorf("README.md's first 30 lines lack %q", want)
		}
	}
	if !strings.Contains(string(b), "](docs/README.md)") {
		t.Error("README.md does not link the guides' index, docs/README.md")
	}
}
