package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// durableReport is the result of --durable-chain: a step of a chain whose
// tool calls are idempotent (each result on the store before the next step
// depends on it), beside a step of the same chain without it, a raw round
// trip and a flush of the journal's disk, all measured in the same run,
// interleaved proposal by proposal.
type durableReport struct {
	Actions        int     `json:"actions"`
	Store          string  `json:"store"`
	JournalSync    string  `json:"journal_sync,omitempty"` // the spawned daemon's
	ProbeDir       string  `json:"fsync_probe_dir"`
	DurableStepMs  float64 `json:"durable_step_ms"`
	PlainStepMs    float64 `json:"plain_step_ms"`
	RoundTripMs    float64 `json:"round_trip_ms"`
	FdatasyncMs    float64 `json:"fdatasync_8k_ms"`
	AppendFsyncMs  float64 `json:"append_fsync_8k_ms"`
	DurableToRT    float64 `json:"durable_step_to_round_trip"`
	PlainToRT      float64 `json:"plain_step_to_round_trip"`
	DurableToFlush float64 `json:"durable_step_to_fdatasync"`
	// ExtraToFlush is what durability adds to a step, in flushes: the
	// durable step less the plain step, over one fdatasync. The disk's
	// limit is 1 (one flush per step, nothing else).
	ExtraToFlush float64 `json:"durable_extra_to_fdatasync"`
	Fdatasync    stats   `json:"fdatasync_8k"`
	AppendFsync  stats   `json:"append_fsync_8k"`
	Plain        stats   `json:"plain_chain_latency"`
}

// runDurableChain alternates, on one connection, a chain of
// --durable-chain idempotent tool calls and the same chain without
// idempotency, and before each pair its share of the --baseline round
// trips and of the --fsync-probes flushes of the journal's disk. Every
// durable chain carries parameters no earlier run used, so each of its
// steps is a miss that claims, calls and commits: never a cache hit.
func runDurableChain(ctx context.Context, o options) (*report, error) {
	n := o.DurableChain
	rep := &report{Connections: 1, ProposalsPerConnection: o.Proposals, ActionsPerProposal: n, GoMaxProcs: runtime.GOMAXPROCS(0)}
	probe, err := newFsyncProbe(probeDir(o))
	if err != nil {
		return nil, err
	}
	defer probe.close()
	clients, err := dialAll(ctx, o, 1, true)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	c := clients[0]
	c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return okResult, nil
	})
	plain, err := json.Marshal(buildChain(n))
	if err != nil {
		return nil, err
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	probeCall := map[string]any{"key": "car-bench-probe"}
	var base, lat, plainLat []time.Duration
	start := time.Now()
	share := func(total, j int) int {
		s := total / o.Proposals
		if j < total%o.Proposals {
			s++
		}
		return s
	}
	for j := 0; j < o.Proposals && ctx.Err() == nil; j++ {
		for k := share(o.FsyncProbes, j); k > 0; k-- {
			if err := probe.measure(); err != nil {
				return nil, fmt.Errorf("fsync probe: %w", err)
			}
		}
		for k := share(o.Baseline, j); k > 0 && ctx.Err() == nil; k-- {
			t0 := time.Now()
			if err := c.Call(ctx, protocol.MethodStateExists, probeCall, nil); err != nil {
				rep.addError("baseline: " + err.Error())
				break
			}
			base = append(base, time.Since(t0))
		}
		durable, err := json.Marshal(buildDurableChain(n, run+"-"+strconv.Itoa(j)))
		if err != nil {
			return nil, err
		}
		// The order of the pair alternates, so that neither always follows
		// the flushes.
		pair := []struct {
			body json.RawMessage
			lat  *[]time.Duration
		}{{plain, &plainLat}, {durable, &lat}}
		if j%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		for _, p := range pair {
			t0 := time.Now()
			var res protocol.ProposalResult
			if err := c.Call(ctx, protocol.MethodProposalSubmit, p.body, &res); err != nil {
				rep.addError("proposal.submit: " + err.Error())
				continue
			}
			*p.lat = append(*p.lat, time.Since(t0))
			checkResults(rep, &res, n)
			checkNoCacheHit(rep, &res)
		}
	}
	rep.WallSecs = time.Since(start).Seconds()
	rep.ProposalsDone = len(lat)
	rep.Latency = summarize(lat)
	rep.Baseline = summarize(base)
	d := &durableReport{Actions: n, Store: o.Store, JournalSync: journalSync(o), ProbeDir: probeDir(o),
		Fdatasync: summarize(probe.flush), AppendFsync: summarize(probe.appends), Plain: summarize(plainLat)}
	d.RoundTripMs, d.FdatasyncMs, d.AppendFsyncMs = rep.Baseline.MeanMs, d.Fdatasync.MeanMs, d.AppendFsync.MeanMs
	if rep.Latency.Count > 0 {
		d.DurableStepMs = rep.Latency.MeanMs / float64(n)
		rep.ActionsPerSec = float64(rep.ProposalsDone*n) / rep.WallSecs
		rep.ProposalsPerSec = float64(rep.ProposalsDone) / rep.WallSecs
	}
	if d.Plain.Count > 0 {
		d.PlainStepMs = d.Plain.MeanMs / float64(n)
	}
	if d.RoundTripMs > 0 {
		d.DurableToRT, d.PlainToRT = d.DurableStepMs/d.RoundTripMs, d.PlainStepMs/d.RoundTripMs
		rep.ActionToRoundTrip = d.DurableToRT
	}
	if d.FdatasyncMs > 0 {
		d.DurableToFlush = d.DurableStepMs / d.FdatasyncMs
		d.ExtraToFlush = (d.DurableStepMs - d.PlainStepMs) / d.FdatasyncMs
	}
	rep.Durable = d
	if ctx.Err() != nil {
		rep.addError("stopped early: " + ctx.Err().Error())
	}
	return rep, nil
}

// buildDurableChain is buildChain with every call idempotent, and each
// call's parameters naming this chain, so that no earlier result answers it.
func buildDurableChain(n int, chain string) map[string]any {
	p := buildChain(n)
	for _, a := range p["proposal"].(map[string]any)["actions"].([]any) {
		act := a.(map[string]any)
		act["idempotent"] = true
		act["parameters"].(map[string]any)["chain"] = chain
	}
	return p
}

// checkNoCacheHit counts a step answered from the idempotency cache as an
// error: the durable chain measures steps that run and are recorded.
func checkNoCacheHit(rep *report, res *protocol.ProposalResult) {
	for _, r := range res.Results {
		if r.CacheHit != "" {
			rep.addError(fmt.Sprintf("action %s answered from the %s cache: the chain measured no step", r.ActionID, r.CacheHit))
			return
		}
	}
}

// journalSync is the journal_sync of the daemon measured: the one car-bench
// gave the daemon it spawned; "" when it did not spawn it (not known).
func journalSync(o options) string {
	if o.Spawn == "" {
		return ""
	}
	return o.JournalSync
}

// syncNote names a known journal_sync in the text report.
func syncNote(mode string) string {
	if mode == "" {
		return ""
	}
	return ", journal_sync " + mode
}
