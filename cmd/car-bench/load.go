package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// runLoad dials, measures the baseline, runs the proposals and, when asked,
// measures memory per idle connection.
func runLoad(ctx context.Context, o options) (*report, error) {
	rep := &report{Connections: o.Connections, ProposalsPerConnection: o.Proposals, ActionsPerProposal: o.Actions, GoMaxProcs: runtime.GOMAXPROCS(0)}
	clients, err := dialAll(ctx, o, o.Connections, true)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)

	// Baseline: raw round trips over the same stack, every connection at once.
	probe := map[string]any{"key": "car-bench-probe"}
	base := make([][]time.Duration, len(clients))
	daemonPID := 0
	if len(o.URLs) == 1 {
		daemonPID = o.PID
	}
	cpu := newCPUMeter(daemonPID)
	phase := cpu.mark()
	runEach(clients, func(i int, c *client.Client) {
		for j := 0; j < o.Baseline && ctx.Err() == nil; j++ {
			start := time.Now()
			if err := c.Call(ctx, protocol.MethodStateExists, probe, nil); err != nil {
				rep.addError("baseline: " + err.Error())
				return
			}
			base[i] = append(base[i], time.Since(start))
		}
	})
	rep.Baseline = summarize(flatten(base))
	perRoundTrip, roundTripRead := cpu.per(phase, rep.Baseline.Count)

	// Proposals of independent tool calls, every connection at once. Beside
	// one proposal in besideEvery, at the same moment and on the same
	// connection, one raw round trip: it meets the load the proposals make,
	// and adds about a hundredth to it.
	proposal := buildProposal(o.Actions)
	lat := make([][]time.Duration, len(clients))
	beside := make([][]time.Duration, len(clients))
	start := time.Now()
	phase = cpu.mark()
	runEach(clients, func(i int, c *client.Client) {
		for j := 0; j < o.Proposals && ctx.Err() == nil; j++ {
			t0 := time.Now()
			var probed chan time.Duration // the round trip beside, when this proposal has one; -1 when it failed
			if (i+j)%besideEvery == 0 {
				probed = make(chan time.Duration, 1)
				go func() {
					if err := c.Call(ctx, protocol.MethodStateExists, probe, nil); err != nil {
						rep.addError("round trip beside a proposal: " + err.Error())
						probed <- -1
						return
					}
					probed <- time.Since(t0)
				}()
			}
			var res protocol.ProposalResult
			err := c.Call(ctx, protocol.MethodProposalSubmit, proposal, &res)
			if probed != nil {
				if d := <-probed; d >= 0 {
					beside[i] = append(beside[i], d)
				}
			}
			if err != nil {
				rep.addError("proposal.submit: " + err.Error())
				continue
			}
			lat[i] = append(lat[i], time.Since(t0))
			checkResults(rep, &res, o.Actions)
		}
	})
	rep.WallSecs = time.Since(start).Seconds()
	all := flatten(lat)
	rep.ProposalsDone = len(all)
	if perProposal, ok := cpu.per(phase, rep.ProposalsDone); ok && roundTripRead && perRoundTrip.total() > 0 {
		if perProposal.DaemonUs == 0 { // the daemon could not be read to the end: car-bench's alone
			perRoundTrip.DaemonUs = 0
		}
		rep.CPU = &cpuReport{PerRoundTrip: perRoundTrip, PerProposal: perProposal}
		rep.CPU.ProposalToRoundTrip = perProposal.total() / perRoundTrip.total()
	}
	rep.Latency = summarize(all)
	if rep.WallSecs > 0 {
		rep.ProposalsPerSec = float64(rep.ProposalsDone) / rep.WallSecs
		rep.ActionsPerSec = float64(rep.ProposalsDone*o.Actions) / rep.WallSecs
	}
	rep.Beside = summarize(flatten(beside))
	if rep.Baseline.Count > 0 && rep.Latency.Count > 0 {
		rep.ActionToRoundTrip = rep.Latency.MeanMs / float64(o.Actions) / rep.Baseline.MeanMs
		rep.P99ToRoundTripP99 = rep.Latency.P99Ms / rep.Baseline.P99Ms
		rep.P99ToMean = rep.Latency.P99Ms / rep.Latency.MeanMs
		if rep.CPU != nil && rep.CPU.ProposalToRoundTrip > 0 {
			rep.CPU.P99RatioToCPURatio = rep.P99ToRoundTripP99 / rep.CPU.ProposalToRoundTrip
		}
	}
	if rep.Beside.Count > 0 && rep.Latency.Count > 0 {
		rep.P99ToBesideP99 = rep.Latency.P99Ms / rep.Beside.P99Ms
	}
	if ctx.Err() != nil {
		rep.addError("stopped early: " + ctx.Err().Error())
	}

	if o.Idle > 0 {
		if err := measureIdle(ctx, o, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// besideEvery: one proposal in this many has a round trip sent beside it.
const besideEvery = 10

// buildProposal is K independent tool calls to the tool car-bench answers.
func buildProposal(k int) map[string]any {
	actions := make([]any, k)
	for i := range actions {
		actions[i] = map[string]any{"id": "a" + strconv.Itoa(i), "type": "tool_call", "tool": "bench_noop", "parameters": map[string]any{"i": i}}
	}
	return map[string]any{"proposal": map[string]any{"actions": actions}}
}

// dialAll opens n connections, at most 64 dials at a time. With tools, each
// registers bench_noop and answers it.
func dialAll(ctx context.Context, o options, n int, tools bool) ([]*client.Client, error) {
	clients := make([]*client.Client, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := client.Dial(ctx, o.URLs[i%len(o.URLs)], &client.Options{Token: o.Token})
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = c
			if !tools {
				return
			}
			c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
				return map[string]bool{"ok": true}, nil
			})
			errs[i] = c.Call(ctx, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "bench_noop"}}, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("connection %d of %d: %w", i+1, n, err)
		}
	}
	return clients, nil
}

func closeAll(clients []*client.Client) {
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
}

// runEach runs f for every client concurrently and waits.
func runEach(clients []*client.Client, f func(i int, c *client.Client)) {
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, c)
		}()
	}
	wg.Wait()
}

func flatten(xs [][]time.Duration) []time.Duration {
	var out []time.Duration
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

// measureIdle opens o.Idle authenticated, idle connections and reports how
// much the daemon's resident memory grew per connection.
func measureIdle(ctx context.Context, o options, rep *report) error {
	before, err := rssKiB(o.PID)
	if err != nil {
		return err
	}
	idle, err := dialAll(ctx, o, o.Idle, false)
	if err != nil {
		return err
	}
	defer closeAll(idle)
	// Every connection is authenticated and negotiated by now, so the daemon
	// holds all of them.
	after, err := rssKiB(o.PID)
	if err != nil {
		return err
	}
	rep.Idle = &idleReport{Connections: o.Idle, RSSBeforeKiB: before, RSSAfterKiB: after, PerConnectionKiB: float64(after-before) / float64(o.Idle)}
	return nil
}

// rssKiB reads a process's resident set size from /proc (Linux).
func rssKiB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the daemon's memory (pid %d): %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				return strconv.Atoi(f[1])
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
