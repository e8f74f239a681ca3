package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the
// load tool starts one per connection and one to read a spawned daemon.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestArgumentChecks(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--url", "ws://10.0.0.5:9100/"}, "must point at loopback"},
		{[]string{"--url", "ws://example.com:9100/"}, "must point at loopback"},
		{[]string{"--url", "http://127.0.0.1:9100/"}, "must be a ws:// URL"},
		{[]string{"--connections", "0"}, "--connections must be 1 to 10000"},
		{[]string{"--connections", "20000"}, "--connections must be 1 to 10000"},
		{[]string{"--idle", "20000", "--spawn", "bin/car-server"}, "--idle must be 0 to 10000"},
		{[]string{"--spawn", "bin/car-server", "--url", "ws://127.0.0.1:9100/"}, "--spawn starts the daemon it loads; drop --url"},
		{[]string{"--url", "ws://127.0.0.1:9100/", "--url", "ws://10.0.0.5:9100/"}, "must point at loopback"},
		{[]string{"--url", "ws://127.0.0.1:9100/", "--url", "ws://127.0.0.1:9101/", "--idle", "5", "--pid", "7"}, "--idle reads one daemon's memory"},
		{[]string{"--actions", "20000"}, "--actions must be 1 to 10000"},
		{[]string{"--connections", "2000", "--proposals", "100"}, "at most 100000 proposals in all"},
		{[]string{"--duration", "2h"}, "--duration must be positive and at most 30m0s"},
		{[]string{"--idle", "10"}, "--idle needs --spawn or --pid"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--chain", "20000"}, "--chain must be 1 to 10000"},
		{[]string{"--chain", "-1"}, "--chain must be 1 to 10000"},
		{[]string{"--chain", "300", "--actions", "5"}, "drop --actions, --connections and --idle"},
		{[]string{"--chain", "300", "--connections", "2"}, "drop --actions, --connections and --idle"},
		{[]string{"--chain", "300", "--url", "ws://127.0.0.1:9100/", "--url", "ws://127.0.0.1:9101/"}, "--chain runs on one connection to one daemon; give one --url"},
		{[]string{"--durable-chain", "20000", "--spawn", "bin/car-server"}, "--durable-chain must be 1 to 10000"},
		{[]string{"--durable-chain", "10", "--chain", "10"}, "give --chain or --durable-chain, not both"},
		{[]string{"--durable-chain", "10", "--connections", "3"}, "drop --actions, --connections and --idle"},
		{[]string{"--durable-chain", "10", "--spawn", "bin/car-server", "--fsync-probes", "0"}, "--fsync-probes must be 1 to 100000"},
		{[]string{"--durable-chain", "10", "--url", "ws://127.0.0.1:9100/"}, "needs --fsync-dir"},
		{[]string{"--durable-chain", "10", "--fsync-dir", "/tmp", "--url", "ws://127.0.0.1:9100/", "--url", "ws://127.0.0.1:9101/"}, "--durable-chain runs on one connection to one daemon"},
		{[]string{"--spawn", "bin/car-server", "--store", "sqlite"}, "--store must be file or postgres"},
		{[]string{"--store", "postgres", "--postgres-url", "postgres://x"}, "it needs --spawn"},
		{[]string{"--spawn", "bin/car-server", "--store", "postgres", "--postgres-url", ""}, "--store postgres needs --postgres-url"},
		{[]string{"--spawn", "bin/car-server", "--journal-sync", "normal"}, "--journal-sync must be full or proposal"},
		{[]string{"--journal-sync", "proposal"}, "it needs --spawn"},
	}
	for _, tc := range cases {
		_, err := parseArgs(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want %q, got %v", tc.args, tc.want, err)
		}
	}
	for _, ok := range [][]string{
		{"--url", "ws://127.0.0.1:9100/"}, {"--url", "ws://[::1]:9100/"}, {"--url", "ws://localhost:9100/"},
		{"--spawn", "bin/car-server", "--idle", "10000", "--connections", "10000", "--proposals", "3"},
		{"--url", "ws://127.0.0.1:9100/", "--url", "ws://127.0.0.1:9101/"},
		{"--spawn", "bin/car-server", "--chain", "300", "--baseline", "3000"},
		{"--spawn", "bin/car-server", "--durable-chain", "100", "--journal-sync", "proposal"},
		{"--spawn", "bin/car-server", "--durable-chain", "100", "--store", "postgres", "--postgres-url", "postgres://car@/postgres?host=/tmp"},
		{"--spawn", "bin/car-server", "--durable-chain", "100", "--store", "postgres", "--postgres-url", "postgres://car@/postgres?host=/tmp", "--journal-sync", "proposal"},
	} {
		if _, err := parseArgs(ok, io.Discard); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	if o, err := parseArgs(nil, io.Discard); err != nil || len(o.URLs) != 1 || o.URLs[0] != "ws://127.0.0.1:9100/" {
		t.Errorf("no --url: %v %v, want the default daemon", o.URLs, err)
	}
	if code := run([]string{"--connections", "0"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("a bad argument exits %d, want 2", code)
	}
}

func TestSummarizeAndReport(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.Count != 100 || s.MeanMs != 50.5 || s.P50Ms != 50 || s.P95Ms != 95 || s.P99Ms != 99 || s.MaxMs != 100 {
		t.Fatalf("%+v", s)
	}
	if summarize(nil).Count != 0 {
		t.Fatal("empty input")
	}
	r := &report{Connections: 2, Daemons: 2, ProposalsPerConnection: 3, ActionsPerProposal: 4, ProposalsDone: 6, WallSecs: 1.5,
		Latency: s, Baseline: stats{Count: 10, MeanMs: 0.5, P99Ms: 1}, ActionToRoundTrip: 1.25, P99ToRoundTripP99: 99, P99ToMean: 99.0 / 50.5,
		Beside: stats{Count: 6, P99Ms: 33}, P99ToBesideP99: 3,
		CPU:  &cpuReport{PerRoundTrip: cpuCost{DaemonUs: 30, BenchUs: 20}, PerProposal: cpuCost{DaemonUs: 250, BenchUs: 150}, ProposalToRoundTrip: 8, P99RatioToCPURatio: 99.0 / 8},
		Idle: &idleReport{Connections: 10, RSSBeforeKiB: 100, RSSAfterKiB: 500, PerConnectionKiB: 40}}
	r.addError("boom")
	var text bytes.Buffer
	if err := r.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 connections over 2 daemons × 3 proposals × 4 actions", "p99 99.000", "1.25×", "99.000 ms / 1.000 ms = 99.00×", "p99 33.000 (6 calls, same connection, same moment)", "99.000 ms / 33.000 ms = 3.00×",
		"daemon 30.0 µs + car-bench 20.0 µs = 50.0 µs (baseline phase)", "daemon 250.0 µs + car-bench 150.0 µs = 400.0 µs = 8.0 round trips", "99.00× / 8.0 = 12.38", "proposal p99 / round-trip p99 99.00× beside CPU ratio 8.0; p99 / mean 1.96 (target ≤ 2.0); p99 ratio / CPU ratio 12.38 (target ≤ 1.0)", "40.0 KiB per connection", "errors", "boom"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := r.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["errors"] != float64(1) || back["action_to_round_trip"] != 1.25 || back["p99_to_beside_p99"] != 3.0 ||
		back["cpu"].(map[string]any)["proposal_to_round_trip"] != 8.0 {
		t.Fatalf("json report: %v %s", err, js.String())
	}
}

func TestChainProposalAndReport(t *testing.T) {
	p := buildChain(3)["proposal"].(map[string]any)["actions"].([]any)
	if len(p) != 3 {
		t.Fatalf("%d actions", len(p))
	}
	if _, ok := p[0].(map[string]any)["dependencies"]; ok {
		t.Error("the first action of a chain depends on nothing")
	}
	for i := 1; i < 3; i++ {
		deps, _ := p[i].(map[string]any)["dependencies"].([]string)
		if want := p[i-1].(map[string]any)["id"]; len(deps) != 1 || deps[0] != want {
			t.Errorf("action %d depends on %v, want [%v]", i, deps, want)
		}
	}
	o, err := parseArgs([]string{"--chain", "300"}, io.Discard)
	if err != nil || o.Connections != 1 || o.Chain != 300 {
		t.Fatalf("--chain 300: %+v %v", o, err)
	}
	r := &report{ProposalsPerConnection: 2, Chain: &chainReport{Actions: 300, PerActionMs: 0.3, RoundTripMs: 0.25, Ratio: 1.2},
		Baseline: stats{Count: 10, MeanMs: 0.25}, ActionToRoundTrip: 1.2}
	var text bytes.Buffer
	if err := r.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 proposals of 300 tool calls", "0.300 ms (round trip 0.250 ms)", "1.20×"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}
