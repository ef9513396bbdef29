package engine

import (
	"slices"
	"time"
)

// SeriesPoint is what the attempts made in one interval of a
// time series came to: how many, how many succeeded, and the median and
// 99th percentile of their durations (zero when there was none).
type SeriesPoint struct {
	Start     time.Time
	Attempts  int
	Successes int
	P50, P99  time.Duration
}

// SuccessRate is Successes / Attempts; 0 without attempts.
func (p SeriesPoint) SuccessRate() float64 {
	if p.Attempts == 0 {
		return 0
	}
	return float64(p.Successes) / float64(p.Attempts)
}

// AttemptSeries buckets the attempts of ds made in [from, from + n·step)
// into n intervals of step, in time order, each with its count,
// successes and duration percentiles (nearest rank). Attempts outside
// the range are left out; so are deliveries to another endpoint than
// endpointID when it is not "".
func AttemptSeries(ds []Delivery, from time.Time, step time.Duration, n int, endpointID string) []SeriesPoint {
	if n <= 0 || step <= 0 {
		return nil
	}
	points := make([]SeriesPoint, n)
	durations := make([][]time.Duration, n)
	for i := range points {
		points[i].Start = from.Add(time.Duration(i) * step)
	}
	for _, d := range ds {
		if endpointID != "" && d.EndpointID != endpointID {
			continue
		}
		for _, a := range d.Attempts {
			off := a.Start.Sub(from)
			if off < 0 {
				continue
			}
			i := int(off / step)
			if i >= n {
				continue
			}
			points[i].Attempts++
			if a.Outcome == OutcomeSuccess {
				points[i].Successes++
			}
			durations[i] = append(durations[i], a.Duration)
		}
	}
	for i, ds := range durations {
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		points[i].P50, points[i].P99 = nearestRank(ds, 50), nearestRank(ds, 99)
	}
	return points
}

// nearestRank is the p-th percentile of sorted ds, by nearest rank.
func nearestRank(ds []time.Duration, p int) time.Duration {
	r := (p*len(ds) + 99) / 100 // ceil(p/100 · n)
	return ds[max(r, 1)-1]
}
