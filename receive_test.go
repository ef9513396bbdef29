package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReceive_LineField(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "-"},
		{"evt_2Qx", "evt_2Qx"},
		{"a b", `"a b"`},
		{"evt\x1b[31m", `"evt\x1b[31m"`},
		{"é", `"\u00e9"`},
		{strings.Repeat("x", 101), strings.Repeat("x", 100) + "…"},
	}
	for _, tt := range tests {
		if got := lineField(tt.in); got != tt.want {
			t.Errorf("lineField(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestReceive_READMEExample keeps the Go code of the "Receiving webhooks"
// section of docs/receiving.md equal to verify's Example_receiver, which
// the compiler checks.
func TestReceive_READMEExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("docs", "receiving.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Receiving webhooks\n")
	if !ok {
		t.Fatal(`docs/receiving.md has no "## Receiving webhooks" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal(`the "Receiving webhooks" section has no Go block`)
	}
	code, _, _ = strings.Cut(code, "```\n")

	src, err := os.ReadFile(filepath.Join("verify", "example_receiver_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func Example_receiver() {\n")
	if !ok {
		t.Fatal("verify/example_receiver_test.go has no Example_receiver")
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	var want strings.Builder
	for line := range strings.Lines(body + "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if code != want.String() {
		t.Errorf("the receiver of docs/receiving.md differs from verify.Example_receiver:\n--- docs\n%s--- example\n%s", code, want.String())
	}
}
