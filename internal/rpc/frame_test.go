package rpc

import (
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/protocol"
)

func TestMalformedFramesGetErrorsAndKeepTheConnection(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	cases := []struct {
		name, frame string
		code        int
		contains    string
		id          string
	}{
		{"not json", `{"jsonrpc":"2.0",`, protocol.CodeParseError, "not valid JSON", "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"state.keys"}]`, protocol.CodeInvalidRequest, "batch", "null"},
		{"scalar", `42`, protocol.CodeInvalidRequest, "JSON-RPC 2.0 object", "null"},
		{"no jsonrpc member", `{"id":7,"method":"state.keys"}`, protocol.CodeInvalidRequest, `"jsonrpc"`, "7"},
		{"wrong version", `{"jsonrpc":"1.0","id":8,"method":"state.keys"}`, protocol.CodeInvalidRequest, `"2.0"`, "8"},
		{"no method", `{"jsonrpc":"2.0","id":9}`, protocol.CodeInvalidRequest, `"method"`, "9"},
		{"method not string", `{"jsonrpc":"2.0","id":10,"method":5}`, protocol.CodeInvalidRequest, "non-empty string", "10"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"state.keys"}`, protocol.CodeInvalidRequest, "id must be", "null"},
		{"negative id past int64", `{"jsonrpc":"2.0","id":-9223372036854775809,"method":"state.keys"}`, protocol.CodeInvalidRequest, "id must be", "null"},
		{"negative id, error echoes it", `{"jsonrpc":"2.0","id":-21,"method":"state.nope"}`, protocol.CodeMethodNotFound, "'state.nope'", "-21"},
		{"negative id, frame check echoes it", `{"jsonrpc":"1.0","id":-22,"method":"state.keys"}`, protocol.CodeInvalidRequest, `"2.0"`, "-22"},
		{"method and result", `{"jsonrpc":"2.0","id":11,"method":"state.keys","result":1}`, protocol.CodeInvalidRequest, "both", "11"},
		{"unknown method", `{"jsonrpc":"2.0","id":12,"method":"state.nope"}`, protocol.CodeMethodNotFound, "'state.nope'", "12"},
		{"params missing", `{"jsonrpc":"2.0","id":13,"method":"state.get"}`, protocol.CodeInvalidParams, "{key: string", "13"},
		{"param wrong type", `{"jsonrpc":"2.0","id":14,"method":"state.get","params":{"key":5}}`, protocol.CodeInvalidParams, "param 'key' must be a string", "14"},
		{"param empty", `{"jsonrpc":"2.0","id":15,"method":"state.get","params":{"key":""}}`, protocol.CodeInvalidParams, "param 'key' is required", "15"},
		{"params not object", `{"jsonrpc":"2.0","id":16,"method":"state.set","params":[1]}`, protocol.CodeInvalidParams, "params must be", "16"},
		{"member in another case", `{"jsonrpC":"2.0","Method":"0"}`, protocol.CodeInvalidRequest, "case-sensitive", "null"},
		{"id in another case", `{"jsonrpc":"2.0","ID":17,"method":"state.keys"}`, protocol.CodeInvalidRequest, `write "id"`, "null"},
		{"null error, no result", `{"jsonrpc":"2.0","id":18,"error":null}`, protocol.CodeInvalidRequest, `"result" or a non-null "error"`, "18"},
		{"error a number", `{"jsonrpc":"2.0","id":19,"error":5}`, protocol.CodeInvalidRequest, "{code: integer", "19"},
		{"error a string", `{"jsonrpc":"2.0","id":20,"error":"x"}`, protocol.CodeInvalidRequest, "{code: integer", "20"},
		{"error code a string", `{"jsonrpc":"2.0","id":21,"error":{"code":"x"}}`, protocol.CodeInvalidRequest, "{code: integer", "21"},
		{"result out of float range", `{"jsonrpc":"2.0","id":22,"result":1e700}`, protocol.CodeInvalidRequest, "float64 range", "22"},
		{"id past int64", `{"jsonrpc":"2.0","id":9223372036854775808,"method":"state.keys"}`, protocol.CodeInvalidRequest, "9223372036854775807", "null"},
		{"id at uint64 max", `{"jsonrpc":"2.0","id":18446744073709551615,"method":"state.keys"}`, protocol.CodeInvalidRequest, "id must be", "null"},
		{"string id", `{"jsonrpc":"2.0","id":"abc","method":"tools.unregister","params":{}}`, protocol.CodeInvalidParams, "'name'", `"abc"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := r.call(tc.frame)
			wantErr(t, rep, tc.code, tc.contains)
			if string(rep.ID) != tc.id {
				t.Fatalf("reply id %s, want %s", rep.ID, tc.id)
			}
		})
	}
	// The connection survived every one of them.
	if rep := r.call(`{"jsonrpc":"2.0","id":99,"method":"state.keys"}`); rep.Error != nil {
		t.Fatalf("connection unusable after bad frames: %+v", rep.Error)
	}
}

func TestNotificationGetsNoReply(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	r.send(`{"jsonrpc":"2.0","method":"state.keys"}`)
	rep := r.call(`{"jsonrpc":"2.0","id":1,"method":"state.exists","params":{"key":"k"}}`)
	if string(rep.ID) != "1" || string(rep.Result) != "false" {
		t.Fatalf("the first reply must answer id 1 (nothing answers a notification), got id %s result %s", rep.ID, rep.Result)
	}
}

func TestOversizedFrameClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, Options{MaxFrameBytes: 1024})
	big := ts.raw(t)
	other := ts.raw(t)
	big.send(`{"jsonrpc":"2.0","id":1,"method":"state.set","params":{"key":"k","value":"` + strings.Repeat("x", 2048) + `"}}`)
	_, err := big.recv()
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("want close 1009, got %v (%v)", got, err)
	}
	if rep := other.call(`{"jsonrpc":"2.0","id":1,"method":"state.keys"}`); rep.Error != nil {
		t.Fatalf("the other connection was affected: %+v", rep.Error)
	}
}

// Negative integer ids are valid JSON-RPC: the reply carries the same id,
// as a number, whatever the JSON-RPC library can hold.
func TestNegativeIDsAreEchoedExactly(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	r.call(`{"jsonrpc":"2.0","id":-1,"method":"session.auth","params":{"token":""}}`)
	for _, id := range []string{"-1", "-42", "-9223372036854775808"} {
		rep := r.call(`{"jsonrpc":"2.0","id":` + id + `,"method":"state.keys"}`)
		if rep.Error != nil || string(rep.ID) != id {
			t.Fatalf("id %s: reply id %s, error %+v", id, rep.ID, rep.Error)
		}
	}
}
