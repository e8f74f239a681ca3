package main

import (
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
)

// TestTheDaemonRequiresTheHandshake: the real daemon refuses a client that
// skips server.handshake with -32005, serves it after the handshake, and
// serves it without one when require_handshake is off.
func TestTheDaemonRequiresTheHandshake(t *testing.T) {
	exchange := func(t *testing.T, ws *websocket.Conn, frame string) (code int) {
		t.Helper()
		if err := ws.Write(ctxT(t), websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		_, data, err := ws.Read(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Error *struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("reply %s: %v", data, err)
		}
		if rep.Error == nil {
			return 0
		}
		return rep.Error.Code
	}
	open := func(t *testing.T, d *daemon) *websocket.Conn {
		ws, _, err := websocket.Dial(ctxT(t), "ws://"+d.addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		if code := exchange(t, ws, `{"jsonrpc":"2.0","id":1,"method":"session.auth","params":{"token":"`+d.token+`"}}`); code != 0 {
			t.Fatalf("session.auth: %d", code)
		}
		return ws
	}
	const get = `{"jsonrpc":"2.0","id":2,"method":"state.get","params":{"key":"k"}}`

	ws := open(t, startDaemon(t, t.TempDir()))
	if code := exchange(t, ws, get); code != -32005 {
		t.Fatalf("state.get before the handshake: %d, want -32005", code)
	}
	if code := exchange(t, ws, `{"jsonrpc":"2.0","id":3,"method":"server.handshake","params":{"protocol_version":2}}`); code != 0 {
		t.Fatalf("server.handshake: %d", code)
	}
	if code := exchange(t, ws, get); code != 0 {
		t.Fatalf("state.get after the handshake: %d", code)
	}

	old := open(t, startDaemon(t, t.TempDir(), "CAR_REQUIRE_HANDSHAKE=false"))
	if code := exchange(t, old, get); code != 0 {
		t.Fatalf("state.get without a handshake, require_handshake off: %d", code)
	}
}
