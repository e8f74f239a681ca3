package rpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestAHostileSchemaCostsNoMoreThanItsSize drives the two schema attacks
// over a real WebSocket: a 1.5 KB schema that doubles per $def is refused
// at tools.register, and one that doubles per level of the value is
// refused per action before it is validated; the tools are never called.
func TestAHostileSchemaCostsNoMoreThanItsSize(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{})

	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := 0; i < 21; i++ {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	b.WriteString(`"d21":{"type":"object"}}}`)
	hostile := []map[string]any{{"name": "doubling", "parameters": json.RawMessage(b.String())}}
	code, msg := rpcCode(t, tb.Call(ctxT(t), protocol.MethodToolsRegister, hostile, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "doubling") || !strings.Contains(msg, "max_schema_expansion") {
		t.Fatalf("the doubling schema: %d %q", code, msg)
	}
	var list struct{ Count int }
	call(t, tb.Client, protocol.MethodToolsList, nil, &list)
	if list.Count != 1 { // messaging.send only
		t.Fatalf("a refused schema was registered: %d tools", list.Count)
	}

	tb.register(t, echo, map[string]any{"name": "twice", "parameters": json.RawMessage(
		`{"$ref":"#/$defs/r","$defs":{"r":{"anyOf":[{"properties":{"a":{"$ref":"#/$defs/r"}}},{"properties":{"a":{"$ref":"#/$defs/r"}}}]}}}`)})
	var deep any = 1
	for i := 0; i < 40; i++ {
		deep = map[string]any{"a": deep}
	}
	res := tb.submit(t, proposal(toolCall("deep", "twice", deep.(map[string]any)), toolCall("shallow", "twice", map[string]any{"a": map[string]any{"a": 1}})))
	if r := resultOf(t, res, "deep"); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "max_schema_evaluations") {
		t.Fatalf("2^40 checks: %s %q", r.Status, r.ErrorText())
	}
	if r := resultOf(t, res, "shallow"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("the shallow call beside it: %s %q", r.Status, r.ErrorText())
	}
	if n := len(tb.callLog()); n != 1 {
		t.Fatalf("the tool ran %d times; only the shallow call should have reached it", n)
	}
}
