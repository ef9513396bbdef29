package httpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"
)

// lintTools is the directory of the linters' pinned packages
// (package.json and package-lock.json; npm ci installs them).
var lintTools = filepath.Join("..", "tools", "openapi-lint")

// TestOpenAPI_Lint runs the two linters CI holds openapi.json to, as
// .ci/run does: Redocly's recommended rules with every one an error
// (tools/openapi-lint/redocly.yaml) and Spectral's spectral:oas,
// failing on a warning. Both must find nothing. Without node or the
// tools' node_modules (npm ci --prefix tools/openapi-lint) it skips,
// or fails when CI is set (.ci/run installs them).
func TestOpenAPI_Lint(t *testing.T) {
	if testing.Short() {
		t.Skip("the linters run in the full suite, not with -short")
	}
	redocly := filepath.Join("node_modules", "@redocly", "cli", "bin", "cli.js")
	spectral := filepath.Join("node_modules", "@stoplight", "spectral-cli", "dist", "index.js")
	node := lintNode(t, redocly, spectral)
	doc := filepath.Join("..", "..", "httpapi", "openapi.json")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	for _, c := range []struct {
		name string
		args []string
		// clean matches the output of a run that found nothing; dirty,
		// of one that found something it still exits 0 for.
		clean, dirty *regexp.Regexp
	}{
		{"redocly", []string{redocly, "lint", "--config", "redocly.yaml", doc},
			regexp.MustCompile(`Your API description is valid`), regexp.MustCompile(`You have \d+ warnings?`)},
		{"spectral", []string{spectral, "lint", "--ruleset", ".spectral.yaml", "--fail-severity=warn", doc},
			regexp.MustCompile(`No results with a severity of 'warn' or higher found`), regexp.MustCompile(`\d+ problems?`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, node, c.args...)
			cmd.Dir = lintTools
			// No telemetry and no update check: what the linters say
			// must not depend on the network.
			cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "SCARF_ANALYTICS=false", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			if err != nil || !c.clean.Match(out) || c.dirty.Match(out) {
				t.Errorf("%s lint of httpapi/openapi.json: %v\n%s", c.name, err, out)
			}
		})
	}
}

// lintNode returns node, after checking that the linters' scripts
// (under lintTools) are installed; it skips without them, saying how to
// get them, or fails when CI is set (and not "false" or "0").
func lintNode(t *testing.T, scripts ...string) string {
	t.Helper()
	var msg string
	node, err := exec.LookPath("node")
	if err != nil {
		msg = "no node on PATH: install Node 18 or later to lint the OpenAPI document"
	} else {
		for _, s := range scripts {
			if _, err := os.Stat(filepath.Join(lintTools, s)); err != nil {
				msg = "the OpenAPI linters are not installed: run npm ci --prefix tools/openapi-lint"
				break
			}
		}
	}
	if msg == "" {
		return node
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestOpenAPI_TagsAndDescriptions holds what the linters ask of every
// operation (TestOpenAPI_Lint) where node is not installed too: each
// operation of paths and webhooks has a description and exactly one tag,
// every tag is declared at the top with a description and used, and
// info has a contact and a license.
func TestOpenAPI_TagsAndDescriptions(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	type operation struct {
		Tags        []string
		Description string
	}
	var doc struct {
		Info struct {
			Contact *struct{ Name string }
			License *struct{ Name, Identifier, URL string }
		}
		Tags     []struct{ Name, Description string }
		Paths    map[string]map[string]json.RawMessage
		Webhooks map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if c := doc.Info.Contact; c == nil || c.Name == "" {
		t.Error("info has no contact")
	}
	if l := doc.Info.License; l == nil || l.Name == "" || l.Identifier == "" && l.URL == "" {
		t.Error("info has no license with a name and an identifier or URL")
	}
	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		if tag.Description == "" {
			t.Errorf("tag %q has no description", tag.Name)
		}
		declared[tag.Name] = false
	}
	for _, items := range []map[string]map[string]json.RawMessage{doc.Paths, doc.Webhooks} {
		for path, item := range items {
			for method, v := range item {
				if !slices.Contains([]string{"get", "put", "post", "patch", "delete"}, method) {
					continue
				}
				var op operation
				if err := json.Unmarshal(v, &op); err != nil {
					t.Fatal(err)
				}
				if op.Description == "" {
					t.Errorf("%s %s has no description", method, path)
				}
				if len(op.Tags) != 1 {
					t.Errorf("%s %s has tags %q, want one", method, path, op.Tags)
					continue
				}
				if _, ok := declared[op.Tags[0]]; !ok {
					t.Errorf("%s %s has tag %q, which the document does not declare", method, path, op.Tags[0])
				}
				declared[op.Tags[0]] = true
			}
		}
	}
	for tag, used := range declared {
		if !used {
			t.Errorf("tag %q is declared and not used", tag)
		}
	}
}
