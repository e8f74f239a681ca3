package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// runOne submits a proposal decoded from js on a session whose tools are
// schemas, answered by exec, and returns its result.
func runOne(t *testing.T, ctx context.Context, schemas []protocol.ToolSchema, exec ToolExecutor, js string) (*protocol.ProposalResult, *Runtime) {
	t.Helper()
	rt := newRuntime(t, Options{RetryBase: time.Millisecond})
	s := rt.OpenSession("s", exec)
	if _, err := s.Tools.Register(schemas); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Submit(ctx, &Submission{Proposal: decode(t, js), Session: s})
	if err != nil {
		t.Fatal(err)
	}
	return res, rt
}

// resultByID is the result of action id, failing the test when there is none.
func resultByID(t *testing.T, res *protocol.ProposalResult, id string) protocol.ActionResult {
	t.Helper()
	r, ok := res.Result(id)
	if !ok {
		t.Fatalf("no result for %s", id)
	}
	return r
}

func TestARateLimitWaitPastTheDeadlineSaysHowLong(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limited := []protocol.ToolSchema{{Name: "slow", RateLimit: &protocol.ToolRateLimit{MaxCalls: 1, IntervalSecs: 3600}}}
	res, _ := runOne(t, ctx, limited, &countingExecutor{}, `{"actions":[
		{"id":"a","type":"tool_call","tool":"slow"},
		{"id":"b","type":"tool_call","tool":"slow","dependencies":["a"]}]}`)
	b := resultByID(t, res, "b")
	msg := b.ErrorText()
	if b.Status != protocol.StatusFailed || !strings.Contains(msg, "would delay this call by 1h0m0s") || !strings.Contains(msg, "past the proposal's deadline in") || strings.Contains(msg, "<nil>") {
		t.Fatalf("b: %s %q", b.Status, msg)
	}
}

func TestARateLimitWaitEndsWithItsCause(t *testing.T) {
	rt := newRuntime(t, Options{})
	s := rt.OpenSession("s", &countingExecutor{})
	if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "slow", RateLimit: &protocol.ToolRateLimit{MaxCalls: 1, IntervalSecs: 3600}}}); err != nil {
		t.Fatal(err)
	}
	tool, _ := s.Tools.Lookup("slow")
	r := &run{rt: rt, sub: &Submission{Session: s, Proposal: &protocol.ActionProposal{}}}
	a := &protocol.Action{ID: "a", Tool: "slow"}
	if err := r.waitForToken(context.Background(), a, tool); err != nil {
		t.Fatalf("the first call has a token: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("the client went away")
	cancel(why)
	err := r.waitForToken(ctx, a, tool)
	if !errors.Is(err, why) || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("want the cancellation's cause wrapped, got %v", err)
	}
}

func TestAMissingStateDependencyIsRejectedBeforeDispatch(t *testing.T) {
	exec := &countingExecutor{}
	js := `{"actions":[
		{"id":"needs","type":"tool_call","tool":"t","state_dependencies":["config"],"failure_behavior":"skip"},
		{"id":"after","type":"tool_call","tool":"t","dependencies":["needs"]},
		{"id":"free","type":"tool_call","tool":"t"}]}`
	res, _ := runOne(t, context.Background(), []protocol.ToolSchema{{Name: "t"}}, exec, js)
	needs := resultByID(t, res, "needs")
	if needs.Status != protocol.StatusRejected || !strings.Contains(needs.ErrorText(), "state dependency 'config' is not available") {
		t.Fatalf("needs: %s %q", needs.Status, needs.ErrorText())
	}
	if st := resultByID(t, res, "after").Status; st != protocol.StatusSkipped {
		t.Fatalf("after (skip behaviour downstream): %s", st)
	}
	if exec.calls != 1 {
		t.Fatalf("%d calls, want only 'free'", exec.calls)
	}
	// simulate predicts the same, and optimize keeps what decides it.
	p := decode(t, js)
	sim := Simulate(p, nil, registry(t))
	if len(sim.Blocked) == 0 || sim.Blocked[0].ActionID != "needs" {
		t.Fatalf("simulate: %+v", sim.Blocked)
	}
	opt, _ := Optimize(p)
	if eq := Equivalent(p, opt, []map[string]any{{}, {"config": 1}}, nil); !eq.Equivalent {
		t.Fatalf("equivalent(p, optimize(p)): %+v", eq)
	}

	// A dependency that an earlier action provides is available.
	res, _ = runOne(t, context.Background(), []protocol.ToolSchema{{Name: "t"}}, &countingExecutor{}, `{"actions":[
		{"id":"w","type":"state_write","parameters":{"key":"config","value":1}},
		{"id":"needs","type":"tool_call","tool":"t","state_dependencies":["config"]}]}`)
	if st := resultByID(t, res, "needs").Status; st != protocol.StatusSucceeded {
		t.Fatalf("with the key written first: %s %q", st, resultByID(t, res, "needs").ErrorText())
	}
}

func TestSecondsSaturateInsteadOfOverflowing(t *testing.T) {
	huge := uint64(10_000_000_000)
	tools := NewToolRegistry(0, SchemaLimits{})
	if _, err := tools.Register([]protocol.ToolSchema{
		{Name: "cached", CacheTTLSecs: &huge},
		{Name: "limited", RateLimit: &protocol.ToolRateLimit{MaxCalls: 1, IntervalSecs: 1e10}},
	}); err != nil {
		t.Fatal(err)
	}
	cached, _ := tools.Lookup("cached")
	now := time.Now()
	cached.cache.put("k", "v", now)
	if _, ok := cached.cache.get("k", now.Add(time.Hour)); !ok {
		t.Fatal("a cache_ttl_secs of 1e10 expired its entry within an hour")
	}
	limited, _ := tools.Lookup("limited")
	if !limited.limiter.Allow() {
		t.Fatal("the first call must be allowed (burst max_calls)")
	}
	if limited.limiter.Allow() {
		t.Fatal("an interval_secs of 1e10 let a second call through: the limit became none")
	}
	if protocol.Seconds(1e300) != math.MaxInt64 || protocol.Seconds(-5) != 0 || protocol.Millis(math.MaxUint64) != math.MaxInt64 {
		t.Fatal("protocol.Seconds / Millis do not saturate")
	}
}

func TestReturnsSchemaIsCompiledAndChecked(t *testing.T) {
	_, err := NewToolRegistry(0, SchemaLimits{}).Register([]protocol.ToolSchema{{Name: "bad", Returns: json.RawMessage(`{"type":"no-such-type"}`)}})
	if err == nil || !strings.Contains(err.Error(), "tool 'bad': returns is not a valid JSON Schema") {
		t.Fatalf("an invalid returns schema: %v", err)
	}
	returns := json.RawMessage(`{"type":"object","required":["count"],"properties":{"count":{"type":"integer"}}}`)
	calls := 0
	exec := execFunc(func(_ context.Context, call ToolCall) (any, error) {
		calls++
		if call.Attempt == 1 {
			return map[string]any{"count": "three"}, nil
		}
		return map[string]any{"count": json.Number("3")}, nil
	})
	schemas := []protocol.ToolSchema{{Name: "count", Returns: returns}}
	res, rt := runOne(t, context.Background(), schemas, exec, `{"actions":[
		{"id":"c","type":"tool_call","tool":"count","failure_behavior":"retry","max_retries":1,"expected_effects":{"counted":true}}]}`)
	if c := resultByID(t, res, "c"); c.Status != protocol.StatusSucceeded || calls != 2 || res.Cost.Retries != 1 {
		t.Fatalf("a retry after a bad output: %s %q, %d calls", c.Status, c.ErrorText(), calls)
	}
	if !stateHas(t, rt, "", "counted") {
		t.Fatal("the good output's effects were not applied")
	}

	calls = 0
	res, rt = runOne(t, context.Background(), schemas, execFunc(func(context.Context, ToolCall) (any, error) {
		calls++
		return map[string]any{"count": "three"}, nil
	}), `{"actions":[
		{"id":"c","type":"tool_call","tool":"count","expected_effects":{"counted":true}},
		{"id":"uses","type":"state_write","parameters":{"key":"x","value":"$c.output"}}]}`)
	c := resultByID(t, res, "c")
	if c.Status != protocol.StatusFailed || !strings.Contains(c.ErrorText(), "does not match its returns schema") || !strings.Contains(c.ErrorText(), "/count") {
		t.Fatalf("a bad output: %s %q", c.Status, c.ErrorText())
	}
	if st := resultByID(t, res, "uses").Status; st != protocol.StatusSkipped {
		t.Fatalf("the dependent of a bad output: %s", st)
	}
	if stateHas(t, rt, "", "counted") {
		t.Fatal("a bad output's effects reached state")
	}
}

func TestBudgetSaturatesAndCountsEveryWait(t *testing.T) {
	rt := newRuntime(t, Options{RetryBase: time.Second, RetryCap: 4 * time.Second})
	s := rt.OpenSession("s", nil)
	if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "t"}, {Name: "limited", RateLimit: &protocol.ToolRateLimit{MaxCalls: 1, IntervalSecs: 60}}}); err != nil {
		t.Fatal(err)
	}
	budget := func(js string) time.Duration {
		return rt.Budget(&Submission{Proposal: decode(t, js), Session: s})
	}
	once := budget(`{"actions":[{"type":"tool_call","tool":"t","timeout_ms":10}]}`)
	retried := budget(`{"actions":[{"type":"tool_call","tool":"t","timeout_ms":10,"failure_behavior":"retry","max_retries":3}]}`)
	// Three retries add three attempts and the backoffs before them (1+2+4 s).
	if retried-once < 7*time.Second+30*time.Millisecond {
		t.Fatalf("retries add %s; the backoffs alone are 7s", retried-once)
	}
	// The default max_retries of the decoder counts, not a copy of it.
	if def := budget(`{"actions":[{"type":"tool_call","tool":"t","timeout_ms":10,"failure_behavior":"retry"}]}`); def != retried {
		t.Fatalf("default max_retries (3): %s, explicit 3: %s", def, retried)
	}
	if limited := budget(`{"actions":[{"type":"tool_call","tool":"limited","timeout_ms":10}]}`); limited-once < time.Minute {
		t.Fatalf("a rate-limited tool adds %s; a token takes a minute", limited-once)
	}
	var many strings.Builder
	many.WriteString(`{"actions":[`)
	for i := range 1100 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"type":"tool_call","tool":"t","timeout_ms":86400000,"failure_behavior":"retry","max_retries":100}`)
	}
	many.WriteString(`]}`)
	if got := budget(many.String()); got != math.MaxInt64 {
		t.Fatalf("a budget past a Duration's range: %s, want it saturated", got)
	}
}
