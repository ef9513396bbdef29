package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// writeSVG draws r's per-second series as two line charts, throughput on
// top and p99 latency below, to path (an .svg file).
func writeSVG(path string, r *Result) error {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".svg" {
		return fmt.Errorf("-svg %s: only SVG is drawn; name the file .svg", path)
	}
	return os.WriteFile(path, chartSVG(r), 0o644)
}

type line struct {
	name  string
	color string
	ys    []float64
}

const (
	svgW      = 900
	panelH    = 220
	marginL   = 70
	marginR   = 20
	marginTop = 40
	gap       = 50
)

// chartSVG renders the chart.
func chartSVG(r *Result) []byte {
	var b bytes.Buffer
	h := marginTop + 2*panelH + gap + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, h, svgW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">webhookd bench: %s</text>`+"\n", marginL, html.EscapeString(r.Scenario))
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="end" fill="#555">%s</text>`+"\n", svgW-marginR, html.EscapeString(r.Started.Format("2006-01-02 15:04 UTC")))
	var in, out, inLat, outLat []float64
	for _, p := range r.Series {
		in = append(in, float64(p.Ingested))
		out = append(out, float64(p.Delivered))
		inLat = append(inLat, p.IngestP99)
		outLat = append(outLat, p.E2EP99)
	}
	panel(&b, marginTop, "per second", []line{
		{"ingested", "#1f77b4", in},
		{"delivered", "#2ca02c", out},
	})
	panel(&b, marginTop+panelH+gap, "p99 latency (ms)", []line{
		{"ingest", "#ff7f0e", inLat},
		{"end to end", "#d62728", outLat},
	})
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">seconds since the load started</text>`+"\n", marginL+(svgW-marginL-marginR)/2, h-8)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// panel draws one chart with its axes at top.
func panel(b *bytes.Buffer, top int, title string, lines []line) {
	w := svgW - marginL - marginR
	n, ymax := 0, 0.0
	for _, l := range lines {
		n = max(n, len(l.ys))
		for _, y := range l.ys {
			ymax = max(ymax, y)
		}
	}
	ymax = niceCeil(ymax)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", marginL, top-8, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", marginL, top, w, panelH)
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		y := float64(top+panelH) - float64(panelH)*float64(i)/4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", marginL, y, marginL+w, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y+4, axisLabel(v))
	}
	xs := func(i int) float64 {
		if n <= 1 {
			return float64(marginL)
		}
		return float64(marginL) + float64(w)*float64(i)/float64(n-1)
	}
	step := max(1, niceCeilInt(n/10))
	for i := 0; i < n; i += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", xs(i), top+panelH+16, i)
	}
	for k, l := range lines {
		var pts []string
		for i, y := range l.ys {
			py := float64(top+panelH) - float64(panelH)*y/ymax
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(i), py))
		}
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", l.color, strings.Join(pts, " "))
		}
		lx := marginL + w - 220 + 110*k
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, top-12, lx+18, top-12, l.color)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+22, top-8, html.EscapeString(l.name))
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v ≤ 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func niceCeilInt(v int) int { return int(niceCeil(float64(v))) }

func axisLabel(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%gk", v/1000)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}
