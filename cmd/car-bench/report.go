package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"text/tabwriter"
	"time"
)

// stats summarizes latencies in milliseconds.
type stats struct {
	Count  int     `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

type idleReport struct {
	Connections      int     `json:"connections"`
	RSSBeforeKiB     int     `json:"rss_before_kib"`
	RSSAfterKiB      int     `json:"rss_after_kib"`
	PerConnectionKiB float64 `json:"per_connection_kib"`
}

// report is one run's result.
type report struct {
	Connections            int     `json:"connections"`
	Daemons                int     `json:"daemons"` // the connections are spread over them round-robin
	ProposalsPerConnection int     `json:"proposals_per_connection"`
	ActionsPerProposal     int     `json:"actions_per_proposal"`
	GoMaxProcs             int     `json:"gomaxprocs"`
	ProposalsDone          int     `json:"proposals_done"`
	WallSecs               float64 `json:"wall_secs"`
	ProposalsPerSec        float64 `json:"proposals_per_sec"`
	ActionsPerSec          float64 `json:"actions_per_sec"`
	Latency                stats   `json:"proposal_latency"`
	Baseline               stats   `json:"baseline_round_trip"`
	// Beside is a round trip sent with one proposal in ten, on its
	// connection at the same moment: it meets the load the proposals make.
	Beside            stats   `json:"round_trip_beside_proposals"`
	ActionToRoundTrip float64 `json:"action_to_round_trip"`
	// P99ToRoundTripP99 sets the proposals' p99 against the baseline's,
	// measured before them with every connection making round trips:
	// it is the cost of a proposal in round trips once the daemon is
	// saturated. P99ToBesideP99 sets it against the round trips sent
	// beside the proposals: how much longer a proposal waits than a
	// single call under the same load.
	P99ToRoundTripP99 float64 `json:"p99_to_round_trip_p99"`
	P99ToBesideP99    float64 `json:"p99_to_beside_p99"`
	// P99ToMean is the proposals' p99 over their mean: how far the
	// slowest proposals wait beyond the typical one.
	P99ToMean    float64  `json:"p99_to_mean"`
	Errors       int      `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// CPU is what the two phases cost in CPU time, when it can be read.
	CPU     *cpuReport     `json:"cpu,omitempty"`
	Idle    *idleReport    `json:"idle,omitempty"`
	Chain   *chainReport   `json:"chain,omitempty"`
	Durable *durableReport `json:"durable_chain,omitempty"`

	mu sync.Mutex
}

// addError counts an error and keeps the first few for the report.
func (r *report) addError(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Errors++
	if len(r.ErrorSamples) < 5 {
		r.ErrorSamples = append(r.ErrorSamples, msg)
	}
}

// summarize computes count, mean and nearest-rank percentiles.
func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		return s[i]
	}
	return stats{Count: len(s), MeanMs: ms(sum) / float64(len(s)), P50Ms: ms(rank(0.50)), P95Ms: ms(rank(0.95)), P99Ms: ms(rank(0.99)), MaxMs: ms(s[len(s)-1])}
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	over := ""
	if r.Daemons > 1 {
		over = fmt.Sprintf(" over %d daemons", r.Daemons)
	}
	if r.Durable != nil {
		return r.writeDurable(tw)
	}
	if r.Chain != nil {
		fmt.Fprintf(tw, "chain\t%d proposals of %d tool calls, each depending on the one before (GOMAXPROCS %d)\n", r.ProposalsPerConnection, r.Chain.Actions, r.GoMaxProcs)
	} else {
		fmt.Fprintf(tw, "load\t%d connections%s × %d proposals × %d actions (GOMAXPROCS %d)\n", r.Connections, over, r.ProposalsPerConnection, r.ActionsPerProposal, r.GoMaxProcs)
	}
	fmt.Fprintf(tw, "done\t%d proposals in %.2fs: %.1f proposals/s, %.0f actions/s\n", r.ProposalsDone, r.WallSecs, r.ProposalsPerSec, r.ActionsPerSec)
	fmt.Fprintf(tw, "proposal latency\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f, max %.3f\n", r.Latency.MeanMs, r.Latency.P50Ms, r.Latency.P95Ms, r.Latency.P99Ms, r.Latency.MaxMs)
	fmt.Fprintf(tw, "baseline round trip\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f (%d calls, same connections, same run)\n", r.Baseline.MeanMs, r.Baseline.P50Ms, r.Baseline.P95Ms, r.Baseline.P99Ms, r.Baseline.Count)
	if r.Chain != nil {
		fmt.Fprintf(tw, "per action\t%.3f ms (round trip %.3f ms)\n", r.Chain.PerActionMs, r.Chain.RoundTripMs)
	}
	if r.Baseline.Count > 0 {
		fmt.Fprintf(tw, "per action / round trip\t%.2f×\n", r.ActionToRoundTrip)
		if r.Chain == nil {
			fmt.Fprintf(tw, "proposal p99 / round-trip p99\t%.3f ms / %.3f ms = %.2f×\n", r.Latency.P99Ms, r.Baseline.P99Ms, r.P99ToRoundTripP99)
		}
	}
	if r.Beside.Count > 0 {
		fmt.Fprintf(tw, "round trip beside a proposal\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f (%d calls, same connection, same moment)\n", r.Beside.MeanMs, r.Beside.P50Ms, r.Beside.P95Ms, r.Beside.P99Ms, r.Beside.Count)
		fmt.Fprintf(tw, "proposal p99 / p99 of the round trips beside\t%.3f ms / %.3f ms = %.2f×\n", r.Latency.P99Ms, r.Beside.P99Ms, r.P99ToBesideP99)
	}
	if c := r.CPU; c != nil {
		fmt.Fprintf(tw, "CPU per round trip\t%s (baseline phase)\n", c.PerRoundTrip.text())
		fmt.Fprintf(tw, "CPU per proposal\t%s = %.1f round trips\n", c.PerProposal.text(), c.ProposalToRoundTrip)
		if c.P99RatioToCPURatio > 0 {
			fmt.Fprintf(tw, "p99 ratio / CPU ratio\t%.2f× / %.1f = %.2f (1 or below: no wait beyond the proposals' work)\n", r.P99ToRoundTripP99, c.ProposalToRoundTrip, c.P99RatioToCPURatio)
			fmt.Fprintf(tw, "fairness\tproposal p99 / round-trip p99 %.2f× beside CPU ratio %.1f; p99 / mean %.2f (target ≤ 2.0); p99 ratio / CPU ratio %.2f (target ≤ 1.0)\n", r.P99ToRoundTripP99, c.ProposalToRoundTrip, r.P99ToMean, c.P99RatioToCPURatio)
		}
	}
	if r.Idle != nil {
		fmt.Fprintf(tw, "idle connections\t%d: daemon RSS %d → %d KiB, %.1f KiB per connection\n", r.Idle.Connections, r.Idle.RSSBeforeKiB, r.Idle.RSSAfterKiB, r.Idle.PerConnectionKiB)
	}
	fmt.Fprintf(tw, "errors\t%d\n", r.Errors)
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(tw, "\t%s\n", e)
	}
	return tw.Flush()
}

// writeDurable is the text report of --durable-chain.
func (r *report) writeDurable(tw *tabwriter.Writer) error {
	d := r.Durable
	fmt.Fprintf(tw, "durable chain\t%d proposals of %d idempotent tool calls, each depending on the one before, %s store%s, alternating with the same chain not idempotent (GOMAXPROCS %d)\n", r.ProposalsPerConnection, d.Actions, d.Store, syncNote(d.JournalSync), r.GoMaxProcs)
	fmt.Fprintf(tw, "done\t%d durable proposals in %.2fs (with everything between them)\n", r.ProposalsDone, r.WallSecs)
	fmt.Fprintf(tw, "durable proposal\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f, max %.3f\n", r.Latency.MeanMs, r.Latency.P50Ms, r.Latency.P95Ms, r.Latency.P99Ms, r.Latency.MaxMs)
	fmt.Fprintf(tw, "plain proposal\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f, max %.3f\n", d.Plain.MeanMs, d.Plain.P50Ms, d.Plain.P95Ms, d.Plain.P99Ms, d.Plain.MaxMs)
	fmt.Fprintf(tw, "baseline round trip\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f (%d calls, same connection, same run)\n", r.Baseline.MeanMs, r.Baseline.P50Ms, r.Baseline.P95Ms, r.Baseline.P99Ms, r.Baseline.Count)
	fmt.Fprintf(tw, "fdatasync, 8 kB in place\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f (%d, in %s)\n", d.Fdatasync.MeanMs, d.Fdatasync.P50Ms, d.Fdatasync.P95Ms, d.Fdatasync.P99Ms, d.Fdatasync.Count, d.ProbeDir)
	fmt.Fprintf(tw, "fsync, 8 kB appended\tmean %.3f ms, p50 %.3f, p95 %.3f, p99 %.3f (%d, same directory)\n", d.AppendFsync.MeanMs, d.AppendFsync.P50Ms, d.AppendFsync.P95Ms, d.AppendFsync.P99Ms, d.AppendFsync.Count)
	fmt.Fprintf(tw, "per step\tdurable %.3f ms, plain %.3f ms\n", d.DurableStepMs, d.PlainStepMs)
	if r.Baseline.Count > 0 {
		fmt.Fprintf(tw, "per step / round trip\tdurable %.2f×, plain %.2f×\n", d.DurableToRT, d.PlainToRT)
	}
	if d.FdatasyncMs > 0 {
		fmt.Fprintf(tw, "durable step / fdatasync\t%.2f×\n", d.DurableToFlush)
		fmt.Fprintf(tw, "(durable − plain) / fdatasync\t%.2f× (1: one flush per step and nothing else)\n", d.ExtraToFlush)
	}
	fmt.Fprintf(tw, "errors\t%d\n", r.Errors)
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(tw, "\t%s\n", e)
	}
	return tw.Flush()
}
