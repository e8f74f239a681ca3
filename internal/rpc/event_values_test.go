package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestEventLogHoldsNoValues: connection A's parameter values, outputs and
// state values that fail a check reach A's own reply, but connection B,
// reading the shared log with events.query, sees only where and why: the
// path and keyword of a schema violation, the key of a precondition.
func TestEventLogHoldsNoValues(t *testing.T) {
	ts := startMessagingServer(t, t.TempDir())
	a := newToolbox(t, ts, map[string]toolFunc{})
	b := newToolbox(t, ts, map[string]toolFunc{})
	ssn := map[string]any{"type": "object", "properties": map[string]any{"ssn": map[string]any{"type": "string", "pattern": `^\d{3}-\d{2}-\d{4}$`}}}
	a.register(t, echo, map[string]any{"name": "lookup", "parameters": ssn})
	a.register(t, func(context.Context, protocol.ToolExecuteParams) (any, error) {
		return map[string]any{"ssn": "555-12-99999"}, nil
	}, map[string]any{"name": "leaky", "returns": ssn})
	a.register(t, func(context.Context, protocol.ToolExecuteParams) (any, error) {
		return map[string]any{"ssn": "777-88-11111"}, nil
	}, map[string]any{"name": "source"})

	send := sendAction("a1", map[string]any{"channel": "teams", "to": "ops", "body": "hi", "kind": "secret-kind-9191"})
	approve(t, a, send) // messaging.send reaches a person: full_access

	cases := []struct {
		name, secret string
		proposal     map[string]any
		want         string // what the event's error says instead
	}{
		{"a parameter against its schema", "123-45-67890",
			proposal(toolCall("a1", "lookup", map[string]any{"ssn": "123-45-67890"})), "/ssn: pattern"},
		{"an output against its returns schema", "555-12-99999",
			proposal(toolCall("a1", "leaky", nil, "max_retries", 1, "failure_behavior", "retry")), "/ssn: pattern"},
		{"a referenced output against the schema", "777-88-11111",
			proposal(toolCall("s", "source", nil), toolCall("a1", "lookup", map[string]any{"ssn": "$s.output.ssn"}, "dependencies", []string{"s"})), "/ssn: pattern"},
		{"a referenced output that is not an object", "777-88-11111",
			proposal(toolCall("s", "source", nil), toolCall("a1", "lookup", map[string]any{"ssn": "$s.output.ssn.x"}, "dependencies", []string{"s"})), "is not an object or array"},
		{"a messaging.send parameter of the wrong shape", "secret-kind-9191",
			proposal(send), "values are withheld"},
		{"a state value against a precondition", "state-value-4242",
			proposal(
				map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "acct", "value": "state-value-4242"}},
				toolCall("a1", "lookup", map[string]any{"ssn": "123-45-6789"}, "dependencies", []string{"w"},
					"preconditions", []map[string]any{{"key": "acct", "operator": "eq", "value": "wanted-value-1313"}})),
			"values withheld"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.proposal["id"] = fmt.Sprintf("p-values-%d", i) // each case queries its own events
			res := a.submit(t, tc.proposal)
			var got *protocol.ActionResult
			for i := range res.Results {
				if res.Results[i].ActionID == "a1" {
					got = &res.Results[i]
				}
			}
			if got == nil || got.Error == nil || !strings.Contains(*got.Error, tc.secret) {
				t.Fatalf("A's own reply should carry the whole message with its value %q: %+v", tc.secret, res.Results)
			}
			events := query(t, b, map[string]any{"proposal_id": res.ProposalID})
			raw, err := json.Marshal(events)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) == 0 {
				t.Fatal("B sees no events of A's proposal")
			}
			if strings.Contains(string(raw), tc.secret) || strings.Contains(string(raw), "wanted-value-1313") {
				t.Errorf("B's events.query shows A's value: %s", raw)
			}
			if !strings.Contains(string(raw), tc.want) {
				t.Errorf("B's events.query does not say %q: %s", tc.want, raw)
			}
		})
	}
}
