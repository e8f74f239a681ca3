package rpc

import (
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

const testToken = "test-token-0123456789abcdefghijklmnopqrstuv"

func TestNewTokenShape(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 43 || strings.ContainsAny(a, "+/=") || a == b {
		t.Fatalf("want two distinct 43-char base64url tokens, got %q and %q", a, b)
	}
}

func TestAuthRequiredFirstClosesConnection(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	r := ts.raw(t)
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":1,"method":"tools.list"}`), protocol.CodeAuthRequired, "session.auth")
	_, err := r.recv()
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("want the connection closed with 1008 after -32001, got %v", err)
	}
}

func TestWrongTokenLeavesConnectionUnauthenticated(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	r := ts.raw(t)
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":1,"method":"session.auth","params":{"token":"nope"}}`), protocol.CodeInternal, "token mismatch")
	// Still open and still unauthenticated: a retry with the right token works.
	rep := r.call(`{"jsonrpc":"2.0","id":2,"method":"session.auth","params":{"token":"` + testToken + `"}}`)
	if rep.Error != nil || string(rep.Result) != `{"ok":true,"auth_enabled":true}` {
		t.Fatalf("auth with the right token: %+v %s", rep.Error, rep.Result)
	}
	r.handshake()
	rep = r.call(`{"jsonrpc":"2.0","id":3,"method":"state.keys"}`)
	if rep.Error != nil || string(rep.Result) != `[]` {
		t.Fatalf("after auth: %+v %s", rep.Error, rep.Result)
	}
}

func TestWrongTokenThenOtherMethodCloses(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	r := ts.raw(t)
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":1,"method":"session.auth","params":{"token":"`+testToken+`x"}}`), protocol.CodeInternal, "token mismatch")
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":2,"method":"state.keys"}`), protocol.CodeAuthRequired, "auth required")
	if _, err := r.recv(); err == nil {
		t.Fatal("connection stayed open after -32001")
	}
}

func TestNoAuthMode(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	if rep := r.call(`{"jsonrpc":"2.0","id":1,"method":"state.keys"}`); rep.Error != nil {
		t.Fatalf("no-auth daemon refused a call: %+v", rep.Error)
	}
	rep := r.call(`{"jsonrpc":"2.0","id":2,"method":"session.auth","params":{"token":"anything"}}`)
	if string(rep.Result) != `{"ok":true,"auth_enabled":false}` {
		t.Fatalf("session.auth without auth: %s", rep.Result)
	}
}

func TestHandshake(t *testing.T) {
	ts := startServer(t, Options{Token: testToken, Version: "9.9.9"})
	c := ts.dial(t, testToken) // Dial negotiates version 2
	cases := []struct {
		name   string
		params any
		want   string
	}{
		{"missing", map[string]any{}, "missing"},
		{"no params", nil, "missing"},
		{"string", map[string]any{"protocol_version": "2"}, "must be a number"},
		{"older", map[string]any{"protocol_version": 1}, "client speaks 1"},
		{"newer", map[string]any{"protocol_version": 3}, "client speaks 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Call(ctxT(t), protocol.MethodServerHandshake, tc.params, nil)
			code, msg := rpcCode(t, err)
			if code != protocol.CodeVersionMismatch || !strings.Contains(msg, tc.want) {
				t.Fatalf("got %d %q, want -32006 containing %q", code, msg, tc.want)
			}
		})
	}
	var res protocol.HandshakeResult
	if err := c.Call(ctxT(t), protocol.MethodServerHandshake, map[string]any{"protocol_version": 2}, &res); err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != 2 || res.ClientProtocolVersion != 2 || res.ServerVersion != "9.9.9" {
		t.Fatalf("handshake result %+v", res)
	}
}

func TestClientDialWithWrongTokenFails(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	_, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "token mismatch") {
		t.Fatalf("want token mismatch, got %v", err)
	}
}
