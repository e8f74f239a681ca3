package host

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/storetest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

const testTimeout = 10 * time.Second

// joined is a registry joined to the other daemons of a test.
func joined(t *testing.T, node string, bus *storetest.Bus, opts Options) *Registry {
	t.Helper()
	r := New(opts)
	t.Cleanup(r.Join(Cluster{Node: node, Bus: bus}))
	return r
}

// feed is a subscriber whose events arrive on a channel.
type feed chan Event

func subscribe(t *testing.T, r *Registry, conn string, approver bool) feed {
	f := make(feed, 64)
	r.Subscribe(conn, approver, func(ev Event) { f <- ev })
	t.Cleanup(func() { r.Unsubscribe(conn) })
	return f
}

// next waits for the next event of kind, skipping others.
func (f feed) next(t *testing.T, kind string) Event {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		select {
		case ev := <-f:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event", kind)
		}
	}
}

func approvalIn(t *testing.T, ev Event) Approval {
	t.Helper()
	switch ap := ev.Payload["approval"].(type) {
	case Approval:
		return ap
	case map[string]any:
		id, _ := ap["id"].(string)
		status, _ := ap["status"].(string)
		node, _ := ap["node"].(string)
		return Approval{ID: id, Status: status, Node: node}
	}
	t.Fatalf("%s carries no approval: %+v", ev.Kind, ev.Payload)
	return Approval{}
}

func gateRequest() ApprovalRequest {
	return ApprovalRequest{Title: "tool 'deploy' needs full_access", Context: map[string]any{
		"source": "permission_gate", "fingerprint": "0123456789abcdef0123456789abcdef", "required_tier": "full_access",
		"preview": map[string]any{"env": "prod"},
	}}
}

func TestApprovalsRaisedOnOneDaemonAreSeenAndResolvedOnAnother(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	if b.HasApprovers() {
		t.Fatal("B counts approvers before anyone subscribed")
	}
	onA := subscribe(t, a, "dash-a", true)
	testwait.Eventually(t, testTimeout, "B counting A's approver", b.HasApprovers)

	ap, err := b.RaiseSystem(gateRequest())
	if err != nil {
		t.Fatal(err)
	}
	if ap.Node != "b" {
		t.Fatalf("raised on B: node %q", ap.Node)
	}
	ev := onA.next(t, KindApprovalRequested)
	if ev.Node != "b" || approvalIn(t, ev).ID != ap.ID {
		t.Fatalf("A's approval.requested: node %q %+v", ev.Node, ev.Payload)
	}
	list := a.Approvals()
	if len(list) != 1 || list[0].ID != ap.ID || list[0].Node != "b" || list[0].Status != ApprovalPending || list[0].Context["fingerprint"] != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("A lists %+v", list)
	}
	if evs := a.Events(0); len(evs) != 1 || evs[0].ID != ev.ID {
		t.Fatalf("A's ring %+v", evs)
	}

	// Resolved on A: its mirror is marked, and A itself emits nothing.
	got, err := a.Resolve("dash-a", ap.ID, true, "ship it", "conn:dash-a")
	if err != nil || got.Status != ApprovalApproved || got.ResolvedBy != "conn:dash-a" {
		t.Fatalf("resolve on A: %+v %v", got, err)
	}
	if _, err := a.Resolve("dash-a", ap.ID, true, "", "conn:dash-a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second resolve on A: %v", err)
	}
	// B resolves its row once the ledger tells it (its engine's part);
	// its approval.resolved reaches A's subscribers, once.
	if _, err := b.Resolve("", ap.ID, true, "ship it", "conn:dash-a"); err != nil {
		t.Fatal(err)
	}
	res := onA.next(t, KindApprovalResolved)
	if res.Node != "b" || approvalIn(t, res).Status != ApprovalApproved {
		t.Fatalf("A's approval.resolved %+v", res)
	}
	select {
	case extra := <-onA:
		t.Fatalf("A's subscriber got a further event: %+v", extra)
	default:
	}
}

func TestAClientRaisedApprovalStaysItsConnections(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	onA := subscribe(t, a, "dash-a", true)
	ap, err := b.RequestApproval("agent-conn", ApprovalRequest{Title: "may I?"})
	if err != nil {
		t.Fatal(err)
	}
	onA.next(t, KindApprovalRequested)
	if _, err := a.Resolve("dash-a", ap.ID, true, "", "conn:dash-a"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("A resolved another daemon's client approval: %v", err)
	}
}

func TestOtherHostEventsFanOutTrimmedWhenTooLarge(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	onA := subscribe(t, a, "dash-a", false)
	b.Notify("c1", NotifyRequest{Kind: "build.finished", Message: "green", Payload: map[string]any{"run": 7}})
	ev := onA.next(t, "build.finished")
	if ev.Node != "b" || ev.Message != "green" || ev.Payload["run"] != float64(7) {
		t.Fatalf("%+v", ev)
	}
	b.Notify("c1", NotifyRequest{Kind: "build.log", Payload: map[string]any{"log": strings.Repeat("x", 20_000)}})
	ev = onA.next(t, "build.log")
	if note, _ := ev.Payload["omitted"].(string); !strings.Contains(note, "host.events on daemon b") {
		t.Fatalf("a payload too large: %+v", ev.Payload)
	}
	// An approval too large keeps what deciding it needs.
	req := gateRequest()
	req.Context["preview"] = map[string]any{"script": strings.Repeat("y", 20_000)}
	req.Description = strings.Repeat("d", 20_000)
	ap, err := b.RaiseSystem(req)
	if err != nil {
		t.Fatal(err)
	}
	onA.next(t, KindApprovalRequested)
	m, ok := a.Approval(ap.ID)
	if !ok || m.Context["fingerprint"] != req.Context["fingerprint"] || m.Context["required_tier"] != "full_access" || m.Context["preview"] != nil || len(m.Description) > 600 {
		t.Fatalf("the trimmed mirror %+v", m)
	}
	if b.Dropped() != 0 {
		t.Fatalf("%d notifications lost", b.Dropped())
	}
}

func TestADaemonThatJoinsLearnsWhatAlreadyWaits(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	onA := subscribe(t, a, "dash-a", false)
	ap, err := b.RaiseSystem(gateRequest())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RaiseSystem(ApprovalRequest{Title: "decided already"}); err != nil {
		t.Fatal(err)
	}
	list := b.Approvals()
	if _, err := b.Resolve("", list[1].ID, false, "", "conn:x"); err != nil {
		t.Fatal(err)
	}
	subscribe(t, b, "dash-b", true)
	// Once A has B's last event, B's events are all published: C, joining
	// now, learns of B's approvals from B's answer to its hello alone.
	onA.next(t, KindApprovalResolved)
	c := joined(t, "c", bus, Options{})
	testwait.Eventually(t, testTimeout, "C learning of B's pending approval", func() bool {
		_, ok := c.Approval(ap.ID)
		return ok
	})
	testwait.Eventually(t, testTimeout, "C counting B's approver", c.HasApprovers)
	if n := len(c.Approvals()); n != 1 {
		t.Fatalf("C mirrors %d approvals; only the pending one is re-sent", n)
	}
}

func TestADaemonNotHeardFromIsForgotten(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	onA := subscribe(t, a, "dash-a", true)
	subscribe(t, b, "dash-b", true)
	testwait.Eventually(t, testTimeout, "A counting B's approver", func() bool {
		a.mu.Lock()
		defer a.unlock()
		return a.remoteApproversLocked()
	})
	ap, err := b.RaiseSystem(gateRequest())
	if err != nil {
		t.Fatal(err)
	}
	onA.next(t, KindApprovalRequested)
	a.sweep(now().Add(time.Duration(peerLife+1) * 5 * time.Second))
	ev := onA.next(t, KindApprovalResolved)
	if got := approvalIn(t, ev); got.ID != ap.ID || got.Status != ApprovalExpired || ev.Node != "a" {
		t.Fatalf("after B went quiet: node %q %+v", ev.Node, got)
	}
	a.mu.Lock()
	_, known := a.peers["b"]
	a.unlock()
	if known {
		t.Fatal("A still counts B")
	}
}

func TestAnApproverLeavingIsAnnounced(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	a.Subscribe("dash-a", true, func(Event) {})
	testwait.Eventually(t, testTimeout, "B counting A's approver", b.HasApprovers)
	a.DropConnection("dash-a")
	testwait.Eventually(t, testTimeout, "B learning that A's approver left", func() bool { return !b.HasApprovers() })
	// A watcher that may not approve does not count.
	a.Subscribe("view-a", false, func(Event) {})
	defer a.Unsubscribe("view-a")
	a.Notify("x", NotifyRequest{Kind: "marker"})
	testwait.Eventually(t, testTimeout, "B hearing from A", func() bool { return len(b.Events(0)) > 0 })
	if b.HasApprovers() {
		t.Fatal("B counts a watcher that may not approve")
	}
}

func TestMirrorsNeverCrowdOutThisDaemonsPendingApprovals(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{MaxApprovals: 2}), joined(t, "b", bus, Options{})
	onA := subscribe(t, a, "dash-a", false)
	remote, err := b.RaiseSystem(ApprovalRequest{Title: "from b"})
	if err != nil {
		t.Fatal(err)
	}
	onA.next(t, KindApprovalRequested)
	for _, title := range []string{"one", "two"} {
		if _, err := a.RaiseSystem(ApprovalRequest{Title: title}); err != nil {
			t.Fatalf("raise %s with a mirror kept: %v", title, err)
		}
	}
	if _, ok := a.Approval(remote.ID); ok {
		t.Fatal("the mirror was kept over a pending approval of A's own")
	}
	if _, err := b.RaiseSystem(ApprovalRequest{Title: "from b again"}); err != nil {
		t.Fatal(err)
	}
	onA.next(t, KindApprovalRequested)
	for _, ap := range a.Approvals() {
		if ap.Node != "a" {
			t.Fatalf("A made room for a mirror by dropping its own: %+v", a.Approvals())
		}
	}
}
