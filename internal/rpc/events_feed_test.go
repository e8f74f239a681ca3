package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// watcher is a connection subscribed with events.subscribe.
type watcher struct {
	*toolbox
	cursor uint64
	events chan eventNotice
}

// newWatcher subscribes a new connection with params.
func newWatcher(t *testing.T, ts *testServer, params map[string]any) *watcher {
	t.Helper()
	w := &watcher{toolbox: newToolbox(t, ts, map[string]toolFunc{}), events: make(chan eventNotice, 1024)}
	w.HandleNotification(protocol.MethodEventsEvent, func(raw json.RawMessage) {
		var n eventNotice
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Errorf("events.event is not {cursor, event, missed?}: %v: %s", err, raw)
			return
		}
		w.events <- n
	})
	var res protocol.EventsSubscribeResult
	mustCall(t, w.toolbox, protocol.MethodEventsSubscribe, params, &res)
	if !res.Subscribed {
		t.Fatalf("events.subscribe: %+v", res)
	}
	w.cursor = res.Cursor
	return w
}

func (w *watcher) next(t *testing.T) eventNotice {
	t.Helper()
	select {
	case n := <-w.events:
		return n
	case <-time.After(testTimeout):
		t.Fatal("no events.event")
		return eventNotice{}
	}
}

// until reads notifications up to and including the proposal_finished of
// proposal id.
func (w *watcher) until(t *testing.T, id string) []eventNotice {
	t.Helper()
	var got []eventNotice
	for {
		n := w.next(t)
		got = append(got, n)
		if n.Event.Kind == engine.EventProposalFinished && n.Event.ProposalID == id {
			return got
		}
	}
}

// query runs events.query.
func query(t *testing.T, tb *toolbox, q map[string]any) []engine.Event {
	t.Helper()
	var res struct {
		Events []engine.Event `json:"events"`
	}
	mustCall(t, tb, protocol.MethodEventsQuery, q, &res)
	return res.Events
}

// chain is n echo actions, each depending on the one before.
func chain(n int) map[string]any {
	actions := make([]map[string]any, n)
	for i := range actions {
		actions[i] = toolCall(fmt.Sprintf("a%d", i), "echo", nil)
		if i > 0 {
			actions[i]["dependencies"] = []string{fmt.Sprintf("a%d", i-1)}
		}
	}
	return proposal(actions...)
}

func TestEventsSubscribeDeliversContiguousCursorsThroughAProposal(t *testing.T) {
	ts := startServer(t, Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	runner.submit(t, proposal(toolCall("before", "echo", nil))) // history the feed does not replay
	w := newWatcher(t, ts, nil)
	if w.cursor == 0 {
		t.Fatal("subscribe cursor 0 with events in the log")
	}
	awaitResult(t, submitAsync(t, runner.Client, chain(2)), 2)
	got := w.until(t, "p-test")
	var kinds []engine.EventKind // kind and action id, of the proposal's and actions' events
	for i, n := range got {
		if want := w.cursor + uint64(i) + 1; n.Cursor != want || n.Event.Seq != want || n.Missed != nil {
			t.Fatalf("notification %d: cursor %d seq %d missed %+v, want cursor %d and no gap", i, n.Cursor, n.Event.Seq, n.Missed, want)
		}
		if k := string(n.Event.Kind); strings.HasPrefix(k, "action_") || strings.HasPrefix(k, "proposal_") {
			kinds = append(kinds, engine.EventKind(k+" "+n.Event.ActionID))
		}
	}
	want := []engine.EventKind{"proposal_received ",
		"action_started a0", "action_succeeded a0",
		"action_started a1", "action_succeeded a1",
		"proposal_finished "}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
}

func TestEventsSubscribeFiltersByKindAndProposal(t *testing.T) {
	ts := startServer(t, Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	filter := map[string]any{"kinds": []string{"action_started", "action_succeeded"}, "proposal_id": "p-b"}
	w := newWatcher(t, ts, filter)
	for _, id := range []string{"p-a", "p-b"} {
		p := chain(2)
		p["id"] = id
		awaitResult(t, submitAsync(t, runner.Client, p), 2)
	}
	want := query(t, runner, filter)
	if len(want) != 4 {
		t.Fatalf("events.query with the filter: %d events, want 4", len(want))
	}
	// p-a's events came first: had any got through, it would be among the
	// first four.
	for i := range want {
		n := w.next(t)
		if e := want[len(want)-1-i]; n.Cursor != e.Seq || n.Event.Kind != e.Kind || n.Event.ProposalID != "p-b" {
			t.Fatalf("notification %d: %+v, want %+v", i, n.Event, e)
		}
	}
}

func TestEventsUnsubscribeStopsTheFeed(t *testing.T) {
	ts := startServer(t, Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	w := newWatcher(t, ts, nil)
	for _, want := range []bool{true, false} {
		var res protocol.EventsUnsubscribeResult
		mustCall(t, w.toolbox, protocol.MethodEventsUnsubscribe, nil, &res)
		if res.Subscribed || res.WasSubscribed != want {
			t.Fatalf("events.unsubscribe: %+v, want was_subscribed %v", res, want)
		}
	}
	runner.submit(t, proposal(toolCall("a", "echo", nil)))
	again := newWatcher(t, ts, map[string]any{"proposal_id": "p-after"})
	p := proposal(toolCall("a", "echo", nil))
	p["id"] = "p-after"
	runner.submit(t, p)
	if n := again.next(t); n.Event.ProposalID != "p-after" {
		t.Fatalf("first event after resubscribing: %+v", n.Event)
	}
	if len(w.events) != 0 {
		t.Fatalf("an unsubscribed connection got %d events.event", len(w.events))
	}
}

func TestAStalledEventSubscriberGetsAGapItCanBackfill(t *testing.T) {
	// The hook holds the stalled connection's feed as a socket that has
	// stopped draining would, until release is closed.
	var stalled atomic.Pointer[conn]
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	holdNotifications(t, held, release, func(c *conn, method string) bool { return c == stalled.Load() && method == protocol.MethodEventsEvent })
	const capacity = 4
	ts := startServer(t, Options{FeedQueue: capacity})
	// The first tool call waits until the stalled feed holds its first
	// event, so that event is taken from the queue before the others
	// overflow it, whatever the goroutines' timing.
	firstHeld := make(chan struct{})
	runner := newToolbox(t, ts, map[string]toolFunc{"echo": func(ctx context.Context, call protocol.ToolExecuteParams) (any, error) {
		select {
		case <-firstHeld:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return echo(ctx, call)
	}})
	slow := newWatcher(t, ts, nil)
	stalled.Store(onlyEventSubscriber(t, ts))
	healthy := newWatcher(t, ts, nil)

	const actions = 10 // 22 events and more: far over the capacity
	submitted := submitAsync(t, runner.Client, chain(actions))
	select {
	case <-held:
	case <-time.After(testTimeout):
		t.Fatal("the stalled subscriber's feed was never held")
	}
	close(firstHeld)
	res := awaitResult(t, submitted, actions)
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("%s: %s %q", r.ActionID, r.Status, r.ErrorText())
		}
	}
	// The healthy subscriber has its own queue of the same small bound: it
	// may drop events too, but it gets the proposal's end while the other
	// is held, and every event is either delivered or counted in a gap.
	prev := healthy.cursor
	for _, n := range healthy.until(t, "p-test") {
		want := prev + 1
		if n.Missed != nil {
			if n.Missed.AfterCursor != prev {
				t.Fatalf("the healthy subscriber's gap %+v, want one after %d", n.Missed, prev)
			}
			want += n.Missed.Count
		}
		if n.Cursor != want {
			t.Fatalf("the healthy subscriber's notification: cursor %d missed %+v after %d: events unaccounted for", n.Cursor, n.Missed, prev)
		}
		prev = n.Cursor
	}
	close(release)

	first := slow.next(t) // popped before the stall
	if first.Cursor != slow.cursor+1 || first.Missed != nil {
		t.Fatalf("first notification: cursor %d missed %+v, want %d and no gap", first.Cursor, first.Missed, slow.cursor+1)
	}
	gap := slow.next(t)
	if gap.Missed == nil || gap.Missed.Count == 0 || gap.Missed.AfterCursor != first.Cursor {
		t.Fatalf("the notification after the stall: cursor %d missed %+v, want a gap after %d", gap.Cursor, gap.Missed, first.Cursor)
	}
	var backfill []uint64
	for _, e := range query(t, slow.toolbox, map[string]any{"after_cursor": gap.Missed.AfterCursor}) {
		if e.Seq < gap.Cursor {
			backfill = append(backfill, e.Seq)
		}
	}
	if uint64(len(backfill)) != gap.Missed.Count || gap.Cursor-gap.Missed.AfterCursor-1 != gap.Missed.Count {
		t.Fatalf("gap %+v before cursor %d; events.query after_cursor gave %d events before it", gap.Missed, gap.Cursor, len(backfill))
	}
	for i, seq := range backfill { // newest first
		if want := gap.Cursor - 1 - uint64(i); seq != want {
			t.Fatalf("backfilled seq %d, want %d", seq, want)
		}
	}
	// The rest of the queue follows without a gap, ending with the
	// proposal's end.
	prev = gap.Cursor
	for _, n := range slow.until(t, "p-test") {
		if n.Cursor != prev+1 || n.Missed != nil {
			t.Fatalf("after the gap: cursor %d missed %+v, want %d", n.Cursor, n.Missed, prev+1)
		}
		prev = n.Cursor
	}
	if prev-gap.Cursor+1 != capacity {
		t.Fatalf("delivered %d events after the stall, want the %d the queue holds", prev-gap.Cursor+1, capacity)
	}
}

// onlyEventSubscriber returns the one connection of ts with an
// events.subscribe in force.
func onlyEventSubscriber(t *testing.T, ts *testServer) *conn {
	t.Helper()
	ts.srv.mu.Lock()
	defer ts.srv.mu.Unlock()
	var found []*conn
	for c := range ts.srv.conns {
		c.mu.Lock()
		if c.eventSub != nil {
			found = append(found, c)
		}
		c.mu.Unlock()
	}
	if len(found) != 1 {
		t.Fatalf("want one events subscriber, have %d", len(found))
	}
	return found[0]
}
