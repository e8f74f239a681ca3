package multi

import (
	"strings"
	"testing"
)

func TestDecodeOutputIsStrict(t *testing.T) {
	ok := `{"name":"a","answer":"x","turns":2,"tool_calls":3,"duration_ms":1.5,"error":null,"tokens":{"input_tokens":10,"output_tokens":5,"cost_usd":0.01},"extra":true}`
	out, err := DecodeOutput([]byte(ok))
	if err != nil || out.Turns != 2 || out.ToolCalls != 3 || out.Tokens.InputTokens != 10 || out.Error != nil {
		t.Fatalf("%+v %v", out, err)
	}
	failed, err := DecodeOutput([]byte(`{"name":"a","answer":"","turns":0,"tool_calls":0,"duration_ms":0,"error":"rate limited"}`))
	if err != nil || !failed.Failed() || *failed.Error != "rate limited" {
		t.Fatalf("%+v %v", failed, err)
	}
	// As upstream: a missing error is none, unknown token keys are ignored.
	lenient, err := DecodeOutput([]byte(`{"name":"a","answer":"x","turns":1,"tool_calls":0,"duration_ms":1,"tokens":{"input_tokens":4,"output_tokens":2,"cache_read_input_tokens":100}}`))
	if err != nil || lenient.Failed() || lenient.Tokens.InputTokens != 4 || lenient.Tokens.OutputTokens != 2 {
		t.Fatalf("upstream's shape: %+v %v", lenient, err)
	}
	cases := []struct{ body, want string }{
		{`[]`, "must be an AgentOutput object"},
		{`{"answer":"x","turns":1,"tool_calls":0,"duration_ms":1,"error":null}`, "'name' is missing"},
		{`{"name":1,"answer":"x","turns":1,"tool_calls":0,"duration_ms":1,"error":null}`, "'name' must be a string"},
		{`{"name":"a","answer":"x","turns":1.5,"tool_calls":0,"duration_ms":1,"error":null}`, "'turns' must be a non-negative integer"},
		{`{"name":"a","answer":"x","turns":1,"tool_calls":["grep"],"duration_ms":1,"error":null}`, "'tool_calls' must be an integer count, not an array"},
		{`{"name":"a","answer":"x","turns":1,"tool_calls":0,"duration_ms":"fast","error":null}`, "'duration_ms' must be a non-negative number"},
		{`{"name":"a","answer":"x","turns":1,"tool_calls":0,"duration_ms":1,"error":5}`, "'error' must be null or a string"},
		{`{"name":"a","answer":"x","turns":1,"tool_calls":0,"duration_ms":1,"error":null,"tokens":{"input_tokens":"3"}}`, "'tokens' must be"},
	}
	for _, tc := range cases {
		if _, err := DecodeOutput([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.body, tc.want, err)
		}
	}
}

func TestBudgetRefusesOnceALimitIsReached(t *testing.T) {
	two, cost := 2, 0.05
	b := &budget{limits: BudgetLimits{MaxAgents: &two, MaxCostUSD: &cost}}
	if b.admit() != nil {
		t.Fatal("first agent refused")
	}
	b.record(AgentOutput{Tokens: &TokenUsage{CostUSD: 0.06}})
	if err := b.admit(); err == nil || !strings.Contains(err.Error(), "max_cost_usd") {
		t.Fatalf("cost limit: %v", err)
	}
	b = &budget{limits: BudgetLimits{MaxAgents: &two}}
	for i := 0; i < 2; i++ {
		if err := b.admit(); err != nil {
			t.Fatalf("agent %d of 2 refused: %v", i+1, err)
		}
	}
	if err := b.admit(); err == nil || !strings.Contains(err.Error(), "max_agents (2)") {
		t.Fatalf("agent cap: %v", err)
	}
	if s := b.snapshot(); s.Agents != 2 || s.Refused != 1 {
		t.Fatalf("%+v", s)
	}
}
