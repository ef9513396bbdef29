package httpapi

import (
	"regexp"
	"strings"
	"testing"
)

// palettes reads console.css's two palettes: the custom properties of
// its first :root (light) and of the :root inside prefers-color-scheme:
// dark.
func palettes(t *testing.T) (light, dark map[string]rgb) {
	t.Helper()
	css, err := consoleFiles.ReadFile("console/static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	text := string(css)
	i := strings.Index(text, "@media (prefers-color-scheme: dark)")
	if i < 0 {
		t.Fatal("console.css has no dark palette")
	}
	vars := regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{6})`)
	read := func(s string) map[string]rgb {
		m := map[string]rgb{}
		for _, v := range vars.FindAllStringSubmatch(s, -1) {
			m[v[1]] = hexRGB(v[2])
		}
		return m
	}
	light, dark = read(text[:i]), read(text[i:strings.Index(text[i:], "}\n}")+i])
	return light, dark
}

// TestConsole_Palette: in both palettes every text colour reads at 4.5:1
// or more on every background it is drawn on, and brand.css judges a
// brand's accent against the backgrounds console.css really has.
func TestConsole_Palette(t *testing.T) {
	light, dark := palettes(t)
	pairs := [][2]string{{"on-accent", "accent"}, {"on-accent", "danger"}, {"good", "good-bg"}, {"bad", "bad-bg"}, {"warn", "warn-bg"}, {"accent", "warn-bg"}, {"muted", "warn-bg"}}
	for _, text := range []string{"fg", "muted", "accent", "good", "bad", "warn", "danger"} {
		for _, bg := range []string{"bg", "card", "th-bg", "input-bg"} {
			if text == "danger" && bg != "card" {
				continue // the danger colour is a button's background, drawn on a card
			}
			pairs = append(pairs, [2]string{text, bg})
		}
	}
	for name, p := range map[string]map[string]rgb{"light": light, "dark": dark} {
		for _, pair := range pairs {
			fg, ok1 := p[pair[0]]
			bg, ok2 := p[pair[1]]
			if !ok1 || !ok2 {
				t.Errorf("%s palette lacks --%s or --%s", name, pair[0], pair[1])
				continue
			}
			if c := contrast(fg, bg); c < minContrast {
				t.Errorf("%s palette: --%s %s on --%s %s is %.2f:1, want at least %.1f:1", name, pair[0], fg, pair[1], bg, c, minContrast)
			}
		}
	}
	for name, tc := range map[string]struct {
		p        map[string]rgb
		surfaces []rgb
	}{"light": {light, lightSurfaces}, "dark": {dark, darkSurfaces}} {
		for i, v := range []string{"bg", "card", "th-bg", "warn-bg"} {
			if tc.p[v] != tc.surfaces[i] {
				t.Errorf("%s: brand.css judges the accent on %s, console.css's --%s is %s", name, tc.surfaces[i], v, tc.p[v])
			}
		}
	}
}

// TestBrandCSS: a brand's accent is kept where it reads, and shaded
// (darker on light, lighter on dark) until it does where it does not.
func TestBrandCSS(t *testing.T) {
	for _, accent := range []string{"#2456c7", "#ffcc00", "#000000", "#ffffff", "#777777", "#e91e63", "#00a86b"} {
		css := brandCSS(accent)
		m := regexp.MustCompile(`--accent: (#[0-9a-f]{6});.*\n.*--accent: (#[0-9a-f]{6});`).FindStringSubmatch(css)
		if m == nil {
			t.Fatalf("brand.css for %s:\n%s", accent, css)
		}
		light, dark := hexRGB(m[1]), hexRGB(m[2])
		for _, s := range lightSurfaces {
			if c := contrast(light, s); c < minContrast {
				t.Errorf("%s: light accent %s on %s is %.2f:1", accent, light, s, c)
			}
		}
		for _, s := range darkSurfaces {
			if c := contrast(dark, s); c < minContrast {
				t.Errorf("%s: dark accent %s on %s is %.2f:1", accent, dark, s, c)
			}
		}
	}
	if css := brandCSS("#2456c7"); !strings.HasPrefix(css, ":root { --accent: #2456c7; }") {
		t.Errorf("a readable accent is changed in the light palette:\n%s", css)
	}
	if brandCSS("") != "" {
		t.Error("brand.css without a brand accent is not empty")
	}
}
