package protocol

import (
	"reflect"
	"strings"
	"testing"
)

// sameAsReflect fails when the one-walk decoder takes a proposal and decodes
// it differently from the reflecting decoder.
func sameAsReflect(t *testing.T, raw []byte) (fast bool) {
	t.Helper()
	got, ok := decodeProposalFast(raw)
	if !ok {
		return false
	}
	want, err := decodeProposalReflect(raw)
	if err != nil {
		t.Fatalf("%s: the fast decoder took a proposal the decoder refuses: %v", raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n fast    %#v\n decoder %#v", raw, got, want)
	}
	return true
}

var proposalSeeds = []string{
	`{"actions":[]}`,
	`{"id":"p","source":"s","timestamp":"t","context":{"k":[1,"x"]},"actions":[{"id":"a","type":"tool_call","tool":"t","parameters":{"x":1,"y":{"z":[true,null,2.50]}}}]}`,
	` { "actions" : [ { "id" : "a0" , "type" : "tool_call" , "tool" : "noop" , "parameters" : { "i" : 0 } } , {"id":"a1","type":"tool_call","tool":"noop","parameters":{"i":1},"dependencies":["a0"]} ] } `,
	`{"actions":[{"type":"state_write","parameters":{"key":"k","value":[1,2]},"timeout_ms":5,"max_retries":0,"idempotent":true,"failure_behavior":"retry","reversibility":"reversible","invocation_mode":"streaming","await":[],"read_set":["a",null],"write_set":null,"expected_effects":{"k":1},"metadata":{"m":"\u00e9\n"},"state_dependencies":["s"]}]}`,
	`{"actions":[{"type":"state_read","surprise":{"deep":[1,2]},"x-vendor":"v"}],"extension":42}`,
	`{"id":null,"source":null,"actions":[{"id":null,"type":"assertion","tool":null,"parameters":null,"idempotent":null,"max_retries":null,"timeout_ms":null}]}`,
	`{"actions":[{"id":"a\\u0062","type":"tool_call","tool":"t","parameters":{"a\\u0062":1,"a\u0062":2,"x":{"ab":3}},"dependencies":["a\u0062","a\\u0062"]}]}`,
	// Declined: the reflecting decoder decides these.
	`{"actions":[{"type":"assertion","max_retries":101}]}`,
	`{"actions":[{"type":"tool_call","tool":"t","reversibility":"compensable","compensation":{"tool":"u"}}]}`,
	`{"actions":[{"type":"tool_call","tool":"t","preconditions":[{"key":"k"}]}]}`,
	`{"actions":[{"type":"tool_call","tool":"t","parameters":{"a":1},"parameters":{"b":2}}]}`,
	`{"actions":[{"Type":"tool_call","tool":"t"}]}`,
	`{"actions":[{"\u0074ype":"tool_call","tool":"t"}]}`,
	`{"actions":[{"type":"tool_call","tool":"t","max_retries":1.0}]}`,
	`{"actions":[{"type":"tool_call","tool":"t","timeout_ms":-1}]}`,
	`{"actions":[{"id":5,"type":"tool_call","tool":"t"}]}`,
	`{"actions":[{"type":"tool_call"}]}`,
	`{"actions":[1]}`,
	`{"actions":null}`,
	`{"actions":[]} junk`,
	`[]`,
}

func TestFastProposalDecodeMatchesDecoder(t *testing.T) {
	for i, s := range proposalSeeds {
		if got, want := sameAsReflect(t, []byte(s)), i < 7; got != want {
			t.Errorf("%s: decoded in one walk %v, want %v", s, got, want)
		}
	}
	// Deep context, shallow actions: each action is measured, and passes.
	deepContext := `{"context":{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `},"actions":[{"type":"state_read","parameters":{"key":"k"}}]}`
	if !sameAsReflect(t, []byte(deepContext)) {
		t.Error("a proposal whose context nests deep, not its actions, was not decoded in one walk")
	}
	// An action nested past the bound is the reflecting decoder's to refuse.
	deepAction := `{"actions":[{"type":"tool_call","tool":"t","parameters":{"p":` + strings.Repeat("[", MaxActionDepth) + strings.Repeat("]", MaxActionDepth) + `}}]}`
	if sameAsReflect(t, []byte(deepAction)) {
		t.Error("an action nested too deep was decoded in one walk")
	}
	if _, err := DecodeProposal([]byte(deepAction)); err == nil || !strings.Contains(err.Error(), "levels deep") {
		t.Errorf("deep action: %v", err)
	}
}

func FuzzFastProposalDecode(f *testing.F) {
	for _, s := range proposalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameAsReflect(t, raw)
	})
}
