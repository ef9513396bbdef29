package httpapi

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// The report page's charts: the share of successful attempts and the
// p50/p99 attempt durations per hour, drawn on the server as inline SVG
// (no script, no style attribute: the CSP allows neither), with the same
// numbers in a table beside them for screen readers and copying.

// consoleChartLimit bounds the deliveries a chart reads: the newest ones
// created in its window.
const consoleChartLimit = 5000

// chartWindows are the windows a chart offers, by their query value.
var chartWindows = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 720, 200
	chartLeft, chartRight  = 48, 12
	chartTop, chartBottom  = 12, 28
	chartPlotW, chartPlotH = chartW - chartLeft - chartRight, chartH - chartTop - chartBottom
)

// chart is one SVG chart for a template.
type chart struct {
	ID, Title string
	W, H      int
	Lines     []chartLine
	Dots      []chartDot
	YTicks    []chartTick
	XTicks    []chartTick
	Grid      []float64 // y of the horizontal grid lines
}

type chartLine struct{ Class, Points string }

type chartDot struct {
	Class, Title string
	X, Y         float64
}

type chartTick struct {
	At   float64
	Text string
}

// chartsData is the charts part of the report page.
type chartsData struct {
	Window    string        // "24h" or "7d"
	Endpoint  string        // "" for all
	Endpoints endpointIndex // the filter's choices
	Rate      chart
	Latency   chart
	Points    []engine.SeriesPoint // those with attempts, for the table
	Truncated bool                 // more deliveries than consoleChartLimit were created in the window
	Limit     int
}

// makeCharts draws the success rate and latency charts of points, hour
// by hour from their first start.
func makeCharts(points []engine.SeriesPoint, step time.Duration) (rate, latency chart) {
	n := len(points)
	x := func(i int) float64 { return chartLeft + (float64(i)+0.5)*chartPlotW/float64(n) }
	yOf := func(v, top float64) float64 { return chartTop + chartPlotH*(1-v/top) }
	rate = chart{ID: "chart-rate", Title: "Successful attempts, per hour", W: chartW, H: chartH}
	latency = chart{ID: "chart-latency", Title: "Attempt duration, p50 and p99, per hour", W: chartW, H: chartH}

	var maxMs float64
	for _, p := range points {
		maxMs = math.Max(maxMs, float64(p.P99)/float64(time.Millisecond))
	}
	top := niceCeil(maxMs)
	for _, v := range []float64{0, 0.5, 1} {
		rate.YTicks = append(rate.YTicks, chartTick{yOf(v, 1), fmt.Sprintf("%.0f%%", 100*v)})
		rate.Grid = append(rate.Grid, yOf(v, 1))
		latency.YTicks = append(latency.YTicks, chartTick{yOf(v*top, top), fmtMs(v * top)})
		latency.Grid = append(latency.Grid, yOf(v*top, top))
	}
	every := max(n/6, 1)
	for i := 0; i < n; i += every {
		label := points[i].Start.UTC().Format("15:04")
		if step*time.Duration(n) > 24*time.Hour {
			label = points[i].Start.UTC().Format("Jan 2")
		}
		rate.XTicks = append(rate.XTicks, chartTick{x(i), label})
	}
	latency.XTicks = rate.XTicks

	var ratePts, p50Pts, p99Pts []string
	for i, p := range points {
		if p.Attempts == 0 {
			continue
		}
		at := p.Start.UTC().Format("2006-01-02 15:04 UTC")
		ry := yOf(p.SuccessRate(), 1)
		ratePts = append(ratePts, fmt.Sprintf("%.1f,%.1f", x(i), ry))
		rate.Dots = append(rate.Dots, chartDot{"pt-rate", fmt.Sprintf("%s: %s of %d attempts", at, fmtPercent(p.SuccessRate()), p.Attempts), x(i), ry})
		ms50, ms99 := float64(p.P50)/float64(time.Millisecond), float64(p.P99)/float64(time.Millisecond)
		p50Pts = append(p50Pts, fmt.Sprintf("%.1f,%.1f", x(i), yOf(ms50, top)))
		p99Pts = append(p99Pts, fmt.Sprintf("%.1f,%.1f", x(i), yOf(ms99, top)))
		latency.Dots = append(latency.Dots,
			chartDot{"pt-p50", fmt.Sprintf("%s: p50 %s", at, fmtMs(ms50)), x(i), yOf(ms50, top)},
			chartDot{"pt-p99", fmt.Sprintf("%s: p99 %s", at, fmtMs(ms99)), x(i), yOf(ms99, top)})
	}
	rate.Lines = []chartLine{{"line-rate", strings.Join(ratePts, " ")}}
	latency.Lines = []chartLine{{"line-p50", strings.Join(p50Pts, " ")}, {"line-p99", strings.Join(p99Pts, " ")}}
	return rate, latency
}

// niceCeil rounds ms up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(ms float64) float64 {
	if ms <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(ms)))
	for _, m := range []float64{1, 2, 5, 10} {
		if ms <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// fmtMs shows a duration in milliseconds, or seconds from 1 s.
func fmtMs(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%gs", math.Round(ms/100)/10)
	}
	return fmt.Sprintf("%gms", math.Round(ms*10)/10)
}
