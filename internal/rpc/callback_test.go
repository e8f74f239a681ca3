package rpc

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// tools.execute params are encoded by hand: byte for byte what json.Marshal
// writes for the struct.
func TestToolExecuteParamsEncodeAsMarshal(t *testing.T) {
	for _, p := range []protocol.ToolExecuteParams{
		{},
		{ActionID: "a1", Tool: "noop", Parameters: map[string]any{"i": json.Number("3"), "s": "<x>", "n": nil, "l": []any{true}}, TimeoutMs: 30000, Attempt: 1, RequestID: "cb-1", SessionID: "conn-1"},
		{ActionID: "é\"", Tool: "t\n", Parameters: map[string]any{}, TimeoutMs: 1<<64 - 1, Attempt: -2, RequestID: "cb-h9", AgentID: "agent", InvocationMode: "streaming", Handle: "h9"},
		{Parameters: map[string]any{"f": 1.5e-9, "nested": map[string]any{"b": 1, "a": 2.0}}},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendToolExecute(nil, &p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("\n got  %s (%v)\n want %s", got, err, want)
		}
	}
}
