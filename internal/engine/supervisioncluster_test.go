package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/storetest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// registryView is the test's supervisor registry as one daemon uses it.
type registryView struct{ *storetest.Member }

func (v registryView) Alive(ctx context.Context) ([]RemoteSupervisor, error) {
	rows, err := v.Rows(ctx)
	out := make([]RemoteSupervisor, 0, len(rows))
	for _, r := range rows {
		out = append(out, RemoteSupervisor(r))
	}
	return out, err
}

// daemon is one Runtime joined to the others of a test.
type daemon struct {
	node string
	rt   *Runtime
	s    *Session
	exec *countingExecutor
}

func newDaemon(t *testing.T, node string, bus *storetest.Bus, reg *storetest.Supervisors, timeout time.Duration) *daemon {
	t.Helper()
	exec := &countingExecutor{}
	rt, s := openRuntime(t, Options{SupervisionTimeout: timeout}, exec, "stage_site", "read")
	leave, err := rt.Supervisors.JoinCluster(ctxT(t), SupervisionCluster{Node: node, Bus: bus, Registry: registryView{reg.For(node)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leave)
	return &daemon{node: node, rt: rt, s: s, exec: exec}
}

func (d *daemon) calls() int {
	d.exec.mu.Lock()
	defer d.exec.mu.Unlock()
	return d.exec.calls
}

// refresh makes d read the registry now.
func (d *daemon) refresh(t *testing.T) {
	t.Helper()
	if err := d.rt.Supervisors.Refresh(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// supervise subscribes conn on d; its intents arrive on the channel.
func (d *daemon) supervise(t *testing.T, conn string, f SupervisionFilter) <-chan Intent {
	t.Helper()
	ch := make(chan Intent, 16)
	if _, err := d.rt.Supervisors.Subscribe(ctxT(t), conn, f, func(in Intent) { ch <- in }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.rt.Supervisors.Unsubscribe(conn) })
	return ch
}

type submitOutcome struct {
	res *protocol.ProposalResult
	err error
}

// submit runs a proposal of the given actions on d's session, on its own
// goroutine.
func (d *daemon) submit(t *testing.T, actions ...protocol.Action) <-chan submitOutcome {
	for i := range actions {
		if actions[i].Parameters == nil {
			actions[i].Parameters = map[string]any{}
		}
		if actions[i].FailureBehavior == "" {
			actions[i].FailureBehavior = protocol.FailAbort
		}
	}
	ch := make(chan submitOutcome, 1)
	ctx := ctxT(t)
	go func() {
		res, err := d.rt.Submit(ctx, &Submission{Proposal: &protocol.ActionProposal{ID: "p-" + d.node, Actions: actions}, Session: d.s})
		ch <- submitOutcome{res, err}
	}()
	return ch
}

func stage() protocol.Action {
	return protocol.Action{ID: "s", Type: protocol.ActionToolCall, Tool: "stage_site", Parameters: map[string]any{"site": "blog"}}
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("no %s within %s", what, testTimeout)
		panic("unreachable")
	}
}

// result waits for a submission's one result.
func result(t *testing.T, ch <-chan submitOutcome) protocol.ActionResult {
	t.Helper()
	o := await(t, ch, "proposal result")
	if o.err != nil || len(o.res.Results) != 1 {
		t.Fatalf("submit: %v %+v", o.err, o.res)
	}
	return o.res.Results[0]
}

func pendingIDs(d *daemon) []string {
	var ids []string
	for _, in := range d.rt.Supervisors.Pending() {
		ids = append(ids, in.ID+"@"+in.Node)
	}
	return ids
}

func TestASupervisorOnOneDaemonAllowsAnIntentRaisedOnAnother(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	intents := a.supervise(t, "sup-a", SupervisionFilter{Tools: []string{"stage_site"}})
	b.refresh(t)

	// B has no supervisor of its own: it parks for A's.
	ch := b.submit(t, stage())
	in := await(t, intents, "intent on A")
	if in.Node != "b" || in.ProposalID != "p-b" || len(in.Actions) != 1 || in.Actions[0].Tool != "stage_site" || in.ActionsOmitted != 0 {
		t.Fatalf("intent %+v", in)
	}
	if raw := mustJSON(t, in); strings.Contains(string(raw), "blog") {
		t.Fatalf("an intent carried a parameter value across daemons: %s", raw)
	}
	if b.calls() != 0 || b.rt.Status().ParkedIntents != 1 {
		t.Fatalf("B ran (%d calls) or did not park (%d)", b.calls(), b.rt.Status().ParkedIntents)
	}
	want := []string{in.ID + "@b"}
	if got := pendingIDs(a); !slices.Equal(got, want) {
		t.Fatalf("A lists %v, want %v", got, want)
	}
	if got := pendingIDs(b); !slices.Equal(got, want) {
		t.Fatalf("B lists %v, want %v", got, want)
	}
	if err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "allow"}); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); r.Status != protocol.StatusSucceeded || b.calls() != 1 {
		t.Fatalf("allowed on A: %s %q, %d calls", r.Status, r.ErrorText(), b.calls())
	}
	// A heard that it settled before its decide returned.
	if got := pendingIDs(a); len(got) != 0 {
		t.Fatalf("A still lists %v", got)
	}
	evs := b.rt.Events.Query(EventQuery{Kinds: []EventKind{EventSupervisionDecision}})
	if len(evs) != 1 || evs[0].Data["decision"] != "allow" || evs[0].Data["reviewer"] != "conn:sup-a" {
		t.Fatalf("B's audit %+v", evs)
	}
	// A second decision is refused as on one daemon.
	err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "allow"})
	if err == nil || !strings.Contains(err.Error(), "is not pending for you") {
		t.Fatalf("late decision: %v", err)
	}
}

func TestASupervisorOnOneDaemonDeniesAnIntentRaisedOnAnother(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	intents := a.supervise(t, "sup-a", SupervisionFilter{})
	b.refresh(t)
	ch := b.submit(t, stage())
	in := await(t, intents, "intent on A")
	if err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "deny", Reason: "not during the freeze"}); err != nil {
		t.Fatal(err)
	}
	r := result(t, ch)
	if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "denied by supervisor conn:sup-a: not during the freeze") || b.calls() != 0 {
		t.Fatalf("denied on A: %s %q, %d calls", r.Status, r.ErrorText(), b.calls())
	}
	// A reason too long for a notification is refused before it is sent.
	ch = b.submit(t, stage())
	in = await(t, intents, "second intent on A")
	err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "deny", Reason: strings.Repeat("r", maxRemoteReason+1)})
	if err == nil || !strings.Contains(err.Error(), "shorten it") {
		t.Fatalf("an overlong reason: %v", err)
	}
	if err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "allow"}); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); r.Status != protocol.StatusSucceeded {
		t.Fatalf("allowed after the refused reason: %q", r.ErrorText())
	}
}

func TestAnIntentThatTimesOutOnItsDaemonIsDroppedEverywhere(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, 50*time.Millisecond)
	intents := a.supervise(t, "sup-a", SupervisionFilter{})
	b.refresh(t)
	ch := b.submit(t, stage())
	in := await(t, intents, "intent on A")
	r := result(t, ch)
	if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "fail-closed") || b.calls() != 0 {
		t.Fatalf("timeout on B: %s %q", r.Status, r.ErrorText())
	}
	testwait.Eventually(t, testTimeout, "A dropping B's timed-out intent", func() bool { return len(a.rt.Supervisors.Pending()) == 0 })
	err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "allow"})
	if err == nil || !strings.Contains(err.Error(), "is not pending for you") {
		t.Fatalf("decision after the timeout: %v", err)
	}
}

func TestDecisionsRacingOnTwoDaemonsLandOnce(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	c := newDaemon(t, "c", bus, reg, testTimeout)
	onA := a.supervise(t, "sup-a", SupervisionFilter{})
	onC := c.supervise(t, "sup-c", SupervisionFilter{})
	b.refresh(t)
	for round := range 5 {
		ch := b.submit(t, stage())
		inA, inC := await(t, onA, "intent on A"), await(t, onC, "intent on C")
		if inA.ID != inC.ID {
			t.Fatalf("A and C were sent different intents: %s %s", inA.ID, inC.ID)
		}
		errs := make(chan error, 2)
		go func() {
			errs <- a.rt.Supervisors.Decide(ctxT(t), "sup-a", inA.ID, SupervisionDecision{Kind: "allow"})
		}()
		go func() {
			errs <- c.rt.Supervisors.Decide(ctxT(t), "sup-c", inC.ID, SupervisionDecision{Kind: "deny", Reason: "from C"})
		}()
		e1, e2 := await(t, errs, "a decision"), await(t, errs, "the other decision")
		landed := 0
		for _, err := range []error{e1, e2} {
			switch {
			case err == nil:
				landed++
			case !strings.Contains(err.Error(), "is not pending for you"):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if landed != 1 {
			t.Fatalf("round %d: %d decisions landed (%v, %v)", round, landed, e1, e2)
		}
		r := result(t, ch)
		var last Event
		for _, e := range b.rt.Events.Query(EventQuery{Kinds: []EventKind{EventSupervisionDecision}}) {
			if e.Data["intent_id"] == inA.ID {
				last = e
			}
		}
		switch last.Data["reviewer"] {
		case "conn:sup-a":
			if r.Status != protocol.StatusSucceeded {
				t.Fatalf("round %d: A's allow landed, yet %s %q", round, r.Status, r.ErrorText())
			}
		case "conn:sup-c":
			if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "from C") {
				t.Fatalf("round %d: C's deny landed, yet %s %q", round, r.Status, r.ErrorText())
			}
		default:
			t.Fatalf("round %d: reviewer %v", round, last.Data["reviewer"])
		}
	}
}

func TestALocalAndARemoteSupervisorBothReceiveAndTheFirstDecides(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	onA := a.supervise(t, "sup-a", SupervisionFilter{})
	onB := b.supervise(t, "sup-b", SupervisionFilter{})
	b.refresh(t)
	ch := b.submit(t, stage())
	in := await(t, onB, "intent on B")
	if got := await(t, onA, "intent on A"); got.ID != in.ID {
		t.Fatalf("A got %s, B %s", got.ID, in.ID)
	}
	if err := b.rt.Supervisors.Decide(ctxT(t), "sup-b", in.ID, SupervisionDecision{Kind: "allow"}); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); r.Status != protocol.StatusSucceeded {
		t.Fatalf("%q", r.ErrorText())
	}
	// A learns that a decision made on B landed.
	err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "deny", Reason: "late"})
	if err == nil || !strings.Contains(err.Error(), "is not pending for you") {
		t.Fatalf("A's late decision: %v", err)
	}
}

func TestWithTheOnlySupervisorGoneAProposalRunsUnsupervised(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	if _, err := a.rt.Supervisors.Subscribe(ctxT(t), "sup-a", SupervisionFilter{}, func(Intent) {}); err != nil {
		t.Fatal(err)
	}
	// B hears of it on the bus, and re-reads the registry by itself.
	testwait.Eventually(t, testTimeout, "B learning of A's supervisor", func() bool { return b.rt.Supervisors.watching.Load() == 1 })
	if !a.rt.Supervisors.Unsubscribe("sup-a") {
		t.Fatal("A's supervisor was not subscribed")
	}
	if got := reg.Conns("a"); len(got) != 0 {
		t.Fatalf("A's subscription is still recorded: %v", got)
	}
	testwait.Eventually(t, testTimeout, "B learning that A's supervisor left", func() bool { return b.rt.Supervisors.watching.Load() == 0 })
	if r := result(t, b.submit(t, stage())); r.Status != protocol.StatusSucceeded || b.calls() != 1 {
		t.Fatalf("unsupervised: %s %q", r.Status, r.ErrorText())
	}
	if n := len(b.rt.Events.Query(EventQuery{Kinds: []EventKind{EventSupervisionDecision}})); n != 0 {
		t.Fatalf("%d supervision decisions for an unsupervised proposal", n)
	}
}

func TestADaemonMendsItsOwnRowsThatNoConnectionBacks(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	// Left by a crash of A, or by a store that was down when the
	// connection closed.
	if err := (registryView{reg.For("a")}).Register(ctxT(t), "ghost", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	b.refresh(t)
	if b.rt.Supervisors.watching.Load() != 1 {
		t.Fatal("B does not see the row")
	}
	a.refresh(t)
	if got := reg.Conns("a"); len(got) != 0 {
		t.Fatalf("A kept rows no connection backs: %v", got)
	}
	// And a subscription whose row went missing gets it back.
	a.supervise(t, "sup-a", SupervisionFilter{Tools: []string{"read"}})
	if err := (registryView{reg.For("a")}).Unregister(ctxT(t), "sup-a"); err != nil {
		t.Fatal(err)
	}
	a.refresh(t)
	if got := reg.Conns("a"); !slices.Equal(got, []string{"sup-a"}) {
		t.Fatalf("A's rows after mending: %v", got)
	}
	b.refresh(t)
	// Its filter crossed too: B's stage_site proposal is not for it.
	if r := result(t, b.submit(t, stage())); r.Status != protocol.StatusSucceeded {
		t.Fatalf("%q", r.ErrorText())
	}
}

func TestAnIntentThatCannotReachItsOnlySupervisorsIsRejected(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	a.supervise(t, "sup-a", SupervisionFilter{})
	b.refresh(t)
	bus.Fail(errors.New("connection refused"))
	defer bus.Fail(nil)
	r := result(t, b.submit(t, stage()))
	if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "could not be sent to them") || !strings.Contains(r.ErrorText(), "fail-closed") || b.calls() != 0 {
		t.Fatalf("%s %q", r.Status, r.ErrorText())
	}
	if n := b.rt.Status().ParkedIntents; n != 0 {
		t.Fatalf("%d intents left parked", n)
	}
}

func TestASubscriptionTheStoreCannotRecordIsRefused(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	reg.Fail(errors.New("connection refused"))
	_, err := a.rt.Supervisors.Subscribe(ctxT(t), "sup-a", SupervisionFilter{}, func(Intent) {})
	if !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), "connection refused") || a.rt.Supervisors.Subscribed("sup-a") {
		t.Fatalf("%v", err)
	}
	if err := a.rt.Supervisors.Refresh(ctxT(t)); !errors.Is(err, ErrCluster) {
		t.Fatalf("refresh with the store down: %v", err)
	}
}

func TestAnIntentTooLargeForOneNotificationListsItsFirstActions(t *testing.T) {
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	a := newDaemon(t, "a", bus, reg, testTimeout)
	b := newDaemon(t, "b", bus, reg, testTimeout)
	// The tool A watches is only in the last action, which does not fit.
	intents := a.supervise(t, "sup-a", SupervisionFilter{Tools: []string{"stage_site"}})
	b.refresh(t)
	var actions []protocol.Action
	for i := range 200 {
		actions = append(actions, protocol.Action{ID: fmt.Sprintf("read-%03d-%s", i, strings.Repeat("x", 40)), Type: protocol.ActionToolCall, Tool: "read"})
	}
	actions = append(actions, stage())
	ch := b.submit(t, actions...)
	in := await(t, intents, "intent on A")
	if in.ActionsOmitted == 0 || len(in.Actions)+in.ActionsOmitted != len(actions) || in.Actions[0].ID != actions[0].ID {
		t.Fatalf("%d actions listed, %d omitted, of %d", len(in.Actions), in.ActionsOmitted, len(actions))
	}
	if err := a.rt.Supervisors.Decide(ctxT(t), "sup-a", in.ID, SupervisionDecision{Kind: "allow"}); err != nil {
		t.Fatal(err)
	}
	o := await(t, ch, "proposal result")
	if o.err != nil || o.res.Cost.ActionsExecuted != len(actions) {
		t.Fatalf("%v %+v", o.err, o.res)
	}
	// B keeps the whole intent.
	if b.rt.Status().ParkedIntents != 0 {
		t.Fatal("still parked")
	}
}

func TestFitIntentRefusesWhatCannotFit(t *testing.T) {
	in := Intent{ID: "i", ProposalID: strings.Repeat("p", maxBusPayload)}
	if _, err := fitIntent(supervisionMsg{Type: msgIntent, Intent: &in}); err == nil || !strings.Contains(err.Error(), "even without its actions") {
		t.Fatalf("%v", err)
	}
}

// BenchmarkUnsupervisedSubmit compares a proposal's path through the gates
// on a daemon alone and on one joined to others, with nobody supervising
// anywhere: the gate reads one counter either way.
func BenchmarkUnsupervisedSubmit(b *testing.B) {
	run := func(b *testing.B, join bool) {
		exec := &countingExecutor{}
		rt := newRuntime(b, Options{})
		s := rt.OpenSession("s1", exec)
		defer rt.CloseSession(s)
		if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "read"}}); err != nil {
			b.Fatal(err)
		}
		if join {
			leave, err := rt.Supervisors.JoinCluster(context.Background(), SupervisionCluster{Node: "a", Bus: storetest.NewBus(), Registry: registryView{storetest.NewSupervisors().For("a")}})
			if err != nil {
				b.Fatal(err)
			}
			defer leave()
		}
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			p := &protocol.ActionProposal{Actions: []protocol.Action{{ID: "r", Type: protocol.ActionToolCall, Tool: "read", Parameters: map[string]any{}, FailureBehavior: protocol.FailAbort}}}
			if _, err := rt.Submit(ctx, &Submission{Proposal: p, Session: s}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("alone", func(b *testing.B) { run(b, false) })
	b.Run("joined", func(b *testing.B) { run(b, true) })
}
