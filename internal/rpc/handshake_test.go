package rpc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// TestHandshakeRequiredBeforeTheRequestLoop: after session.auth, every
// method but server.handshake and rpc.discover answers -32005 until the
// handshake, and is served after it.
func TestHandshakeRequiredBeforeTheRequestLoop(t *testing.T) {
	ts := startServer(t, Options{Token: testToken, HostToken: "the-host-token"})
	for _, auth := range []string{`{"token":"` + testToken + `"}`, `{"host_token":"the-host-token"}`} {
		r := ts.raw(t)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"session.auth","params":` + auth + `}`)
		if rep := r.mustRecv(); rep.Error != nil {
			t.Fatalf("session.auth: %+v", rep.Error)
		}
		for i, m := range []string{protocol.MethodHostSubscribe, protocol.MethodStateGet, protocol.MethodServerStatus, protocol.MethodProposalSubmit, "no.such.method.x"} {
			r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"key":"k"}}`, 10+i, m))
			rep := r.mustRecv()
			want := protocol.CodeHandshakeMissing
			if m == "no.such.method.x" {
				want = protocol.CodeMethodNotFound
			}
			if rep.Error == nil || int64(rep.Error.Code) != int64(want) {
				t.Fatalf("%s before the handshake: %s %+v, want %d", m, rep.Result, rep.Error, want)
			}
			if want == protocol.CodeHandshakeMissing && !strings.Contains(rep.Error.Message, "server.handshake {protocol_version: 2}") {
				t.Errorf("the refusal does not say what to send: %q", rep.Error.Message)
			}
		}
		r.send(`{"jsonrpc":"2.0","id":2,"method":"rpc.discover"}`)
		if rep := r.mustRecv(); rep.Error != nil || !strings.Contains(string(rep.Result), "openrpc") {
			t.Fatalf("rpc.discover before the handshake: %+v", rep.Error)
		}
		r.send(`{"jsonrpc":"2.0","id":3,"method":"server.handshake","params":{"protocol_version":2}}`)
		if rep := r.mustRecv(); rep.Error != nil {
			t.Fatalf("server.handshake: %+v", rep.Error)
		}
		r.send(`{"jsonrpc":"2.0","id":4,"method":"state.get","params":{"key":"k"}}`)
		if rep := r.mustRecv(); rep.Error != nil {
			t.Fatalf("state.get after the handshake: %+v", rep.Error)
		}
	}
}

// TestAFailedHandshakeServesNothing: a handshake refused for its version
// leaves the connection where it was.
func TestAFailedHandshakeServesNothing(t *testing.T) {
	ts := startServer(t, Options{})
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{SkipHandshake: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if code, _ := rpcCode(t, c.Call(ctxT(t), protocol.MethodServerHandshake, map[string]any{"protocol_version": 1}, nil)); code != protocol.CodeVersionMismatch {
		t.Fatalf("handshake with version 1: %d", code)
	}
	if code, msg := rpcCode(t, c.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "k"}, nil)); code != protocol.CodeHandshakeMissing {
		t.Fatalf("state.get after a refused handshake: %d %q", code, msg)
	}
}

// TestHandshakeOptionalServesOldClients: with require_handshake off, a
// client that never sends server.handshake is served.
func TestHandshakeOptionalServesOldClients(t *testing.T) {
	ts := startServer(t, Options{HandshakeOptional: true})
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{SkipHandshake: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var st protocol.ServerStatusResult
	call(t, c, protocol.MethodServerStatus, nil, &st)
}

// TestMemoryNamespaceIsRecorded: session.auth takes memory_namespace,
// shows it to the host role in server.connections, and refuses one a
// person could not read as is.
func TestMemoryNamespaceIsRecorded(t *testing.T) {
	ts := startServer(t, Options{Token: testToken, HostToken: "the-host-token"})
	r := ts.raw(t)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"session.auth","params":{"token":"` + testToken + `","memory_namespace":"` + strings.Repeat("n", protocol.MaxClientName+1) + `"}}`)
	if rep := r.mustRecv(); rep.Error == nil || int64(rep.Error.Code) != protocol.CodeInvalidParams || !strings.Contains(rep.Error.Message, "memory_namespace") {
		t.Fatalf("an over-long memory_namespace: %s %+v", rep.Result, rep.Error)
	}
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session.auth","params":{"token":"` + testToken + `","memory_namespace":"team-a"}}`)
	if rep := r.mustRecv(); rep.Error != nil {
		t.Fatalf("session.auth with memory_namespace: %+v", rep.Error)
	}
	h, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "the-host-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	var res protocol.ServerConnectionsResult
	call(t, h, protocol.MethodServerConnections, nil, &res)
	found := 0
	for _, ci := range res.Connections {
		if ci.MemoryNamespace == "team-a" {
			found++
		}
	}
	if found != 1 {
		t.Fatalf("memory_namespace team-a on %d connections: %+v", found, res.Connections)
	}
}
