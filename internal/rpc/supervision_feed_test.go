package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/protocol"
)

// stallHeld is told each time test.stall holds its connection's writes.
var stallHeld = make(chan struct{}, 1)

func init() {
	// test.stall starts a frame it never finishes: every other write on the
	// connection waits behind it, as it does behind a peer whose socket has
	// stopped draining (the frame fills the socket and blocks).
	methodAccess["test.stall"] = accessAny
	methods["test.stall"] = method{handle: func(c *conn, ctx context.Context, _ *json.RawMessage) (any, error) {
		w, err := c.ws.Writer(ctx, websocket.MessageText)
		if err != nil {
			return nil, err
		}
		stallHeld <- struct{}{}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return nil, err
			}
		}
	}}
}

// stallSupervisor subscribes a connection as a supervisor of every proposal,
// then stops reading: from then on every write to it is stuck.
func stallSupervisor(t *testing.T, ts *testServer) *rawConn {
	t.Helper()
	r := ts.raw(t)
	if rep := r.call(`{"jsonrpc":"2.0","id":1,"method":"supervision.subscribe"}`); rep.Error != nil {
		t.Fatalf("subscribe: %s", rep.Error.Message)
	}
	r.send(`{"jsonrpc":"2.0","id":2,"method":"test.stall"}`)
	select {
	case <-stallHeld:
	case <-time.After(testTimeout):
		t.Fatal("test.stall never held the connection's writes")
	}
	return r
}

// awaitResult waits for a submitted proposal's result.
func TestAStalledSupervisorDoesNotHoldUpTheSubmitter(t *testing.T) {
	ts := startGovernedServer(t, testTimeout)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	stallSupervisor(t, ts)
	healthy := newSupervisor(t, ts, nil)
	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	in := healthy.next(t) // parked, and sent to the healthy supervisor
	if err := healthy.decide(t, in.ID, "allow", ""); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("allowed by the healthy supervisor: %q", r.Results[0].ErrorText())
	}
}

func TestAStalledSupervisorsIntentStillTimesOutFailClosed(t *testing.T) {
	ts := startGovernedServer(t, 100*time.Millisecond)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	stallSupervisor(t, ts)
	r := awaitResult(t, submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil))), 1)
	if r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "fail-closed") {
		t.Fatalf("want a fail-closed rejection, got %s %q", r.Results[0].Status, r.Results[0].ErrorText())
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("dispatched without a decision")
	}
}

// intentFrame is a supervision.intent notification as it is on the wire.
type intentFrame struct {
	Method string `json:"method"`
	Params struct {
		ID      string  `json:"id"`
		Cursor  *uint64 `json:"cursor"`
		Dropped *uint64 `json:"dropped"`
	} `json:"params"`
}

// nextIntent reads the next frame from a raw supervisor, which must be a
// supervision.intent.
func (r *rawConn) nextIntent() intentFrame {
	r.t.Helper()
	ctx := ctxT(r.t)
	_, data, err := r.ws.Read(ctx)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	var f intentFrame
	if err := json.Unmarshal(data, &f); err != nil || f.Method != protocol.MethodSupervisionIntent {
		r.t.Fatalf("want a supervision.intent, got %s", data)
	}
	return f
}

func TestIntentsCarryTheirCursorAndGap(t *testing.T) {
	ts := startGovernedServer(t, testTimeout)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	sup := ts.raw(t)
	if rep := sup.call(`{"jsonrpc":"2.0","id":1,"method":"supervision.subscribe"}`); rep.Error != nil {
		t.Fatalf("subscribe: %s", rep.Error.Message)
	}
	for want := uint64(1); want <= 2; want++ {
		ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
		in := sup.nextIntent()
		if in.Params.Cursor == nil || *in.Params.Cursor != want || in.Params.Dropped == nil || *in.Params.Dropped != 0 {
			t.Fatalf("intent %d: cursor %v dropped %v", want, in.Params.Cursor, in.Params.Dropped)
		}
		rep := sup.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"supervision.decide","params":{"intent_id":%q,"decision":{"kind":"allow"}}}`, 1+want, in.Params.ID))
		if rep.Error != nil {
			t.Fatalf("decide: %s", rep.Error.Message)
		}
		if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
			t.Fatalf("allowed: %q", r.Results[0].ErrorText())
		}
	}
}

// onlySupervisor returns the one subscribed connection of ts.
func onlySupervisor(t *testing.T, ts *testServer) *conn {
	t.Helper()
	ts.srv.mu.Lock()
	defer ts.srv.mu.Unlock()
	var found []*conn
	for c := range ts.srv.conns {
		if ts.rt.Supervisors.Subscribed(c.id) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one supervisor connection, have %d", len(found))
	}
	return found[0]
}

func TestASupervisorThatMissesTheWriteDeadlineIsDisconnected(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 50 * time.Millisecond})
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	stallSupervisor(t, ts)
	stalled := onlySupervisor(t, ts)
	stalled.mu.Lock()
	feed := stalled.intents
	stalled.mu.Unlock()
	healthy := newSupervisor(t, ts, nil)
	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	in := healthy.next(t)

	select {
	case <-feed.Done():
	case <-time.After(testTimeout):
		t.Fatal("the stalled supervisor's intent never missed its write deadline")
	}
	if err := feed.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the feed ended with %v, want a missed deadline", err)
	}
	select {
	case <-stalled.rpc.DisconnectNotify():
	case <-time.After(testTimeout):
		t.Fatal("a supervisor that stopped reading was not disconnected")
	}
	if err := healthy.decide(t, in.ID, "allow", ""); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("allowed by the healthy supervisor: %q", r.Results[0].ErrorText())
	}
}
