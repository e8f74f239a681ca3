package rpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

func TestVerificationMethodsCallNoToolAndChangeNothing(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"deploy_site": echo, "run_tests": echo})
	plan := proposal(
		toolCall("t", "run_tests", nil, "expected_effects", map[string]any{"tests_passed": true}),
		toolCall("d", "deploy_site", nil, "state_dependencies", []string{"tests_passed"}, "expected_effects", map[string]any{"deployed": true}),
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "note", "value": "x"}},
	)
	var v engine.VerifyResult
	mustCall(t, tb, protocol.MethodVerify, map[string]any{"proposal": plan}, &v)
	if !v.Valid || len(v.ExecutionLevels) != 2 || v.SimulatedState["deployed"] != true {
		t.Fatalf("verify %+v", v)
	}
	var s engine.SimulateResult
	mustCall(t, tb, protocol.MethodSimulate, map[string]any{"proposal": plan, "initial_state": map[string]any{"x": 1}}, &s)
	if s.FinalState["note"] != "x" || s.FinalState["x"] != float64(1) || len(s.Blocked) != 0 {
		t.Fatalf("simulate %+v", s)
	}
	var eq engine.Equivalence
	mustCall(t, tb, protocol.MethodEquivalent, map[string]any{"a": plan, "b": plan}, &eq)
	if !eq.Equivalent || !eq.Sampled {
		t.Fatalf("equivalent %+v", eq)
	}
	var opt struct {
		Proposal protocol.ActionProposal   `json:"proposal"`
		Pruned   []engine.PrunedDependency `json:"pruned"`
	}
	mustCall(t, tb, protocol.MethodOptimize, map[string]any{"proposal": plan}, &opt)
	if len(opt.Proposal.Actions) != 3 || len(opt.Pruned) != 0 {
		t.Fatalf("optimize %+v", opt)
	}
	var mc1, mc2 json.RawMessage
	mcParams := map[string]any{"proposal": plan, "tool_success_rates": map[string]any{"run_tests": 0.8}, "config": map[string]any{"trials": 500, "seed": 7}}
	mustCall(t, tb, protocol.MethodVerifyMonteCarlo, mcParams, &mc1)
	mustCall(t, tb, protocol.MethodVerifyMonteCarlo, mcParams, &mc2)
	if string(mc1) != string(mc2) {
		t.Fatal("monte carlo over the wire is not reproducible")
	}
	for _, bad := range []struct {
		config map[string]any
		want   string
	}{
		{map[string]any{"trials": 0}, "config.trials must be 1 to 100000"},
		{map[string]any{"retry_attempts": 101}, "config.retry_attempts must be 0 to 100"},
	} {
		code, msg := rpcCode(t, tb.Call(ctxT(t), protocol.MethodVerifyMonteCarlo, map[string]any{"proposal": plan, "config": bad.config}, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, bad.want) {
			t.Fatalf("%v: %d %q", bad.config, code, msg)
		}
	}
	var keys []string
	mustCall(t, tb, "state.keys", nil, &keys)
	if len(tb.callLog()) != 0 || len(keys) != 0 {
		t.Fatalf("verification called %d tools or wrote state %v", len(tb.callLog()), keys)
	}
}
