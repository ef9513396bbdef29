package httpapi

import (
	"fmt"
	"math"
	"strconv"
)

// minContrast is the contrast ratio every text colour of the console
// keeps against the backgrounds it is drawn on: WCAG 2's AA level for
// normal text.
const minContrast = 4.5

// The backgrounds a brand's accent is drawn on (links) or under (white
// or dark button text), in each palette of console.css; keep them in
// step with its --bg, --card and --th-bg.
var (
	lightSurfaces = []rgb{hexRGB("#f6f7f9"), hexRGB("#ffffff"), hexRGB("#fafbfc"), hexRGB("#fff3d6")}
	darkSurfaces  = []rgb{hexRGB("#14171c"), hexRGB("#1c2028"), hexRGB("#232834"), hexRGB("#3a2d10")}
)

// rgb is an sRGB colour, 0–255 per channel.
type rgb struct{ r, g, b float64 }

// hexRGB parses "#rrggbb" (ValidBrand checked it); anything else is black.
func hexRGB(s string) rgb {
	if len(s) != 7 || s[0] != '#' {
		return rgb{}
	}
	n, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return rgb{}
	}
	return rgb{float64(n >> 16 & 0xff), float64(n >> 8 & 0xff), float64(n & 0xff)}
}

func (c rgb) String() string {
	return fmt.Sprintf("#%02x%02x%02x", int(math.Round(c.r)), int(math.Round(c.g)), int(math.Round(c.b)))
}

// luminance is c's relative luminance (WCAG 2).
func (c rgb) luminance() float64 {
	lin := func(v float64) float64 {
		v /= 255
		if v <= 0.03928 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(c.r) + 0.7152*lin(c.g) + 0.0722*lin(c.b)
}

// contrast is the WCAG 2 contrast ratio of a and b, from 1 to 21.
func contrast(a, b rgb) float64 {
	la, lb := a.luminance(), b.luminance()
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// mix is c moved toward to by t (0: c, 1: to).
func (c rgb) mix(to rgb, t float64) rgb {
	return rgb{c.r + (to.r-c.r)*t, c.g + (to.g-c.g)*t, c.b + (to.b-c.b)*t}
}

// readableOn returns accent as given when it reads at minContrast on
// every surface, else the first shade of it toward toward (black for a
// light palette, white for a dark one) that does: a brand's colour stays
// recognisable and its links and buttons stay readable. Black and white
// always reach it on the palettes' surfaces.
func readableOn(accent rgb, surfaces []rgb, toward rgb) rgb {
	for step := 0; step <= 50; step++ {
		c := accent.mix(toward, float64(step)/50)
		ok := true
		for _, s := range surfaces {
			if contrast(c, s) < minContrast {
				ok = false
				break
			}
		}
		if ok {
			return c
		}
	}
	return toward
}

// brandCSS is /console/brand.css for accent ("#rrggbb", or "" for the
// console's own): the accent as --accent in the light palette and a
// readable shade of it in the dark one.
func brandCSS(accent string) string {
	if accent == "" {
		return ""
	}
	a := hexRGB(accent)
	light := readableOn(a, lightSurfaces, rgb{})
	dark := readableOn(a, darkSurfaces, rgb{255, 255, 255})
	return fmt.Sprintf(":root { --accent: %s; }\n@media (prefers-color-scheme: dark) { :root { --accent: %s; } }\n", light, dark)
}
