package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/protocol"
)

// decideHeld, while a test sets it, is closed once the supervisor's drain
// has stopped serving the drain-exempt methods; test.decide holds its reply
// until then, or until the connection is gone.
var decideHeld chan struct{}

func init() {
	methodAccess["test.decide"] = accessAny
	methods["test.decide"] = method{handle: func(c *conn, ctx context.Context, params *json.RawMessage) (any, error) {
		res, err := c.supervisionDecide(ctx, params)
		select {
		case <-decideHeld: // the drain waits for this reply
		case <-c.rpc.DisconnectNotify(): // the drain closed the connection without it
		}
		return res, err
	}}
	drainExempt["test.decide"] = true
}

// watchSupervisorDrain returns channels closed when a supervisor's
// connection begins to drain and when its drain stops serving the
// drain-exempt methods. Call it before starting the server: the hooks are
// removed after the server has shut down.
func watchSupervisorDrain(t *testing.T) (draining, sealed chan struct{}) {
	draining, sealed = make(chan struct{}), make(chan struct{})
	var onceD, onceS sync.Once
	drainHookDraining = func(c *conn) {
		if c.srv.rt.Supervisors.Subscribed(c.id) {
			onceD.Do(func() { close(draining) })
		}
	}
	drainHookSealed = func(c *conn) {
		if c.srv.rt.Supervisors.Subscribed(c.id) {
			onceS.Do(func() { close(sealed) })
		}
	}
	t.Cleanup(func() { drainHookDraining, drainHookSealed = nil, nil })
	return draining, sealed
}

// decideDuringShutdown parks a proposal, begins shutdown, and has a raw
// supervisor send method (supervision.decide or test.decide) once its
// connection drains. The supervisor must get {decided: true} before the
// daemon closes the connection with 1001.
func decideDuringShutdown(t *testing.T, method string) {
	draining, sealed := watchSupervisorDrain(t)
	decideHeld = sealed
	t.Cleanup(func() { decideHeld = nil })
	ts := startGovernedServer(t, testTimeout)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	sup := ts.raw(t)
	if rep := sup.call(`{"jsonrpc":"2.0","id":1,"method":"supervision.subscribe"}`); rep.Error != nil {
		t.Fatalf("subscribe: %s", rep.Error.Message)
	}
	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	in := sup.nextIntent()
	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(ctxT(t)) }()
	select {
	case <-draining:
	case <-time.After(testTimeout):
		t.Fatal("the supervisor's connection never began to drain")
	}

	sup.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":{"intent_id":%q,"decision":{"kind":"allow"}}}`, method, in.Params.ID))
	rep, err := sup.recv()
	if err != nil {
		t.Fatalf("the connection closed before the reply to %s: %v", method, err)
	}
	if rep.Error != nil || string(rep.Result) != `{"decided":true}` {
		t.Fatalf("decide while draining: %+v %s", rep.Error, rep.Result)
	}
	if _, err := sup.recv(); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after the reply: want a 1001 close, got %v", err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the parked proposal: %q", r.Results[0].ErrorText())
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestSupervisorGetsItsDecideReplyBeforeTheShutdownClose(t *testing.T) {
	decideDuringShutdown(t, protocol.MethodSupervisionDecide)
}

// The reply is held until the drain has gone as far as it can without it:
// a drain that does not wait for it closes the connection first, every time.
func TestADrainWaitsForAHeldDecideReply(t *testing.T) {
	decideDuringShutdown(t, "test.decide")
}
