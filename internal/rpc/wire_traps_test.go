package rpc

import (
	"strings"
	"testing"

	"github.com/coder/websocket"

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
