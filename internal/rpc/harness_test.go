package rpc

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// harnessServer serves a runtime whose harness config is saved at path,
// loaded at start as the daemon does.
func harnessServer(t *testing.T, path string) *testServer {
	t.Helper()
	ts := startServerWith(t, serverSetup{engine: engine.Options{Harness: file.NewHarness(path)}})
	if err := ts.rt.LoadHarness(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestHarnessUpdateLosesNothing: 100 concurrent add {max_retries: 1} from
// four connections each see a different config after their own update, and
// the last one has all 100.
func TestHarnessUpdateLosesNothing(t *testing.T) {
	ts := harnessServer(t, filepath.Join(t.TempDir(), "harness.json"))
	conns := make([]*client.Client, 4)
	for i := range conns {
		conns[i] = ts.dial(t, "")
	}
	var got protocol.HarnessConfig
	call(t, conns[0], protocol.MethodHarnessSet, map[string]any{"max_retries": 0}, &got)
	if got.MaxRetries != 0 || got.RetryBackoffMs != 1 {
		t.Fatalf("after set max_retries 0: %+v (retry_backoff_ms should still be the daemon's base, 1 ms here)", got)
	}
	var wg sync.WaitGroup
	seen := make([]protocol.HarnessConfig, 100)
	errs := make([]error, 100)
	for i := range 100 {
		wg.Go(func() {
			errs[i] = conns[i%len(conns)].Call(ctxT(t), protocol.MethodHarnessUpdate, map[string]any{"add": map[string]any{"max_retries": 1}}, &seen[i])
		})
	}
	wg.Wait()
	after := map[int64]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		after[seen[i].MaxRetries] = true
	}
	for n := int64(1); n <= 100; n++ {
		if !after[n] {
			t.Fatalf("no update returned max_retries %d: two updates read the same config (%d distinct results)", n, len(after))
		}
	}
	call(t, conns[1], protocol.MethodHarnessGet, nil, &got)
	if got.MaxRetries != 100 {
		t.Fatalf("after 100 adds of 1 from 0: max_retries %d", got.MaxRetries)
	}
}

// TestHarnessSetUpdateAndPersist: set replaces, update sets then adds, and
// a restarted daemon on the same file reads the last config.
func TestHarnessSetUpdateAndPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "harness.json")
	ts := harnessServer(t, path)
	c := ts.dial(t, "")
	var got protocol.HarnessConfig
	call(t, c, protocol.MethodHarnessGet, nil, &got)
	if got != (protocol.HarnessConfig{MaxRetries: 3, RetryBackoffMs: 1, PlanningMaxReplans: 0}) {
		t.Fatalf("defaults: %+v, want max_retries 3 (the IR's), the daemon's retry base, no replans", got)
	}
	call(t, c, protocol.MethodHarnessSet, map[string]any{"retry_backoff_ms": 250, "planning_max_replans": 2}, &got)
	if got != (protocol.HarnessConfig{MaxRetries: 3, RetryBackoffMs: 250, PlanningMaxReplans: 2}) {
		t.Fatalf("after set: %+v", got)
	}
	call(t, c, protocol.MethodHarnessUpdate, map[string]any{"set": map[string]any{"max_retries": 5}, "add": map[string]any{"max_retries": 2, "planning_max_replans": -1}}, &got)
	if got != (protocol.HarnessConfig{MaxRetries: 7, RetryBackoffMs: 250, PlanningMaxReplans: 1}) {
		t.Fatalf("after update set 5 then add 2, replans -1: %+v", got)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	again := harnessServer(t, path).dial(t, "")
	var loaded protocol.HarnessConfig
	call(t, again, protocol.MethodHarnessGet, nil, &loaded)
	if loaded != got {
		t.Fatalf("after a restart: %+v, want %+v", loaded, got)
	}
}

// TestHarnessBoundsRefuseAndChangeNothing: every field out of its bounds,
// an add past its range, an unknown member: -32602, config unchanged.
func TestHarnessBoundsRefuseAndChangeNothing(t *testing.T) {
	c := harnessServer(t, filepath.Join(t.TempDir(), "harness.json")).dial(t, "")
	var before protocol.HarnessConfig
	call(t, c, protocol.MethodHarnessSet, map[string]any{"max_retries": 50}, &before)
	for _, bad := range []struct {
		method string
		params map[string]any
		says   string
	}{
		{protocol.MethodHarnessSet, map[string]any{"max_retries": 101}, "max_retries"},
		{protocol.MethodHarnessSet, map[string]any{"max_retries": -1}, "max_retries"},
		{protocol.MethodHarnessSet, map[string]any{"retry_backoff_ms": 60001}, "retry_backoff_ms"},
		{protocol.MethodHarnessSet, map[string]any{"planning_max_replans": 33}, "planning_max_replans"},
		{protocol.MethodHarnessSet, map[string]any{"retries": 1}, "unknown field"},
		{protocol.MethodHarnessUpdate, map[string]any{"add": map[string]any{"max_retries": 60}}, "max_retries"},
		{protocol.MethodHarnessUpdate, map[string]any{"add": map[string]any{"retry_backoff_ms": 1 << 62}}, "add.retry_backoff_ms"},
		{protocol.MethodHarnessUpdate, map[string]any{"set": map[string]any{"max_retries": 1}, "add": map[string]any{"max_retries": -2}}, "max_retries"},
		{protocol.MethodHarnessUpdate, map[string]any{"sett": map[string]any{}}, "unknown field"},
	} {
		code, msg := rpcCode(t, c.Call(ctxT(t), bad.method, bad.params, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, bad.says) {
			t.Errorf("%s %v: %d %q, want -32602 saying %q", bad.method, bad.params, code, msg, bad.says)
		}
	}
	var after protocol.HarnessConfig
	call(t, c, protocol.MethodHarnessGet, nil, &after)
	if after != before {
		t.Fatalf("refused calls changed the config: %+v, then %+v", before, after)
	}
}

// TestHarnessAgentMayReadNotSet: an agent reads the config and is refused
// set and update (-32003); a person may set it.
func TestHarnessAgentMayReadNotSet(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	agent := rs.mustAgent(t, "tuner")
	var got protocol.HarnessConfig
	call(t, agent, protocol.MethodHarnessGet, nil, &got)
	for _, m := range []string{protocol.MethodHarnessSet, protocol.MethodHarnessUpdate} {
		params := map[string]any{"max_retries": 9}
		if m == protocol.MethodHarnessUpdate {
			params = map[string]any{"set": params}
		}
		code, msg := rpcCode(t, agent.Call(ctxT(t), m, params, nil))
		if code != protocol.CodeApprovalDenied || !strings.Contains(msg, m) {
			t.Errorf("%s from an agent: %d %q, want -32003 naming the method", m, code, msg)
		}
	}
	var after protocol.HarnessConfig
	call(t, rs.hostClient(t), protocol.MethodHarnessSet, map[string]any{"max_retries": 9}, &after)
	if got.MaxRetries == 9 || after.MaxRetries != 9 {
		t.Fatalf("before %+v, after the host's set %+v", got, after)
	}
}

// TestHarnessDrivesRetriesAndReplans: max_retries applies to an action
// without its own and not to one with it; planning_max_replans is the
// replan budget of a connection that set none.
func TestHarnessDrivesRetriesAndReplans(t *testing.T) {
	ts := harnessServer(t, filepath.Join(t.TempDir(), "harness.json"))
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails, "steady": echo})
	count := func() int {
		n := 0
		for _, c := range tb.callLog() {
			if c.Tool == "flaky" {
				n++
			}
		}
		return n
	}
	mustCall(t, tb, protocol.MethodHarnessSet, map[string]any{"max_retries": 1, "retry_backoff_ms": 0}, nil)
	tb.submit(t, proposal(toolCall("own-default", "flaky", map[string]any{}, "failure_behavior", "retry")))
	if n := count(); n != 2 {
		t.Fatalf("an action without max_retries under harness max_retries 1: %d attempts, want 2", n)
	}
	tb.submit(t, proposal(toolCall("own-zero", "flaky", map[string]any{}, "failure_behavior", "retry", "max_retries", 0)))
	if n := count(); n != 3 {
		t.Fatalf("an action with its own max_retries 0: %d attempts in all, want 3 (one more)", n-2)
	}
	mustCall(t, tb, protocol.MethodHarnessSet, map[string]any{"max_retries": 4}, nil)
	tb.submit(t, proposal(toolCall("own-default-2", "flaky", map[string]any{}, "failure_behavior", "retry")))
	if n := count(); n != 8 {
		t.Fatalf("harness max_retries 4: %d attempts, want 5", n-3)
	}

	// No replan.set_config on this connection: the harness's budget applies.
	mustCall(t, tb, protocol.MethodHarnessSet, map[string]any{"planning_max_replans": 1}, nil)
	asked := replanner(t, tb, nil)
	res := tb.submit(t, proposal(toolCall("t", "flaky", map[string]any{})))
	if req := nextAsk(t, asked); req.Attempt != 1 {
		t.Fatalf("replan.propose %+v, want attempt 1", req)
	}
	if len(res.Replans) > 1 {
		t.Fatalf("replans %+v beyond the harness budget of 1", res.Replans)
	}
	// The connection's own config wins over the harness's.
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 0})
	res = tb.submit(t, proposal(toolCall("t2", "flaky", map[string]any{})))
	if len(res.Replans) != 0 {
		t.Fatalf("replans %+v with the connection's max_replans 0", res.Replans)
	}
}
