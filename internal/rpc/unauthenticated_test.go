package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/client"
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
	// No grace: the sockets are opened within it.
	ts := startServer(t, Options{Token: "tok", MaxUnauthenticated: 2, EvictionGrace: -1})
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

// TestAYoungOrSpeakingSocketIsNotTheVictim: past max_unauthenticated, a
// socket younger than the grace is spared, and so is one whose first bytes
// have arrived, however old; the newcomer is admitted past the cap.
func TestAYoungOrSpeakingSocketIsNotTheVictim(t *testing.T) {
	ts := startServer(t, Options{Token: "tok", MaxUnauthenticated: 2, EvictionGrace: time.Hour})
	idle := ts.openIdle(t, 0, 3)
	c := ts.dial(t, "tok")
	var keys []string
	if err := c.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("a valid client past the cap: %v", err)
	}
	if n := ts.logs.count("closing a silent unauthenticated connection to admit a newer one"); n != 0 {
		t.Fatalf("%d young sockets were closed to make room", n)
	}
	for _, r := range idle {
		r.ws.CloseNow()
	}

	ts = startServer(t, Options{Token: "tok", MaxUnauthenticated: 2, EvictionGrace: -1})
	speaking := ts.raw(t)
	ts.waitLog(t, "connection opened", 1)
	// A frame that is not session.auth gets -32001 and a close; one that is
	// session.auth with a wrong token leaves it unauthenticated: it spoke.
	rep := speaking.call(`{"jsonrpc":"2.0","id":1,"method":"session.auth","params":{"token":"wrong"}}`)
	if rep.Error == nil {
		t.Fatal("a wrong token was accepted")
	}
	silent := ts.openIdle(t, 1, 2)
	wantPolicyClose(t, silent[0], "the oldest silent socket, the speaking one being older")
	rep = speaking.call(`{"jsonrpc":"2.0","id":2,"method":"session.auth","params":{"token":"tok"}}`)
	if rep.Error != nil {
		t.Fatalf("the socket that spoke first was evicted: %+v", rep.Error)
	}
}

// TestAReconnectStormAuthenticates: under the defaults, 1,000 clients
// connecting 200 at a time all authenticate; none is closed in the middle
// of its session.auth to admit another.
func TestAReconnectStormAuthenticates(t *testing.T) {
	ts := startServer(t, Options{Token: "tok"})
	const clients, inFlight = 1000, 200
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "tok"})
			if err != nil {
				errs <- err
				return
			}
			c.Close()
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if failed == 0 {
			first = err
		}
		failed++
	}
	if failed > 0 {
		t.Fatalf("%d of %d clients failed to authenticate; the first: %v", failed, clients, first)
	}
}

// TestIdleSocketsPastTheCapLockNobodyOut: 1,023 sockets that never send a
// frame, past max_unauthenticated, do not keep a valid client out.
func TestIdleSocketsPastTheCapLockNobodyOut(t *testing.T) {
	ts := startServer(t, Options{Token: "tok"})
	var idle []*rawConn
	for range 1023 {
		idle = append(idle, ts.raw(t))
	}
	c := ts.dial(t, "tok")
	var keys []string
	if err := c.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("a valid client beside 1,023 idle sockets: %v", err)
	}
	for _, r := range idle {
		r.ws.CloseNow()
	}
}
