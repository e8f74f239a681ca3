package rpc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// The methods that analyse a proposal without executing it refuse one over
// max_actions, as proposal.submit does, and equivalent bounds test_states.
func TestAnalysisMethodsCheckMaxActions(t *testing.T) {
	ts := startRuntime(t, engine.Options{MaxActions: 2}, nil)
	r := ts.raw(t)
	three := `{"actions":[{"type":"state_read"},{"type":"state_read"},{"type":"state_read"}]}`
	two := `{"actions":[{"type":"state_read"},{"type":"state_read"}]}`
	cases := []struct{ method, params, contains string }{
		{"verify", `{"proposal":` + three + `}`, "proposal has 3 actions; this daemon accepts at most 2 per proposal (max_actions)"},
		{"simulate", `{"proposal":` + three + `}`, "(max_actions)"},
		{"optimize", `{"proposal":` + three + `}`, "(max_actions)"},
		{"equivalent", `{"a":` + two + `,"b":` + three + `}`, "b: proposal has 3 actions"},
		{"verify.monte_carlo", `{"proposal":` + three + `}`, "(max_actions)"},
		{"permission.classify", `{"proposal":` + three + `}`, "(max_actions)"},
		{"permission.evaluate", `{"proposal":` + three + `}`, "(max_actions)"},
		{"equivalent", `{"a":` + two + `,"b":` + two + `,"test_states":[` + strings.Repeat(`{},`, engine.MaxTestStates) + `{}]}`,
			fmt.Sprintf("param 'test_states' has %d states; at most %d are compared", engine.MaxTestStates+1, engine.MaxTestStates)},
	}
	for i, tc := range cases {
		rep := r.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i+1, tc.method, tc.params))
		wantErr(t, rep, protocol.CodeInvalidParams, tc.contains)
	}
	if rep := r.call(`{"jsonrpc":"2.0","id":99,"method":"verify","params":{"proposal":` + two + `}}`); rep.Error != nil {
		t.Fatalf("a proposal within max_actions: %+v", rep.Error)
	}
}
