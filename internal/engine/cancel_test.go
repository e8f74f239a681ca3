package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// hangingExecutor signals each call on started, then waits for its context
// and fails with the cause.
func hangingExecutor(started chan<- string) ToolExecutor {
	return execFunc(func(ctx context.Context, call ToolCall) (any, error) {
		started <- call.ActionID
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
}

// runningIDs is how many runs of id the registry holds.
func runningIDs(rt *Runtime, id string) int {
	rt.running.mu.Lock()
	defer rt.running.mu.Unlock()
	n := 0
	for rp := rt.running.byID[id]; rp != nil; rp = rp.next {
		n++
	}
	return n
}

func TestCancelStopsOnlyTheCallersRunsOfARepeatedID(t *testing.T) {
	started := make(chan string, 3)
	rt := newRuntime(t, Options{})
	sessions := map[string]*Session{"A": rt.OpenSession("A", hangingExecutor(started)), "B": rt.OpenSession("B", hangingExecutor(started))}
	for _, s := range sessions {
		if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "hang"}}); err != nil {
			t.Fatal(err)
		}
	}
	type done struct {
		key string
		res *protocol.ProposalResult
	}
	results := map[string]chan done{"A": make(chan done, 2), "B": make(chan done, 1)}
	for n, who := range []string{"A", "A", "B"} {
		key := fmt.Sprintf("k%d", n)
		p := decode(t, fmt.Sprintf(`{"id":"dup","actions":[
			{"id":"w","type":"state_write","parameters":{"key":%q,"value":1}},
			{"id":"t","type":"tool_call","tool":"hang","dependencies":["w"]},
			{"id":"after","type":"tool_call","tool":"hang","dependencies":["t"]}]}`, key))
		go func() {
			res, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: sessions[who]})
			if err != nil {
				t.Error(err)
			}
			results[who] <- done{key, res}
		}()
	}
	for range 3 {
		<-started
	}

	if rt.Cancel("dup", "", "C", false) {
		t.Fatal("a connection that submitted no run of 'dup' cancelled one")
	}
	if rt.Cancel("unknown", "", "A", false) {
		t.Fatal("an unknown id was cancelled")
	}
	if !rt.Cancel("dup", "stop now", "A", false) {
		t.Fatal("the submitter could not cancel its runs")
	}
	check := func(d done, reason string) {
		t.Helper()
		want := "cancelled: " + reason
		if r := resultByID(t, d.res, "t"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), want) {
			t.Fatalf("running action: %s %q, want failed with %q", r.Status, r.ErrorText(), want)
		}
		if r := resultByID(t, d.res, "after"); r.Status != protocol.StatusSkipped || !strings.Contains(r.ErrorText(), want) {
			t.Fatalf("action not started: %s %q, want skipped with %q", r.Status, r.ErrorText(), want)
		}
		if stateHas(t, rt, "", d.key) {
			t.Fatalf("the cancelled run's write of %s was not rolled back", d.key)
		}
	}
	check(<-results["A"], "stop now")
	check(<-results["A"], "stop now")
	if n := runningIDs(rt, "dup"); n != 1 {
		t.Fatalf("after A's runs returned the registry holds %d runs of 'dup', want B's one", n)
	}
	if rt.Cancel("dup", "again", "A", false) {
		t.Fatal("A cancelled B's run")
	}
	if !rt.Cancel("dup", "", "C", true) {
		t.Fatal("a host could not cancel another connection's run")
	}
	check(<-results["B"], DefaultCancelReason)
	if n := runningIDs(rt, "dup"); n != 0 {
		t.Fatalf("every run returned and the registry still holds %d", n)
	}
	if rt.Cancel("dup", "", "B", true) {
		t.Fatal("a finished id was cancelled")
	}
	evs := rt.Events.Query(EventQuery{Kinds: []EventKind{EventProposalCancelled}})
	if len(evs) != 3 || evs[0].Data["by"] != "C" || evs[0].Data["reason"] != DefaultCancelReason || evs[0].Connection != "B" {
		t.Fatalf("proposal_cancelled events: %+v", evs)
	}
}

func TestARunIsUnregisteredWhenSubmitReturns(t *testing.T) {
	rt, s := openRuntime(t, Options{}, &countingExecutor{}, "read")
	p := decode(t, `{"id":"once","actions":[{"id":"a","type":"tool_call","tool":"read"}]}`)
	if _, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s}); err != nil {
		t.Fatal(err)
	}
	if n := runningIDs(rt, "once"); n != 0 {
		t.Fatalf("a returned Submit left %d runs registered", n)
	}
	if rt.Cancel("once", "", s.ID, false) {
		t.Fatal("a finished proposal was cancelled")
	}
}

func TestCancellingTheLastRunningActionRollsBack(t *testing.T) {
	started := make(chan string, 1)
	rt, s := openRuntime(t, Options{}, hangingExecutor(started), "hang")
	p := decode(t, `{"id":"last","actions":[
		{"id":"w","type":"state_write","parameters":{"key":"k","value":1}},
		{"id":"t","type":"tool_call","tool":"hang","dependencies":["w"]}]}`)
	done := make(chan *protocol.ProposalResult, 1)
	go func() {
		res, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	if !rt.Cancel("last", "", s.ID, false) {
		t.Fatal("not cancelled")
	}
	if r := resultByID(t, <-done, "t"); r.Status != protocol.StatusFailed {
		t.Fatalf("t: %s %q", r.Status, r.ErrorText())
	}
	if stateHas(t, rt, "", "k") {
		t.Fatal("a proposal whose last action failed on cancel kept its write")
	}
}

// TestRunningListsTheRunsOfAnIDInOrder: runs of one id are taken in the
// order they started, and each untracks itself wherever it is in the list.
func TestRunningListsTheRunsOfAnIDInOrder(t *testing.T) {
	var rg running
	noop := func(error) {}
	a, b, c := rg.track("p", "A", noop), rg.track("p", "B", noop), rg.track("p", "C", noop)
	other := rg.track("q", "A", noop)
	sessions := func() string {
		var out []string
		for rp := rg.byID["p"]; rp != nil; rp = rp.next {
			out = append(out, rp.session)
		}
		return strings.Join(out, ",")
	}
	if got := sessions(); got != "A,B,C" {
		t.Fatalf("tracked %s, want A,B,C", got)
	}
	if got := rg.take("p", "x", true); len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Fatalf("take returned %v, want the three runs in order", got)
	}
	rg.untrack("p", b)
	if got := sessions(); got != "A,C" {
		t.Fatalf("after the middle one left: %s", got)
	}
	rg.untrack("p", a)
	if got := sessions(); got != "C" {
		t.Fatalf("after the first one left: %s", got)
	}
	rg.untrack("p", c)
	if _, ok := rg.byID["p"]; ok {
		t.Fatal("the id is still held with no run left")
	}
	rg.untrack("q", other)
	if len(rg.byID) != 0 {
		t.Fatalf("left %d ids", len(rg.byID))
	}
}
