package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// joined is a log of capacity n that joined the shared log as node.
func joined(t *testing.T, shared ClusterLog, node string, n int) *EventLog {
	t.Helper()
	l := NewEventLog(n)
	if err := l.JoinCluster(ctxT(t), node, shared); err != nil {
		t.Fatal(err)
	}
	return l
}

// follow runs l.Follow until the test ends.
func follow(t *testing.T, l *EventLog, o FollowOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Follow(ctx, o) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestClusterReadsCoverEveryDaemon(t *testing.T) {
	shared := storetest.NewEvents(nil)
	a, b := joined(t, shared, "a", 0), joined(t, shared, "b", 0)
	a.Append(Event{Kind: EventProposalReceived, ProposalID: "pa"})
	a.Append(Event{Kind: EventActionSucceeded, ProposalID: "pa", ActionID: "x", Data: map[string]any{"duration_ms": 4.0}})
	b.Append(Event{Kind: EventProposalReceived, ProposalID: "pb"})
	b.Append(Event{Kind: EventActionFailed, ProposalID: "pb", ActionID: "y", Data: map[string]any{"duration_ms": 2.0}})
	a.Append(Event{Kind: EventAgentRun, Data: map[string]any{"agent": "planner", "tokens_in": 10, "tokens_out": 5, "cost_usd": 0.25}})

	got, truncated, err := b.QueryAll(ctxT(t), EventQuery{ProposalID: "pa"})
	if err != nil || truncated {
		t.Fatalf("query: %v, truncated %v", err, truncated)
	}
	if len(got) != 2 || got[0].Node != "a" || got[0].Seq != 2 || got[1].Seq != 1 || got[0].ActionID != "x" {
		t.Fatalf("b's query for a's proposal: %+v", got)
	}
	if got, _, _ := b.QueryAll(ctxT(t), EventQuery{Node: "b", Kinds: []EventKind{EventProposalReceived}}); len(got) != 1 || got[0].ProposalID != "pb" {
		t.Fatalf("query by node and kind: %+v", got)
	}
	if got, _, _ := a.QueryAll(ctxT(t), EventQuery{ActionID: "y"}); len(got) != 1 || got[0].Node != "b" {
		t.Fatalf("query by action (filtered in memory): %+v", got)
	}
	if got, _, _ := a.QueryAll(ctxT(t), EventQuery{Node: "a", AfterCursor: 2}); len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("backfill of a's chain after 2: %+v", got)
	}
	if n, err := b.CountAll(ctxT(t)); err != nil || n != 5 {
		t.Fatalf("count: %d, %v", n, err)
	}
	s, err := a.SummaryAll(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalEvents != 5 || s.SummarizedEvents == nil || *s.SummarizedEvents != 5 || s.ProposalsReceived != 2 ||
		s.ActionsSucceeded != 1 || s.ActionsFailed != 1 || s.AvgLatencyMs != 3 || s.CostUSD != 0.25 || s.CumulativeCostUSD != 0.25 {
		t.Fatalf("summary over both daemons: %+v", s)
	}
	costs, err := b.CostByAgentAll(ctxT(t))
	if err != nil || len(costs) != 1 || costs[0] != (AgentCost{Agent: "planner", Calls: 1, TokensIn: 10, TokensOut: 5, CostUSD: 0.25}) {
		t.Fatalf("cost by agent: %+v, %v", costs, err)
	}
	limit := 0.1
	if _, alerts, err := b.AlertsAll(ctxT(t), AlertThresholds{MaxCostUSD: &limit}); err != nil || len(alerts) != 1 || alerts[0].Kind != "cost_overage" {
		t.Fatalf("alerts over a's spend, judged on b: %+v, %v", alerts, err)
	}
}

func TestClusterReadsAreBoundedAndSaySo(t *testing.T) {
	shared := storetest.NewEvents(nil)
	a, b := joined(t, shared, "a", 3), joined(t, shared, "b", 3)
	for i := 0; i < 3; i++ {
		a.Append(Event{Kind: EventProposalReceived})
		b.Append(Event{Kind: EventProposalReceived})
	}
	s, err := a.SummaryAll(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalEvents != 6 || *s.SummarizedEvents != 3 || s.ProposalsReceived != 3 {
		t.Fatalf("summary window: total %d, summarized %d, proposals %d", s.TotalEvents, *s.SummarizedEvents, s.ProposalsReceived)
	}
	got, truncated, err := a.QueryAll(ctxT(t), EventQuery{})
	if err != nil || !truncated || len(got) != 3 || got[0].Node != "b" || got[0].Seq != 3 {
		t.Fatalf("unbounded query: %d events, truncated %v, %v", len(got), truncated, err)
	}
	if got, truncated, _ := a.QueryAll(ctxT(t), EventQuery{Limit: 2}); truncated || len(got) != 2 {
		t.Fatalf("a limit within the window: %d events, truncated %v", len(got), truncated)
	}
	if got, truncated, _ := a.QueryAll(ctxT(t), EventQuery{Node: "a"}); truncated || len(got) != 3 {
		t.Fatalf("a node's whole chain fits: %d events, truncated %v", len(got), truncated)
	}
}

func TestClusterReadsSayTheStoreIsUnavailable(t *testing.T) {
	shared := storetest.NewEvents(nil)
	a := joined(t, shared, "a", 0)
	a.Append(Event{Kind: EventProposalReceived})
	shared.SetUnavailable(true)
	a.Append(Event{Kind: EventProposalReceived}) // never waits on the store
	for name, read := range map[string]func() error{
		"count":   func() error { _, err := a.CountAll(ctxT(t)); return err },
		"query":   func() error { _, _, err := a.QueryAll(ctxT(t), EventQuery{}); return err },
		"summary": func() error { _, err := a.SummaryAll(ctxT(t)); return err },
		"verify":  func() error { _, err := a.VerifyAll(ctxT(t)); return err },
	} {
		if err := read(); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("%s during an outage: %v", name, err)
		}
	}
	shared.SetUnavailable(false)
	if n, err := a.CountAll(ctxT(t)); err != nil || n != 2 {
		t.Fatalf("count after the outage: %d, %v", n, err)
	}
}

func TestJoinClusterRefusesWhatCannotChain(t *testing.T) {
	shared := storetest.NewEvents(nil)
	if err := NewEventLog(0).JoinCluster(ctxT(t), "", shared); err == nil {
		t.Fatal("an empty node id was accepted")
	}
	l := NewEventLog(0)
	l.Append(Event{Kind: EventStateChanged})
	if err := l.JoinCluster(ctxT(t), "a", shared); err == nil || !strings.Contains(err.Error(), "before") {
		t.Fatalf("joining after an append: %v", err)
	}
	l = joined(t, shared, "a", 0)
	if err := l.JoinCluster(ctxT(t), "a", shared); err == nil {
		t.Fatal("joined twice")
	}
	shared.SetUnavailable(true)
	if err := NewEventLog(0).JoinCluster(ctxT(t), "b", shared); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("joining an unreachable store: %v", err)
	}
}

// appendVaried appends events whose data holds every JSON shape, and some
// values that encode in only one way.
func appendVaried(l *EventLog) {
	l.Append(Event{Kind: EventActionSucceeded, ActionID: "a1", Connection: "c1", Data: map[string]any{
		"int": 7, "int64": int64(1) << 60, "uint64": uint64(math.MaxUint64), "float": 0.1 + 0.2, "big": 1e300,
		"strings": []string{"<b>", "&"}, "nested": map[string]any{"z": 1, "a": []any{true, nil}},
		"bad_utf8": "\xff\xfe", "type": "tool_call"}})
	l.Append(Event{Kind: EventActionFailed, Data: map[string]any{"duration_ms": math.NaN()}})
	l.Append(Event{Kind: EventProposalFinished})
}

func TestEveryDaemonsChainVerifiesFromTheStoredBodies(t *testing.T) {
	shared := storetest.NewEvents(nil)
	a, b := joined(t, shared, "a", 0), joined(t, shared, "b", 0)
	appendVaried(a)
	appendVaried(b)
	a.Append(Event{Kind: EventStateChanged})

	rep, err := b.VerifyAll(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"verified":7,"nodes":[{"node":"a","verified":4},{"node":"b","verified":3}]}`
	if got := string(mustJSON(t, rep)); got != want {
		t.Fatalf("intact chains:\n got %s\nwant %s", got, want)
	}
	if v, at := a.VerifyChain(); v != 4 || at != -1 {
		t.Fatalf("a's memory chain: %d, %d", v, at)
	}
	if e := a.Query(EventQuery{Kinds: []EventKind{EventActionFailed}}); len(e) != 1 || e[0].Data["unencodable_data"] == nil {
		t.Fatalf("a NaN is kept as the encoding error: %+v", e)
	}
}

func TestClusterVerifyFindsTamperingInTheRightChain(t *testing.T) {
	edit := func(f func(e *Event)) func(r *store.EventRecord) {
		return func(r *store.EventRecord) {
			var e Event
			if err := json.Unmarshal(r.Body, &e); err != nil {
				panic(err)
			}
			f(&e)
			r.Body, _ = json.Marshal(&e)
		}
	}
	cases := []struct {
		name   string
		node   string
		seq    uint64
		tamper func(r *store.EventRecord)
		broken map[string]uint64 // per node, the first record that fails
		index  int               // the first failing record's index in the log
	}{
		{"edit data", "a", 2, edit(func(e *Event) { e.Data = map[string]any{"i": 99} }), map[string]uint64{"a": 2}, 1},
		{"edit kind in the body", "b", 1, edit(func(e *Event) { e.Kind = EventActionSucceeded }), map[string]uint64{"b": 1}, 2},
		{"column disagrees", "b", 2, func(r *store.EventRecord) { r.Hash = "00" }, map[string]uint64{"b": 2}, 3},
		// a's record under b's name breaks b's chain there, and a's at
		// the next link.
		{"moved to another daemon", "a", 3, func(r *store.EventRecord) { r.Node = "b" }, map[string]uint64{"a": 4, "b": 3}, 4},
		{"rehash an edit", "a", 2, func(r *store.EventRecord) {
			edit(func(e *Event) { e.ActionID = "evil"; e.Hash = eventHash(e) })(r)
			var e Event
			_ = json.Unmarshal(r.Body, &e)
			r.Hash = e.Hash
		}, map[string]uint64{"a": 3}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shared := storetest.NewEvents(nil)
			a, b := joined(t, shared, "a", 0), joined(t, shared, "b", 0)
			// The log's order: a1 a2 b1 b2 a3 a4 b3.
			a.Append(Event{Kind: EventStateChanged, Data: map[string]any{"i": 1}})
			a.Append(Event{Kind: EventStateChanged, Data: map[string]any{"i": 2}})
			b.Append(Event{Kind: EventStateChanged})
			b.Append(Event{Kind: EventStateChanged})
			a.Append(Event{Kind: EventStateChanged})
			a.Append(Event{Kind: EventStateChanged})
			b.Append(Event{Kind: EventStateChanged})
			if !shared.Tamper(tc.node, tc.seq, tc.tamper) {
				t.Fatal("nothing to tamper with")
			}
			rep, err := a.VerifyAll(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			broken := map[string]uint64{}
			for _, n := range rep.Nodes {
				if n.Tampered != nil {
					broken[n.Node] = *n.Tampered
				}
			}
			if !maps.Equal(broken, tc.broken) || rep.TamperedAt == nil || *rep.TamperedAt != tc.index {
				t.Fatalf("report: %s, want broken %v at index %d", mustJSON(t, rep), tc.broken, tc.index)
			}
		})
	}
}

func TestRestartedDaemonContinuesItsChain(t *testing.T) {
	shared := storetest.NewEvents(nil)
	first := joined(t, shared, "a", 0)
	b := joined(t, shared, "b", 0)
	first.Append(Event{Kind: EventProposalReceived})
	first.Append(Event{Kind: EventProposalFinished})
	b.Append(Event{Kind: EventProposalReceived})
	last := first.Query(EventQuery{Limit: 1})[0]

	again := joined(t, shared, "a", 0) // the same node, restarted
	again.Append(Event{Kind: EventProposalReceived})
	e := again.Query(EventQuery{})[0]
	if e.Seq != 3 || e.PrevHash != last.Hash || e.Node != "a" {
		t.Fatalf("restarted chain starts at seq %d after %q, want 3 after %q", e.Seq, e.PrevHash, last.Hash)
	}
	rep, err := b.VerifyAll(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if *rep.Verified != 4 || rep.TamperedAt != nil || rep.Nodes[0].Verified != 3 {
		t.Fatalf("after the restart: %s", mustJSON(t, rep))
	}
}

func TestAloneTheLogIsAsBefore(t *testing.T) {
	l := NewEventLog(0)
	l.EnableChain()
	l.Append(Event{Kind: EventProposalReceived})
	e := l.Query(EventQuery{})[0]
	if strings.Contains(string(mustJSON(t, e)), `"node"`) {
		t.Fatalf("an event of a lone daemon names a node: %s", mustJSON(t, e))
	}
	rep, err := l.VerifyAll(ctxT(t))
	if err != nil || string(mustJSON(t, rep)) != `{"verified":1}` {
		t.Fatalf("verify alone: %s, %v", mustJSON(t, rep), err)
	}
	l.events.at(0).Kind = EventActionFailed
	if rep, _ := l.VerifyAll(ctxT(t)); string(mustJSON(t, rep)) != `{"tampered_at":0}` {
		t.Fatalf("tampered alone: %s", mustJSON(t, rep))
	}
	s, err := l.SummaryAll(ctxT(t))
	if err != nil || s.SummarizedEvents != nil || strings.Contains(string(mustJSON(t, s)), "summarized") {
		t.Fatalf("summary alone: %+v, %v", s, err)
	}
	l.Follow(ctxT(t), FollowOptions{}) // returns at once
}

// feed collects what a subscriber is given.
type feed struct {
	mu  sync.Mutex
	got []Event
	ch  chan struct{}
}

func subscribe(l *EventLog) (*feed, func()) {
	f := &feed{ch: make(chan struct{}, 1)}
	_, cancel := l.Subscribe(EventQuery{}, func(e Event) {
		f.mu.Lock()
		f.got = append(f.got, e)
		f.mu.Unlock()
		select {
		case f.ch <- struct{}{}:
		default:
		}
	})
	return f, cancel
}

// await waits until the feed holds n events and returns them.
func (f *feed) await(t *testing.T, n int) []Event {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		f.mu.Lock()
		got := append([]Event(nil), f.got...)
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-f.ch:
		case <-deadline:
			t.Fatalf("the feed has %d events, want %d", len(got), n)
		}
	}
}

func TestFollowDeliversOtherDaemonsEventsOnceInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		bus  bool
	}{{"woken by the bus", true}, {"polling", false}} {
		t.Run(tc.name, func(t *testing.T) {
			bus := storetest.NewBus()
			shared := storetest.NewEvents(bus)
			a, b := joined(t, shared, "a", 0), joined(t, shared, "b", 0)
			// After b joined, before it follows: b's feed still gets it.
			a.Append(Event{Kind: EventStateChanged})
			o := FollowOptions{Every: time.Hour}
			if tc.bus {
				o.Bus = bus
			} else {
				o.Every = time.Millisecond
			}
			f, cancel := subscribe(b)
			defer cancel()
			follow(t, b, o)
			for i := 0; i < 50; i++ {
				a.Append(Event{Kind: EventActionSucceeded})
				if i%10 == 0 {
					b.Append(Event{Kind: EventActionStarted})
				}
			}
			got := f.await(t, 56)
			var seqA, seqB uint64
			for _, e := range got {
				switch e.Node {
				case "a":
					if e.Seq != seqA+1 {
						t.Fatalf("a's events out of order or twice: %d after %d", e.Seq, seqA)
					}
					seqA = e.Seq
				case "b":
					if e.Seq != seqB+1 {
						t.Fatalf("b's own events out of order or twice: %d after %d", e.Seq, seqB)
					}
					seqB = e.Seq
				}
			}
			if seqA != 51 || seqB != 5 || len(got) != 56 {
				t.Fatalf("delivered a up to %d, b up to %d, %d in all", seqA, seqB, len(got))
			}
		})
	}
}

func TestFollowReportsAnOutageAndCatchesUp(t *testing.T) {
	bus := storetest.NewBus()
	shared := storetest.NewEvents(bus)
	a, b := joined(t, shared, "a", 0), joined(t, shared, "b", 0)
	f, cancel := subscribe(b)
	defer cancel()
	errs := make(chan error, 16)
	shared.SetUnavailable(true)
	follow(t, b, FollowOptions{Bus: bus, Every: time.Hour, OnError: func(err error) {
		select {
		case errs <- err:
		default:
		}
	}})
	a.Append(Event{Kind: EventStateChanged})
	select {
	case err := <-errs:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("reported: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the failed read was not reported")
	}
	shared.SetUnavailable(false)
	a.Append(Event{Kind: EventStateChanged})
	got := f.await(t, 2)
	if got[0].Seq != 1 || got[1].Seq != 2 {
		t.Fatalf("after the outage: %+v", got)
	}
}

// discardLog is a ClusterLog whose Append does nothing, so a benchmark
// measures the engine's side of an append alone.
type discardLog struct{ *storetest.Events }

func (discardLog) Append(store.EventRecord) {}

// BenchmarkAppend compares an append alone (chained, in memory) with one of
// a daemon of a cluster, which also shapes the data as JSON and encodes the
// event for the durable log; compare the two in one run.
func BenchmarkAppend(b *testing.B) {
	data := map[string]any{"type": "tool_call", "tool": "echo", "duration_ms": 1.25, "cache_hit": true, "agent": "planner"}
	for _, mode := range []string{"alone", "cluster"} {
		b.Run(mode, func(b *testing.B) {
			l := NewEventLog(1024)
			if mode == "cluster" {
				if err := l.JoinCluster(context.Background(), "a", discardLog{storetest.NewEvents(nil)}); err != nil {
					b.Fatal(err)
				}
			} else {
				l.EnableChain()
			}
			b.ReportAllocs()
			for b.Loop() {
				l.Append(Event{Kind: EventActionSucceeded, ProposalID: "p", ActionID: "a", Connection: "c", Data: data})
			}
		})
	}
}
