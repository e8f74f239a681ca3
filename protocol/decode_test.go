package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeProposalErrors(t *testing.T) {
	const shape = "an ActionProposal object {id?, source?, actions: Action[]}"
	const types = "one of tool_call, state_write, state_read, assertion"
	cases := []struct {
		name, in, want string
	}{
		{"empty", ``, "param 'proposal' is required: " + shape},
		{"blank", " \n", "param 'proposal' is required: " + shape},
		{"null", `null`, "param 'proposal' is required: " + shape},
		{"array", `[]`, "proposal: must be " + shape + ", got a JSON array"},
		{"string", `"x"`, "proposal: must be " + shape + ", got a JSON string"},
		{"truncated", `{"actions":[`, "proposal: not valid JSON: unexpected EOF"},
		{"two values", `{"actions":[]} {"actions":[]}`, "proposal: not valid JSON: unexpected data after the first JSON value"},
		{"trailing junk", `{"actions":[]} junk`, "proposal: not valid JSON: unexpected data after the first JSON value"},
		{"no actions", `{}`, "proposal: field 'actions' is required (an array of Action)"},
		{"null actions", `{"actions":null}`, "proposal: field 'actions' is required (an array of Action)"},
		{"actions object", `{"actions":{}}`, "proposal: field 'actions' must be an array, got a JSON object"},
		{"numeric id", `{"id":5,"actions":[]}`, "proposal: field 'id' must be a string, got a JSON number"},
		{"bool source", `{"source":true,"actions":[]}`, "proposal: field 'source' must be a string, got a JSON bool"},
		{"array context", `{"context":[],"actions":[]}`, "proposal: field 'context' must be an object, got a JSON array"},

		{"action not object", `{"actions":[1]}`, "proposal.actions[0]: must be an Action object, got a JSON number"},
		{"action too deep", `{"actions":[{"id":"deep","type":"state_read","parameters":{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}}]}`,
			"proposal.actions[0] (id 'deep'): nests 65 levels deep; at most 64 are accepted (the action object is level 1): flatten its parameters"},
		{"action null", `{"actions":[null]}`, "proposal.actions[0]: field 'type' is required: " + types},
		{"action numeric id", `{"actions":[{"id":7,"type":"state_read"}]}`, "proposal.actions[0]: field 'id' must be a string, got a JSON number"},
		{"no type", `{"actions":[{"id":"a"}]}`, "proposal.actions[0] (id 'a'): field 'type' is required: " + types},
		{"bad type", `{"actions":[{"id":"a","type":"shell"}]}`, "proposal.actions[0] (id 'a'): field 'type' must be " + types + "; got 'shell'"},
		{"no tool", `{"actions":[{"id":"a","type":"tool_call"}]}`, "proposal.actions[0] (id 'a'): field 'tool' is required when type is tool_call"},
		{"blank tool", `{"actions":[{"id":"a","type":"tool_call","tool":"  "}]}`, "proposal.actions[0] (id 'a'): field 'tool' is required when type is tool_call"},
		{"third action, negative retries", `{"actions":[{"id":"a","type":"state_read"},{"id":"b","type":"state_read"},{"id":"c","type":"tool_call","tool":"x","max_retries":-1}]}`,
			"proposal.actions[2] (id 'c'): field 'max_retries' must be a non-negative integer, got a JSON number -1"},
		{"fractional retries", `{"actions":[{"id":"a","type":"tool_call","tool":"x","max_retries":1.5}]}`,
			"proposal.actions[0] (id 'a'): field 'max_retries' must be a non-negative integer, got a JSON number 1.5"},
		{"retries past uint32", `{"actions":[{"id":"a","type":"tool_call","tool":"x","max_retries":5000000000}]}`,
			"proposal.actions[0] (id 'a'): field 'max_retries' must be a non-negative integer, got a JSON number 5000000000"},
		{"string retries", `{"actions":[{"id":"a","type":"tool_call","tool":"x","max_retries":"3"}]}`,
			"proposal.actions[0] (id 'a'): field 'max_retries' must be a non-negative integer, got a JSON string"},
		{"retries over limit", `{"actions":[{"id":"a","type":"tool_call","tool":"x","max_retries":101}]}`,
			"proposal.actions[0] (id 'a'): field 'max_retries' must be at most 100, got 101"},
		{"zero timeout", `{"actions":[{"id":"a","type":"tool_call","tool":"x","timeout_ms":0}]}`,
			"proposal.actions[0] (id 'a'): field 'timeout_ms' must be 1 to 86400000 (24 hours); omit it for the daemon's default budget"},
		{"timeout over a day", `{"actions":[{"id":"a","type":"tool_call","tool":"x","timeout_ms":86400001}]}`,
			"proposal.actions[0] (id 'a'): field 'timeout_ms' must be 1 to 86400000 (24 hours); omit it for the daemon's default budget"},
		{"negative timeout", `{"actions":[{"type":"tool_call","tool":"x","timeout_ms":-5}]}`,
			"proposal.actions[0]: field 'timeout_ms' must be a non-negative integer, got a JSON number -5"},
		{"precondition key type", `{"actions":[{"type":"tool_call","tool":"x","preconditions":[{"key":5}]}]}`,
			"proposal.actions[0]: field 'preconditions.key' must be a string, got a JSON number"},
		{"precondition without key", `{"actions":[{"id":"a","type":"assertion","preconditions":[{"key":"k"},{"value":1}]}]}`,
			"proposal.actions[0] (id 'a'): field 'preconditions[1].key' is required"},
		{"parameters array", `{"actions":[{"type":"tool_call","tool":"x","parameters":[]}]}`,
			"proposal.actions[0]: field 'parameters' must be an object, got a JSON array"},
		{"dependencies string", `{"actions":[{"type":"tool_call","tool":"x","dependencies":"a"}]}`,
			"proposal.actions[0]: field 'dependencies' must be an array, got a JSON string"},
		{"idempotent string", `{"actions":[{"type":"tool_call","tool":"x","idempotent":"yes"}]}`,
			"proposal.actions[0]: field 'idempotent' must be a boolean, got a JSON string"},
		{"invocation mode", `{"actions":[{"id":"a","type":"tool_call","tool":"x","invocation_mode":"forever"}]}`,
			"proposal.actions[0] (id 'a'): field 'invocation_mode' must be one_shot, streaming or long_running; got 'forever'"},
		{"reversibility", `{"actions":[{"id":"a","type":"tool_call","tool":"x","reversibility":"undoable"}]}`,
			"proposal.actions[0] (id 'a'): field 'reversibility' must be reversible, compensable or irreversible; got 'undoable'"},
		{"failure behavior", `{"actions":[{"id":"a","type":"tool_call","tool":"x","failure_behavior":"ignore"}]}`,
			"proposal.actions[0] (id 'a'): field 'failure_behavior' must be abort, retry or skip; got 'ignore'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodeProposal([]byte(tc.in))
			if err == nil {
				t.Fatalf("DecodeProposal(%s) = %+v, want error %q", tc.in, p, tc.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is %T, want *DecodeError", err, err)
			}
			if err.Error() != tc.want {
				t.Fatalf("error\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestDecodeProposalDefaults(t *testing.T) {
	p, err := DecodeProposal([]byte(`{"actions":[{"type":"tool_call","tool":"echo"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &ActionProposal{
		Source: "unknown",
		Actions: []Action{{
			Type:            ActionToolCall,
			Tool:            "echo",
			Parameters:      map[string]any{},
			InvocationMode:  "one_shot",
			Reversibility:   Irreversible,
			MaxRetries:      3,
			MaxRetriesUnset: true, // the IR default, which the harness config overrides
			FailureBehavior: FailAbort,
		}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("defaults\n got: %+v\nwant: %+v", p, want)
	}
}

func TestDecodeProposalExplicitValues(t *testing.T) {
	in := `{"id":"p1","source":"planner","timestamp":"2026-01-01T00:00:00Z","context":{"k":1},
		"actions":[{"id":"a","type":"tool_call","tool":"echo","parameters":{"n":12345678901234567890},
		"preconditions":[{"key":"ready","value":true}],"invocation_mode":"one_shot","reversibility":"compensable",
		"idempotent":true,"max_retries":0,"failure_behavior":"skip","timeout_ms":86400000}]}`
	p, err := DecodeProposal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "p1" || p.Source != "planner" || p.Timestamp != "2026-01-01T00:00:00Z" {
		t.Fatalf("header: %+v", p)
	}
	if got := p.Context["k"]; got != json.Number("1") {
		t.Fatalf("context k = %#v, want json.Number 1", got)
	}
	a := p.Actions[0]
	// A uint64 past float64's exact range survives as written.
	if got := a.Parameters["n"]; got != json.Number("12345678901234567890") {
		t.Fatalf("parameter n = %#v, want the exact json.Number", got)
	}
	if a.Preconditions[0].Operator != "eq" {
		t.Fatalf("precondition operator = %q, want the default eq", a.Preconditions[0].Operator)
	}
	if a.Reversibility != Compensable || !a.Idempotent || a.MaxRetries != 0 || a.FailureBehavior != FailSkip {
		t.Fatalf("explicit values not kept: %+v", a)
	}
	if a.TimeoutMs == nil || *a.TimeoutMs != TimeoutMsLimit {
		t.Fatalf("timeout_ms = %v, want %d", a.TimeoutMs, TimeoutMsLimit)
	}
}

func TestDecodeProposalIgnoresUnknownFields(t *testing.T) {
	in := `{"actions":[{"type":"state_read","surprise":{"deep":[1,2]},"x-vendor":"v"}],"extension":42}`
	p, err := DecodeProposal([]byte(in))
	if err != nil {
		t.Fatalf("unknown fields rejected: %v", err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Type != ActionStateRead {
		t.Fatalf("decoded %+v", p)
	}
}

func TestDecodeValue(t *testing.T) {
	cases := []struct {
		in      string
		want    any
		wantErr string
	}{
		{``, nil, ""},
		{`null`, nil, ""},
		{`9007199254740993`, json.Number("9007199254740993"), ""},
		{`{"a":[true]}`, map[string]any{"a": []any{true}}, ""},
		{`{"a":`, nil, "unexpected EOF"},
		{`1 2`, nil, "unexpected data after the first JSON value"},
		{`00`, nil, "unexpected data after the first JSON value"},
		{`"a""b"`, nil, "unexpected data after the first JSON value"},
		{`{} x`, nil, "unexpected data after the first JSON value"},
	}
	for _, tc := range cases {
		got, err := DecodeValue([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("DecodeValue(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DecodeValue(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

func TestReversibilityRank(t *testing.T) {
	cases := []struct {
		r    Reversibility
		want int
	}{
		{Reversible, 0},
		{Compensable, 1},
		{Irreversible, 2},
		{"", 3},
		{"undoable", 3},
	}
	for _, tc := range cases {
		if got := tc.r.Rank(); got != tc.want {
			t.Errorf("Reversibility(%q).Rank() = %d, want %d", tc.r, got, tc.want)
		}
	}
}

func TestKindName(t *testing.T) {
	cases := map[string]string{
		"string": "a string", "bool": "a boolean", "slice": "an array", "array": "an array",
		"map": "an object", "struct": "an object", "interface": "an object",
		"uint32": "a non-negative integer", "uint64": "a non-negative integer",
		"int": "a number", "float64": "a number", "complex128": "a complex128",
	}
	for kind, want := range cases {
		if got := KindName(kind); got != want {
			t.Errorf("KindName(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestDecodeProposalRefusesLongIDs(t *testing.T) {
	long := strings.Repeat("x", 300)
	for name, tc := range map[string]struct {
		raw   string
		limit int
		want  string
	}{
		"action id past the default":   {`{"actions":[{"id":"a","type":"state_read","parameters":{"key":"k"}},{"id":"` + long + `","type":"state_read","parameters":{"key":"k"}}]}`, 0, "proposal.actions[1]: field 'id' is 300 bytes; at most 256 are accepted (max_action_id_bytes)"},
		"proposal id past the default": {`{"id":"` + long + `","actions":[]}`, 0, "proposal: field 'id' is 300 bytes; at most 256 are accepted (max_action_id_bytes)"},
		"action id past a set limit":   {`{"actions":[{"id":"abcdef","type":"state_read","parameters":{"key":"k"}}]}`, 5, "proposal.actions[0]: field 'id' is 6 bytes; at most 5 are accepted"},
		"a bad field beside a long id": {`{"actions":[{"id":"` + long + `","type":"nope"}]}`, 0, "proposal.actions[0]: field 'type' must be"},
	} {
		_, err := DecodeProposalLimited([]byte(tc.raw), tc.limit)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: want an error starting %q, got %v", name, tc.want, err)
		}
	}
	if p, err := DecodeProposalLimited([]byte(`{"id":"`+long+`","actions":[{"id":"`+long+`","type":"state_read","parameters":{"key":"k"}}]}`), 300); err != nil || p.Actions[0].ID != long {
		t.Fatalf("ids at the limit are accepted: %v", err)
	}
}
