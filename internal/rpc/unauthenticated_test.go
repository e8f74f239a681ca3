package rpc

import (
	"testing"
	"time"

	"github.com/coder/websocket"
)

// openIdle opens n unauthenticated sockets, waiting for the server to have
// counted each one before the next, so that their age order is known.
func (ts *testServer) openIdle(t *testing.T, opened, n int) []*rawConn {
	t.Helper()
	var idle []*rawConn
	for i := range n {
		idle = append(idle, ts.raw(t))
		ts.waitLog(t, "connection opened", opened+i+1)
	}
	return idle
}

// wantPolicyClose waits for r to be closed by the server with 1008.
func wantPolicyClose(t *testing.T, r *rawConn, why string) {
	t.Helper()
	_, err := r.recv()
	if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
		t.Fatalf("%s: want close 1008 (policy violation), got %v (%v)", why, got, err)
	}
}

func TestOldestUnauthenticatedConnectionMakesRoom(t *testing.T) {
	ts := startServer(t, Options{Token: "tok", MaxUnauthenticated: 2})
	idle := ts.openIdle(t, 0, 3)
	wantPolicyClose(t, idle[0], "the oldest of 3 idle sockets with max_unauthenticated 2")
	// The newcomer that authenticates evicts the next oldest and is served.
	c := ts.dial(t, "tok")
	var keys []string
	if err := c.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("a valid client after the idle sockets: %v", err)
	}
	wantPolicyClose(t, idle[1], "the oldest idle socket when a client came past the cap")
}

func TestIdleSocketsDoNotLockOutAValidClient(t *testing.T) {
	// Before, every slot of max_connections held by an idle socket made the
	// next client get HTTP 503.
	ts := startServer(t, Options{Token: "tok", MaxConnections: 3})
	idle := ts.openIdle(t, 0, 3)
	c := ts.dial(t, "tok")
	var keys []string
	if err := c.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("a valid client with every slot held by idle sockets: %v", err)
	}
	wantPolicyClose(t, idle[0], "the oldest idle socket when max_connections was full")
}

func TestUnauthenticatedConnectionTimesOut(t *testing.T) {
	ts := startServer(t, Options{Token: "tok", AuthTimeout: 20 * time.Millisecond})
	// The client authenticated in time keeps its connection past the deadline
	// that closes the idle socket opened after it.
	c := ts.dial(t, "tok")
	r := ts.raw(t)
	wantPolicyClose(t, r, "an idle socket past auth_timeout")
	ts.waitLog(t, "no session.auth within auth_timeout; closing", 1)
	var keys []string
	if err := c.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("the authenticated client after the deadline: %v", err)
	}
}
