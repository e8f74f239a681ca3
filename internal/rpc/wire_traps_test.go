package rpc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// Tests of the wire details that trip clients written in other languages.

func TestTooDeeplyNestedJSONSaysHowDeep(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	deep := `{"jsonrpc":"2.0","id":1,"method":"state.set","params":{"key":"k","value":` +
		strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1) + `}}`
	wantErr(t, r.call(deep), protocol.CodeParseError, "nested deeper than 10000 levels")
	// Brackets inside strings do not count, and plain bad JSON keeps its message.
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":2,"method":"`+strings.Repeat("[", maxNesting+1)+`"`), protocol.CodeParseError, "not valid JSON")
	// The connection is still usable.
	if rep := r.call(`{"jsonrpc":"2.0","id":3,"method":"state.keys"}`); rep.Error != nil {
		t.Fatalf("after the deep frame: %+v", rep.Error)
	}
}

func TestInvalidUTF8TextFrameClosesWith1007(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	r.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"state.set\",\"params\":{\"key\":\"k\",\"value\":\"\xff\xfe\"}}")
	_, err := r.recv()
	if got := websocket.CloseStatus(err); got != websocket.StatusInvalidFramePayloadData {
		t.Fatalf("want close 1007 (invalid frame payload data), got %v (%v)", got, err)
	}
}

func TestEchoedMethodNameIsTruncated(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	long := strings.Repeat("m", 10000)
	rep := r.call(`{"jsonrpc":"2.0","id":1,"method":"` + long + `"}`)
	wantErr(t, rep, protocol.CodeMethodNotFound, "'"+strings.Repeat("m", maxEchoedName)+"…(10000 bytes)'")
	if n := len(rep.Error.Message); n > maxEchoedName+200 {
		t.Fatalf("the message is %d bytes: the method name was not cut", n)
	}
	// A short name is repeated whole.
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":2,"method":"no.such"}`), protocol.CodeMethodNotFound, "'no.such'")
}

func TestPolicyRegisterAnswersBothUpstreamShapes(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	var got map[string]any
	call(t, c, protocol.MethodPolicyRegister, map[string]any{"name": "no-rm", "rule": "deny_tool", "target": "rm"}, &got)
	if got["name"] != "no-rm" || got["registered"] != "no-rm" || got["scope"] != "global" || len(got) != 3 {
		t.Fatalf("want {name, registered, scope: global}, got %v", got)
	}
}

func TestPermissionMethodsRefuseASkill(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	prop := map[string]any{"actions": []any{map[string]any{"id": "a", "type": "state_write", "parameters": map[string]any{"key": "k", "value": 1}}}}
	for _, method := range []string{protocol.MethodPermissionEvaluate, protocol.MethodPermissionPending} {
		err := c.Call(ctxT(t), method, map[string]any{"proposal": prop, "skill": "deploy"}, nil)
		if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, "param 'skill' is not supported") {
			t.Fatalf("%s with a skill: %d %q", method, code, msg)
		}
		call(t, c, method, map[string]any{"proposal": prop}, nil)
	}
}

func TestToolsPerConnectionAreBounded(t *testing.T) {
	ts := startRuntime(t, engine.Options{MaxTools: 3}, nil)
	c := ts.dial(t, "")
	tools := func(names ...string) []any {
		out := make([]any, len(names))
		for i, n := range names {
			out[i] = map[string]any{"name": n}
		}
		return out
	}
	call(t, c, protocol.MethodToolsRegister, tools("a", "b"), nil)
	// Replacing a tool adds none: a, b, c is within the limit.
	call(t, c, protocol.MethodToolsRegister, tools("b", "c"), nil)
	err := c.Call(ctxT(t), protocol.MethodToolsRegister, tools("c", "d", "e"), nil)
	if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, "over the limit of 3 per connection (max_tools); nothing was registered") {
		t.Fatalf("past the limit: %d %q", code, msg)
	}
	var list protocol.ToolsListResult
	call(t, c, protocol.MethodToolsList, nil, &list)
	var names []string
	for _, s := range list.Tools {
		names = append(names, s.Name)
	}
	// The built-in is listed and not counted; nothing of the refused call is.
	if got := strings.Join(names, ","); got != "a,b,c,messaging.send" {
		t.Fatalf("tools after the refused call: %s", got)
	}
}

func TestUnknownToolMessageListsAtMostTwentyNames(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	var tools []any
	for i := range 30 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool%02d", i)})
	}
	call(t, c, protocol.MethodToolsRegister, tools, nil)
	var res protocol.ProposalResult
	call(t, c, protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(toolCall("x", "nope", map[string]any{}))}, &res)
	msg := resultOf(t, res, "x").ErrorText()
	if !strings.Contains(msg, "unknown tool 'nope'; 31 registered (tools.list has them all), the first 20: messaging.send, tool00,") ||
		!strings.Contains(msg, "tool18") || strings.Contains(msg, "tool19") {
		t.Fatalf("unknown tool message: %q", msg)
	}
}

func TestReplyToNoCallbackIsLoggedOncePerConnection(t *testing.T) {
	every := unmatchedLogEvery
	unmatchedLogEvery = time.Hour // no second warning within the test, however slow
	t.Cleanup(func() { unmatchedLogEvery = every })
	ts := startServer(t, Options{})
	const msg = "reply matches no pending tools.execute; dropped (answer with the id of the tools.execute request)"
	a := ts.raw(t)
	a.send(`{"jsonrpc":"2.0","id":"cb-999","result":{"content":"late"}}`)
	a.send(`{"jsonrpc":"2.0","id":"cb-1000","result":{"content":"late"}}`)
	// The read loop handles frames in order: once this reply is back, both
	// stray replies have been seen.
	if rep := a.call(`{"jsonrpc":"2.0","id":1,"method":"state.keys"}`); rep.Error != nil {
		t.Fatalf("state.keys: %+v", rep.Error)
	}
	e := ts.waitLog(t, msg, 1)
	if e.fields["id"] != `"cb-999"` || e.fields["conn"] == nil || e.fields["conn"] == "" {
		t.Fatalf("the warning names no connection or id: %v", e.fields)
	}
	if n := ts.logs.count(msg); n != 1 {
		t.Fatalf("two stray replies within the interval logged %d warnings, want 1", n)
	}
	// Another connection has its own allowance.
	b := ts.raw(t)
	b.send(`{"jsonrpc":"2.0","id":7,"result":null}`)
	if e2 := ts.waitLog(t, msg, 2); e2.fields["id"] != "7" || e2.fields["conn"] == e.fields["conn"] {
		t.Fatalf("second connection's warning: %v (first: %v)", e2.fields, e.fields)
	}
}
