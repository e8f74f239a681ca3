package rpc

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/storetest"
	"github.com/parslee-ai/car-server/protocol"
)

// eventCluster is the shared part of several daemons of one test: the durable
// event log and the bus that announces its batches.
type eventCluster struct {
	bus    *storetest.Bus
	events *storetest.Events
}

func newEventCluster() *eventCluster {
	bus := storetest.NewBus()
	return &eventCluster{bus: bus, events: storetest.NewEvents(bus)}
}

// daemon starts a server whose event log joins the cluster as node and
// follows the other daemons' events (woken by the bus only: the poll is
// too slow to matter in a test) until the test ends or stop is called.
func (cl *eventCluster) daemon(t *testing.T, node string, opts Options) *testServer {
	t.Helper()
	ts := startServer(t, opts)
	if err := ts.rt.Events.JoinCluster(ctxT(t), node, cl.events); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.rt.Events.Follow(ctx, engine.FollowOptions{Bus: cl.bus, Every: time.Hour, OnError: func(err error) { t.Errorf("follow %s: %v", node, err) }})
	}()
	stopServer := ts.stop
	ts.stop = func() error { cancel(); <-done; return stopServer() }
	t.Cleanup(func() { cancel(); <-done })
	return ts
}

// documented calls method on tb, checks the reply against openrpc.json
// and decodes it into out.
func documented(t *testing.T, d *openrpcDoc, tb *toolbox, method string, params, out any) {
	t.Helper()
	var raw json.RawMessage
	if err := tb.Call(ctxT(t), method, params, &raw); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if err := d.result(method, raw); err != nil {
		t.Fatalf("%s: the reply of a cluster does not match openrpc.json: %v\nreply: %s", method, err, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

// submitNamed submits a one-action proposal with id.
func submitNamed(t *testing.T, tb *toolbox, id string) {
	t.Helper()
	p := proposal(toolCall("a", "echo", nil))
	p["id"] = id
	if res := tb.submit(t, p); len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("proposal %s: %+v", id, res)
	}
}

func TestClusterEventsQueryCountAndSummaryCoverEveryDaemon(t *testing.T) {
	cl := newEventCluster()
	a, b := cl.daemon(t, "a", Options{}), cl.daemon(t, "b", Options{})
	onA := newToolbox(t, a, map[string]toolFunc{"echo": echo})
	onB := newToolbox(t, b, map[string]toolFunc{"echo": echo})
	submitNamed(t, onA, "p-on-a")
	submitNamed(t, onB, "p-on-b")
	d := loadOpenRPC(t)

	var res eventsQueryResult
	documented(t, d, onB, protocol.MethodEventsQuery, map[string]any{"proposal_id": "p-on-a"}, &res)
	got := res.Events
	if len(got) == 0 || res.Truncated {
		t.Fatal("events.query on b does not see a's proposal")
	}
	for _, e := range got {
		if e.Node != "a" || e.ProposalID != "p-on-a" {
			t.Fatalf("events.query on b for a's proposal: %+v", e)
		}
	}
	if got[len(got)-1].Kind != engine.EventProposalReceived || got[0].Kind != engine.EventProposalFinished {
		t.Fatalf("a's proposal as b reads it, newest first: %v ... %v", got[0].Kind, got[len(got)-1].Kind)
	}
	all := len(cl.events.Records())
	var count int
	documented(t, d, onA, protocol.MethodEventsCount, nil, &count)
	if count != all || count < 2*len(got) {
		t.Fatalf("events.count on a: %d, the shared log holds %d", count, all)
	}
	var s engine.MetricsSummary
	documented(t, d, onA, protocol.MethodMetricsSummary, nil, &s)
	if s.ProposalsReceived != 2 || s.ActionsSucceeded != 2 || s.TotalEvents != all || s.SummarizedEvents == nil || *s.SummarizedEvents != all {
		t.Fatalf("metrics.summary on a: %+v", s)
	}
	var alerts struct {
		Summary engine.MetricsSummary `json:"summary"`
		Alerts  []engine.Alert        `json:"alerts"`
	}
	rate := 0.0
	documented(t, d, onB, protocol.MethodMetricsAlerts, map[string]any{"max_error_rate": rate, "min_actions": 2}, &alerts)
	if alerts.Summary.ActionsSucceeded != 2 || len(alerts.Alerts) != 0 {
		t.Fatalf("metrics.alerts on b: %+v", alerts)
	}
	var costs []engine.AgentCost
	documented(t, d, onB, protocol.MethodEventsCostByAgent, nil, &costs)
	if costs == nil || len(costs) != 0 {
		t.Fatalf("events.cost_by_agent without spend: %#v", costs)
	}
}

func TestClusterChainVerifyChecksEveryDaemonsChain(t *testing.T) {
	cl := newEventCluster()
	a, b := cl.daemon(t, "a", Options{}), cl.daemon(t, "b", Options{})
	submitNamed(t, newToolbox(t, a, map[string]toolFunc{"echo": echo}), "p-on-a")
	onB := newToolbox(t, b, map[string]toolFunc{"echo": echo})
	submitNamed(t, onB, "p-on-b")

	type report struct {
		Verified   *int                 `json:"verified"`
		TamperedAt *int                 `json:"tampered_at"`
		Nodes      []protocol.NodeChain `json:"nodes"`
	}
	d := loadOpenRPC(t)
	var rep report
	documented(t, d, onB, protocol.MethodEventsChainVerify, nil, &rep)
	all := len(cl.events.Records())
	if rep.Verified == nil || *rep.Verified != all || rep.TamperedAt != nil || len(rep.Nodes) != 2 ||
		rep.Nodes[0].Node != "a" || rep.Nodes[1].Node != "b" || rep.Nodes[0].Tampered != nil || rep.Nodes[1].Tampered != nil {
		t.Fatalf("intact chains: %+v", rep)
	}
	// Someone with access to the database edits a's third event.
	if !cl.events.Tamper("a", 3, func(r *store.EventRecord) {
		r.Body = json.RawMessage(strings.Replace(string(r.Body), `"kind":"`, `"kind":"x`, 1))
	}) {
		t.Fatal("a has no third event")
	}
	rep = report{}
	documented(t, d, onB, protocol.MethodEventsChainVerify, nil, &rep)
	if rep.TamperedAt == nil || rep.Nodes[0].Tampered == nil || *rep.Nodes[0].Tampered != 3 || rep.Nodes[0].Verified != 2 ||
		rep.Nodes[1].Tampered != nil || *rep.Verified != 2+rep.Nodes[1].Verified {
		t.Fatalf("a's chain edited: %+v", rep)
	}
}

func TestClusterLiveFeedCarriesOtherDaemonsEventsInOrderOnce(t *testing.T) {
	cl := newEventCluster()
	a, b := cl.daemon(t, "a", Options{}), cl.daemon(t, "b", Options{})
	onA := newToolbox(t, a, map[string]toolFunc{"echo": echo})
	onB := newToolbox(t, b, map[string]toolFunc{"echo": echo})
	w := newWatcher(t, b, nil)

	awaitResult(t, submitAsync(t, onA.Client, chain(3)), 3)
	fromA := w.until(t, "p-test")
	submitNamed(t, onB, "p-on-b")
	fromB := w.until(t, "p-on-b")
	submitNamed(t, onA, "p-after") // b reads the shared log again: its own events are not delivered twice
	after := w.until(t, "p-after")

	last := map[string]uint64{}
	for _, n := range append(append(fromA, fromB...), after...) {
		if n.Missed != nil || n.Cursor != n.Event.Seq {
			t.Fatalf("notification %+v", n)
		}
		if want := last[n.Event.Node] + 1; last[n.Event.Node] != 0 && n.Event.Seq != want {
			t.Fatalf("node %s: seq %d after %d: out of order or twice", n.Event.Node, n.Event.Seq, last[n.Event.Node])
		}
		last[n.Event.Node] = n.Event.Seq
	}
	aEvents := query(t, onA, map[string]any{"node": "a"})
	if last["a"] != aEvents[0].Seq || uint64(len(aEvents)) != last["a"] || fromA[0].Event.Seq != 1 {
		t.Fatalf("b's feed carried a's events up to %d from %d; a recorded %d", last["a"], fromA[0].Event.Seq, len(aEvents))
	}
	bEvents := query(t, onB, map[string]any{"node": "b"})
	if last["b"] != bEvents[0].Seq {
		t.Fatalf("b's feed carried its own events up to %d; b recorded %d", last["b"], bEvents[0].Seq)
	}
	if len(w.events) != 0 {
		t.Fatalf("%d notifications more than the events", len(w.events))
	}
}

func TestClusterFeedGapSaysWhereEachDaemonsBackfillStarts(t *testing.T) {
	var stalled atomic.Pointer[conn]
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	holdNotifications(t, held, release, func(c *conn, method string) bool { return c == stalled.Load() && method == protocol.MethodEventsEvent })
	const capacity = 4
	cl := newEventCluster()
	a, b := cl.daemon(t, "a", Options{}), cl.daemon(t, "b", Options{FeedQueue: capacity})
	onA := newToolbox(t, a, map[string]toolFunc{"echo": echo})
	onB := newToolbox(t, b, map[string]toolFunc{"echo": echo})
	slow := newWatcher(t, b, nil)
	stalled.Store(onlyEventSubscriber(t, b))

	// b's first event is being sent, and held, before any other is queued.
	b.rt.Events.Append(engine.Event{Kind: engine.EventStateChanged})
	select {
	case <-held:
	case <-time.After(testTimeout):
		t.Fatal("the stalled subscriber's feed was never held")
	}
	submitNamed(t, onB, "p-on-b")
	awaitResult(t, submitAsync(t, onA.Client, chain(6)), 6)
	// Once a healthy subscriber of b has a's last event, b has handed all
	// of a's events to the stalled feed, which queued or dropped them.
	healthy := newWatcher(t, b, nil)
	p := proposal(toolCall("a", "echo", nil))
	p["id"] = "p-mark"
	awaitResult(t, submitAsync(t, onA.Client, p), 1)
	healthy.until(t, "p-mark")
	close(release)

	first := slow.next(t)
	gap := slow.next(t)
	if first.Missed != nil || first.Event.Node != "b" || first.Event.Seq != 1 || gap.Missed == nil || gap.Missed.Cursors == nil {
		t.Fatalf("after the stall: first %+v, then %+v", first, gap)
	}
	// The events the feed dropped are, for each daemon, those of its chain
	// after its cursor and below the first of its events delivered after
	// the gap.
	rest := []eventNotice{gap}
	for {
		n := slow.next(t)
		if n.Missed != nil {
			t.Fatalf("a second gap: %+v", n)
		}
		rest = append(rest, n)
		if n.Event.ProposalID == "p-mark" && n.Event.Kind == engine.EventProposalFinished {
			break
		}
	}
	below := map[string]uint64{}
	for _, n := range rest {
		if below[n.Event.Node] == 0 {
			below[n.Event.Node] = n.Event.Seq
		}
	}
	var backfilled uint64
	for node, after := range gap.Missed.Cursors {
		for _, e := range query(t, slow.toolbox, map[string]any{"node": node, "after_cursor": after}) {
			if below[node] == 0 || e.Seq < below[node] {
				backfilled++
			}
		}
	}
	if backfilled != gap.Missed.Count {
		t.Fatalf("gap of %d (cursors %v); the backfill after them finds %d events", gap.Missed.Count, gap.Missed.Cursors, backfilled)
	}
}

func TestClusterRestartedDaemonContinuesItsChain(t *testing.T) {
	cl := newEventCluster()
	first := cl.daemon(t, "a", Options{})
	b := cl.daemon(t, "b", Options{})
	submitNamed(t, newToolbox(t, first, map[string]toolFunc{"echo": echo}), "p-first")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	again := cl.daemon(t, "a", Options{})
	submitNamed(t, newToolbox(t, again, map[string]toolFunc{"echo": echo}), "p-again")

	onB := newToolbox(t, b, map[string]toolFunc{})
	before := query(t, onB, map[string]any{"proposal_id": "p-first"})
	after := query(t, onB, map[string]any{"proposal_id": "p-again"})
	if after[len(after)-1].Seq != before[0].Seq+1 || after[len(after)-1].PrevHash != before[0].Hash {
		t.Fatalf("the restarted daemon's first event: seq %d after %q; its last before: seq %d, hash %q",
			after[len(after)-1].Seq, after[len(after)-1].PrevHash, before[0].Seq, before[0].Hash)
	}
	var rep struct {
		Nodes []protocol.NodeChain `json:"nodes"`
	}
	mustCall(t, onB, protocol.MethodEventsChainVerify, nil, &rep)
	if len(rep.Nodes) != 1 || rep.Nodes[0].Node != "a" || rep.Nodes[0].Tampered != nil || rep.Nodes[0].Verified != len(before)+len(after) {
		t.Fatalf("a's chain across the restart: %+v", rep.Nodes)
	}
}

func TestClusterReadsSayTheStoreIsUnavailable(t *testing.T) {
	cl := newEventCluster()
	a := cl.daemon(t, "a", Options{})
	onA := newToolbox(t, a, map[string]toolFunc{"echo": echo})
	cl.events.SetUnavailable(true)
	submitNamed(t, onA, "p-during") // the audit log holds no proposal up
	for _, method := range []string{protocol.MethodEventsCount, protocol.MethodEventsQuery, protocol.MethodMetricsSummary,
		protocol.MethodMetricsAlerts, protocol.MethodEventsCostByAgent, protocol.MethodEventsChainVerify} {
		err := onA.Call(ctxT(t), method, nil, nil)
		if code, msg := rpcCode(t, err); code != protocol.CodeInternal || !strings.Contains(msg, "unavailable") {
			t.Errorf("%s during an outage: %d %q", method, code, msg)
		}
	}
	cl.events.SetUnavailable(false)
	if got := query(t, onA, map[string]any{"proposal_id": "p-during"}); len(got) == 0 {
		t.Fatal("the events appended during the outage are not in the log")
	}
}
