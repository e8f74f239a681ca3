package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// ErrNoTrajectories says the daemon keeps no trajectory store.
var ErrNoTrajectories = errors.New("this daemon keeps no trajectories")

// feedbackBucketBase is the ratio between neighbouring duration buckets: a
// percentile is reported within 2% of the exact one, and a tool's figures
// take memory by the spread of its durations, not their number.
const feedbackBucketBase = 1.02

// feedbackFloorMs is the lower edge of the first bucket.
const feedbackFloorMs = 0.001

// toolTally gathers one tool's attempts.
type toolTally struct {
	dispatched, succeeded int
	buckets               map[int]int
	minMs, maxMs          float64
}

func bucketOf(ms float64) int {
	if ms <= feedbackFloorMs {
		return 0
	}
	return int(math.Ceil(math.Log(ms/feedbackFloorMs) / math.Log(feedbackBucketBase)))
}

// percentile is the nearest-rank q-th duration: its bucket's upper edge,
// kept within the durations seen.
func (t *toolTally) percentile(q float64) float64 {
	rank := int(math.Ceil(q * float64(t.dispatched)))
	keys := make([]int, 0, len(t.buckets))
	for k := range t.buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := 0
	for _, k := range keys {
		seen += t.buckets[k]
		if seen >= rank {
			v := feedbackFloorMs * math.Pow(feedbackBucketBase, float64(k))
			return math.Round(min(max(v, t.minMs), t.maxMs)*1000) / 1000
		}
	}
	return t.maxMs
}

// ToolFeedback tallies the dispatched attempts of the last windowDays UTC
// days (today included) from the trajectory store: for tools, or, when
// tools is empty, for every tool with a record in the window. Rejected and
// skipped actions were never dispatched and have no record. A tool with
// nothing in the window has a null success rate. maxTools bounds the tools
// reported without a filter. A non-empty principal counts only that
// principal's attempts (an agent sees its own).
func (rt *Runtime) ToolFeedback(ctx context.Context, windowDays int, tools []string, maxTools int, principal string) ([]protocol.ToolFeedback, error) {
	ts := rt.opts.Trajectories
	if ts == nil {
		return nil, ErrNoTrajectories
	}
	since := time.Now().UTC().AddDate(0, 0, -(windowDays - 1))
	tally := map[string]*toolTally{}
	for _, t := range tools {
		tally[t] = &toolTally{buckets: map[int]int{}}
	}
	filtered := len(tools) > 0
	err := ts.Scan(ctx, since, func(r store.Trajectory) error {
		if principal != "" && r.Principal != principal {
			return nil
		}
		t, ok := tally[r.Tool]
		if !ok {
			if filtered {
				return nil
			}
			if len(tally) >= maxTools {
				return fmt.Errorf("more than %d tools have records in the window; name the ones you want in tools", maxTools)
			}
			t = &toolTally{buckets: map[int]int{}}
			tally[r.Tool] = t
		}
		if t.dispatched == 0 || r.DurationMs < t.minMs {
			t.minMs = r.DurationMs
		}
		t.maxMs = max(t.maxMs, r.DurationMs)
		t.dispatched++
		if r.Status == store.TrajectorySucceeded {
			t.succeeded++
		}
		t.buckets[bucketOf(r.DurationMs)]++
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]protocol.ToolFeedback, 0, len(tally))
	for name, t := range tally {
		f := protocol.ToolFeedback{Tool: name, Dispatched: t.dispatched, Succeeded: t.succeeded, Failed: t.dispatched - t.succeeded}
		if t.dispatched > 0 {
			rate := float64(t.succeeded) / float64(t.dispatched)
			p50, p99 := t.percentile(0.5), t.percentile(0.99)
			f.SuccessRate, f.P50Ms, f.P99Ms = &rate, &p50, &p99
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b protocol.ToolFeedback) int {
		if a.Tool < b.Tool {
			return -1
		}
		if a.Tool > b.Tool {
			return 1
		}
		return 0
	})
	return out, nil
}
