package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder is a subscriber's send that keeps what it was handed.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (c *recorder) send(ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *recorder) got() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

func (c *recorder) kinds() []string {
	var out []string
	for _, ev := range c.got() {
		out = append(out, ev.Kind)
	}
	return out
}

func ids(evs []Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

func mustRegister(t *testing.T, r *Registry, conn, id string) Agent {
	t.Helper()
	a, err := r.RegisterAgent(conn, AgentRequest{ID: id, Name: "agent " + id, Kind: "cli"})
	if err != nil {
		t.Fatalf("register %q on %s: %v", id, conn, err)
	}
	return a
}

func TestSnapshotOfEmptyRegistryHasNoNulls(t *testing.T) {
	r := New(Options{})
	b, err := json.Marshal(r.Subscribe("c1", false, func(Event) {}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"agents":[],"approvals":[],"events":[]}`; string(b) != want {
		t.Fatalf("snapshot = %s, want %s", b, want)
	}
	r.Unsubscribe("c1")
}

func TestHasApprovers(t *testing.T) {
	r := New(Options{})
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"nobody subscribed", func() {}, false},
		{"a watcher only", func() { r.Subscribe("watch", false, func(Event) {}) }, false},
		{"an approver joins", func() { r.Subscribe("ui", true, func(Event) {}) }, true},
		{"the approver re-subscribes as a watcher", func() { r.Subscribe("ui", false, func(Event) {}) }, false},
		{"it subscribes as approver again", func() { r.Subscribe("ui", true, func(Event) {}) }, true},
		{"the approver unsubscribes", func() { r.Unsubscribe("ui") }, false},
	}
	for _, s := range steps {
		s.do()
		if got := r.HasApprovers(); got != s.want {
			t.Fatalf("%s: HasApprovers = %v, want %v", s.name, got, s.want)
		}
	}
}

func TestUnsubscribeStopsDelivery(t *testing.T) {
	r := New(Options{})
	var rec recorder
	r.Subscribe("c1", false, rec.send)
	r.Notify("c2", NotifyRequest{Message: "one"})
	if !r.Unsubscribe("c1") {
		t.Fatal("Unsubscribe of a subscribed connection reported false")
	}
	if r.Unsubscribe("c1") {
		t.Fatal("second Unsubscribe reported true")
	}
	r.Notify("c2", NotifyRequest{Message: "two"})
	if got := rec.got(); len(got) != 1 || got[0].Message != "one" {
		t.Fatalf("delivered %+v, want only the event before Unsubscribe", got)
	}
}

func TestResubscribeReplacesSend(t *testing.T) {
	r := New(Options{})
	var first, second recorder
	r.Subscribe("c1", false, first.send)
	r.Subscribe("c1", false, second.send)
	r.Notify("c2", NotifyRequest{Message: "after"})
	if len(first.got()) != 0 || len(second.got()) != 1 {
		t.Fatalf("first got %d, second got %d; want 0 and 1", len(first.got()), len(second.got()))
	}
	r.Unsubscribe("c1")
}

// Subscribing while producers run: the snapshot's events followed by the
// delivered ones are exactly the registry's event sequence, with no gap and
// no repeat, whatever the interleaving.
func TestSubscribeJoinsSnapshotAndEventsWithoutGapOrDuplicate(t *testing.T) {
	const producers, perProducer, rounds = 4, 200, 20
	for round := range rounds {
		r := New(Options{EventRing: producers*perProducer + 10})
		var wg sync.WaitGroup
		ready := make(chan struct{}, producers)
		for p := range producers {
			wg.Go(func() {
				for i := range perProducer {
					if i == perProducer/4 {
						ready <- struct{}{}
					}
					r.Notify(fmt.Sprintf("p%d", p), NotifyRequest{Message: fmt.Sprint(i)})
				}
			})
		}
		for range producers {
			<-ready
		}
		var rec recorder
		snap := r.Subscribe("sub", false, rec.send)
		wg.Wait()
		r.Notify("p0", NotifyRequest{Message: "last"})

		all := r.Events(producers*perProducer + 1)
		if len(all) != producers*perProducer+1 {
			t.Fatalf("round %d: ring holds %d events, want %d", round, len(all), producers*perProducer+1)
		}
		joined := append(ids(snap.Events), ids(rec.got())...)
		if !slices.Equal(joined, ids(all)) {
			t.Fatalf("round %d: snapshot (%d) + delivered (%d) = %d events, not the registry's %d in order",
				round, len(snap.Events), len(rec.got()), len(joined), len(all))
		}
		r.Unsubscribe("sub")
	}
}

// Every subscriber receives every event, in the order of the ring, while
// several connections mutate at once.
func TestEveryEventReachesEverySubscriberInOrder(t *testing.T) {
	r := New(Options{EventRing: 10000})
	subs := make([]*recorder, 3)
	for i := range subs {
		subs[i] = &recorder{}
		r.Subscribe(fmt.Sprintf("sub%d", i), i == 0, subs[i].send)
	}
	var wg sync.WaitGroup
	for p := range 4 {
		conn := fmt.Sprintf("p%d", p)
		wg.Go(func() {
			for i := range 50 {
				id := fmt.Sprintf("%s-a%d", conn, i)
				if _, err := r.RegisterAgent(conn, AgentRequest{ID: id, Name: id, Kind: "cli"}); err != nil {
					t.Errorf("register: %v", err)
					return
				}
				if _, err := r.SetStatus(conn, StatusRequest{AgentID: id, Status: StatusRunning}); err != nil {
					t.Errorf("set_status: %v", err)
					return
				}
				ap, err := r.RequestApproval(conn, ApprovalRequest{AgentID: id, Title: "go?"})
				if err != nil {
					t.Errorf("request_approval: %v", err)
					return
				}
				if _, err := r.Resolve(conn, ap.ID, true, "", "conn:"+conn); err != nil {
					t.Errorf("resolve: %v", err)
					return
				}
				if err := r.UnregisterAgent(conn, id); err != nil {
					t.Errorf("unregister: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := ids(r.Events(10000))
	if len(want) != 4*50*6 {
		t.Fatalf("ring holds %d events, want %d", len(want), 4*50*6)
	}
	for i, s := range subs {
		if got := ids(s.got()); !slices.Equal(got, want) {
			t.Fatalf("subscriber %d got %d events not in the ring's order (ring has %d)", i, len(got), len(want))
		}
	}
	for i := range subs {
		r.Unsubscribe(fmt.Sprintf("sub%d", i))
	}
}

func TestEventRingKeepsNewest(t *testing.T) {
	r := New(Options{EventRing: 3})
	for i := range 5 {
		r.Notify("c1", NotifyRequest{Message: fmt.Sprint(i)})
	}
	messages := func(evs []Event) string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.Message)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		limit int
		want  string
	}{
		{0, "2,3,4"}, // default 100, capped by the ring
		{-1, "2,3,4"},
		{2, "3,4"},
		{1, "4"},
		{10, "2,3,4"},
	}
	for _, c := range cases {
		if got := messages(r.Events(c.limit)); got != c.want {
			t.Errorf("Events(%d) = %s, want %s", c.limit, got, c.want)
		}
	}
	if got := messages(r.Subscribe("s", false, func(Event) {}).Events); got != "2,3,4" {
		t.Errorf("snapshot events = %s, want 2,3,4", got)
	}
	r.Unsubscribe("s")
}

func TestNotify(t *testing.T) {
	r := New(Options{})
	cases := []struct {
		name          string
		req           NotifyRequest
		wantKind      string
		wantRequested any
	}{
		{"default kind", NotifyRequest{Message: "hi"}, KindNotification, nil},
		{"own kind", NotifyRequest{Kind: "build.finished"}, "build.finished", nil},
		{"a registry kind is not forged", NotifyRequest{Kind: KindApprovalResolved, Payload: map[string]any{"x": 1}}, KindNotification, KindApprovalResolved},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := r.Notify("c1", c.req)
			if ev.Kind != c.wantKind || ev.Payload["requested_kind"] != c.wantRequested {
				t.Fatalf("event kind %q payload %v; want kind %q, requested_kind %v", ev.Kind, ev.Payload, c.wantKind, c.wantRequested)
			}
			if !strings.HasPrefix(ev.ID, "event-") {
				t.Fatalf("event id %q lacks the event- prefix", ev.ID)
			}
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"payload":null`) {
				t.Fatalf("payload is null on the wire: %s", b)
			}
		})
	}
}

func TestNotifyDoesNotModifyCallersPayload(t *testing.T) {
	r := New(Options{})
	payload := map[string]any{"x": 1}
	r.Notify("c1", NotifyRequest{Kind: KindAgentRegistered, Payload: payload})
	if _, ok := payload["requested_kind"]; ok {
		t.Fatal("Notify wrote into the caller's payload map")
	}
}

func TestDropConnection(t *testing.T) {
	r := New(Options{})
	var watchA, watchB recorder
	r.Subscribe("A", true, watchA.send)
	r.Subscribe("B", false, watchB.send)
	mustRegister(t, r, "A", "a2")
	mustRegister(t, r, "A", "a1")
	mustRegister(t, r, "B", "b1")
	raised, err := r.RequestApproval("A", ApprovalRequest{Title: "deploy?"})
	if err != nil {
		t.Fatal(err)
	}
	aDelivered := len(watchA.got())
	before := len(watchB.got())

	r.DropConnection("A")

	var unregistered []string
	var expired []string
	for _, ev := range watchB.got()[before:] {
		switch ev.Kind {
		case KindAgentUnregistered:
			a, ok := ev.Payload["agent"].(Agent)
			if !ok || a.ID != ev.AgentID {
				t.Fatalf("agent.unregistered payload.agent = %#v, want the agent %s", ev.Payload["agent"], ev.AgentID)
			}
			unregistered = append(unregistered, ev.AgentID)
		case KindApprovalResolved:
			expired = append(expired, ev.Payload["approval"].(Approval).ID)
		default:
			t.Fatalf("unexpected event %s on drop", ev.Kind)
		}
	}
	if !slices.Equal(unregistered, []string{"a1", "a2"}) {
		t.Fatalf("agent.unregistered for %v, want [a1 a2]", unregistered)
	}
	if !slices.Equal(expired, []string{raised.ID}) {
		t.Fatalf("approvals expired on drop: %v, want [%s]", expired, raised.ID)
	}
	if got, _ := r.Approval(raised.ID); got.Status != ApprovalExpired {
		t.Fatalf("A's pending approval is %s after drop, want expired", got.Status)
	}
	if agents := r.Agents(); len(agents) != 1 || agents[0].ID != "b1" {
		t.Fatalf("agents after drop = %+v, want only b1", agents)
	}
	if len(watchA.got()) != aDelivered {
		t.Fatal("the dropped connection's send was called during or after the drop")
	}
	if r.Unsubscribe("A") {
		t.Fatal("A is still subscribed after DropConnection")
	}
	if r.HasApprovers() {
		t.Fatal("the dropped approver still counts")
	}
	r.Unsubscribe("B")
}
