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

// chainReport is the result of --chain: per action of a proposal whose
// actions run one after another, beside a raw round trip on the same
// connection in the same run.
type chainReport struct {
	Actions     int     `json:"actions"`
	PerActionMs float64 `json:"per_action_ms"`
	RoundTripMs float64 `json:"round_trip_ms"`
	Ratio       float64 `json:"action_to_round_trip"`
}

// runChain submits --proposals chains of --chain tool calls, each action
// listing the one before in its dependencies, on one connection. Before
// each proposal it makes its share of the --baseline raw round trips on the
// same connection, so that the baseline and the chains share whatever the
// machine was doing at the time.
func runChain(ctx context.Context, o options) (*report, error) {
	rep := &report{Connections: 1, ProposalsPerConnection: o.Proposals, ActionsPerProposal: o.Chain, GoMaxProcs: runtime.GOMAXPROCS(0)}
	clients, err := dialAll(ctx, o, 1, true)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	c := clients[0]
	// What the load tool itself does per action is kept to nothing, so that
	// the figure is the daemon's: the tool's answer and the proposal are
	// encoded once.
	c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return okResult, nil
	})
	proposal, err := json.Marshal(buildChain(o.Chain))
	if err != nil {
		return nil, err
	}
	probe := map[string]any{"key": "car-bench-probe"}
	var base, lat []time.Duration
	start := time.Now()
	for j := 0; j < o.Proposals && ctx.Err() == nil; j++ {
		// This proposal's share of the round trips; the first few take one
		// more when they do not divide evenly.
		share := o.Baseline / o.Proposals
		if j < o.Baseline%o.Proposals {
			share++
		}
		for k := 0; k < share && ctx.Err() == nil; k++ {
			t0 := time.Now()
			if err := c.Call(ctx, protocol.MethodStateExists, probe, nil); err != nil {
				rep.addError("baseline: " + err.Error())
				break
			}
			base = append(base, time.Since(t0))
		}
		t0 := time.Now()
		var res protocol.ProposalResult
		if err := c.Call(ctx, protocol.MethodProposalSubmit, json.RawMessage(proposal), &res); err != nil {
			rep.addError("proposal.submit: " + err.Error())
			continue
		}
		lat = append(lat, time.Since(t0))
		checkResults(rep, &res, o.Chain)
	}
	rep.WallSecs = time.Since(start).Seconds()
	rep.ProposalsDone = len(lat)
	rep.Latency = summarize(lat)
	rep.Baseline = summarize(base)
	if rep.WallSecs > 0 {
		rep.ProposalsPerSec = float64(rep.ProposalsDone) / rep.WallSecs
		rep.ActionsPerSec = float64(rep.ProposalsDone*o.Chain) / rep.WallSecs
	}
	ch := &chainReport{Actions: o.Chain}
	if rep.Latency.Count > 0 {
		ch.PerActionMs = rep.Latency.MeanMs / float64(o.Chain)
	}
	if rep.Baseline.Count > 0 && rep.Latency.Count > 0 {
		ch.RoundTripMs = rep.Baseline.MeanMs
		ch.Ratio = ch.PerActionMs / ch.RoundTripMs
		rep.ActionToRoundTrip = ch.Ratio
	}
	rep.Chain = ch
	if ctx.Err() != nil {
		rep.addError("stopped early: " + ctx.Err().Error())
	}
	return rep, nil
}

// okResult is bench_noop's answer.
var okResult = json.RawMessage(`{"ok":true}`)

// buildChain is N tool calls to the tool car-bench answers, each depending
// on the one before it (the proposal's dependencies field).
func buildChain(n int) map[string]any {
	actions := make([]any, n)
	for i := range actions {
		a := map[string]any{"id": "a" + strconv.Itoa(i), "type": "tool_call", "tool": "bench_noop", "parameters": map[string]any{"i": i}}
		if i > 0 {
			a["dependencies"] = []string{"a" + strconv.Itoa(i-1)}
		}
		actions[i] = a
	}
	return map[string]any{"proposal": map[string]any{"actions": actions}}
}

// checkResults counts a proposal with fewer successful actions than it had
// as an error, naming the first that did not succeed.
func checkResults(rep *report, res *protocol.ProposalResult, want int) {
	if len(res.Results) != want {
		rep.addError(fmt.Sprintf("proposal %s: %d results for %d actions", res.ProposalID, len(res.Results), want))
		return
	}
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			e := ""
			if r.Error != nil {
				e = *r.Error
			}
			rep.addError(fmt.Sprintf("action %s %s: %s", r.ActionID, r.Status, e))
			return
		}
	}
}
