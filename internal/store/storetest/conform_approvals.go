package storetest

import (
	"fmt"
	"testing"

	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// decision is a decision on fp.
func decision(fp, d, reviewer string) protocol.ApprovalRecord {
	return protocol.ApprovalRecord{Fingerprint: fp, Decision: d, RequiredTier: "full_access", Reviewer: reviewer, Reason: "reason of " + reviewer}
}

// sameDecision compares what a caller recorded with what the ledger holds.
func sameDecision(got, want protocol.ApprovalRecord) bool {
	return got.Fingerprint == want.Fingerprint && got.Decision == want.Decision && got.RequiredTier == want.RequiredTier &&
		got.Reviewer == want.Reviewer && got.Reason == want.Reason && got.RecordedAt.Equal(want.RecordedAt)
}

// received waits for a decision on ch.
func received(t *testing.T, ch <-chan protocol.ApprovalRecord, what string) protocol.ApprovalRecord {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-ctx(t).Done():
		t.Fatalf("%s: no decision arrived", what)
		return protocol.ApprovalRecord{}
	}
}

func testApprovals(t *testing.T, open Open, opts Options) {
	t.Run("RecordReadWatchList", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		l := d.Approvals
		if _, err := l.Record(decision("fp-1", "maybe", "conn:x")); err == nil {
			t.Fatal("a decision that is neither approved nor rejected was recorded")
		}
		if _, ok := l.Decision("fp-1"); ok {
			t.Fatal("the refused decision is in the ledger")
		}
		ch, stop := l.Watch("fp-1")
		defer stop()
		first, err := l.Record(decision("fp-1", "approved", "conn:x"))
		if err != nil {
			t.Fatal(err)
		}
		if first.RecordedAt.IsZero() {
			t.Fatal("Record returned no RecordedAt")
		}
		if got := received(t, ch, "the watch of fp-1"); !sameDecision(got, first) {
			t.Fatalf("the watch got %+v, want %+v", got, first)
		}
		if got, ok := l.Decision("fp-1"); !ok || !sameDecision(got, first) {
			t.Fatalf("Decision(fp-1) = %+v %v, want %+v", got, ok, first)
		}
		if _, ok := l.Decision("fp-unknown"); ok {
			t.Fatal("a fingerprint never decided has a decision")
		}
		stop()
		second, err := l.Record(decision("fp-1", "rejected", "conn:y"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 0 {
			t.Fatalf("a stopped watch got %+v", <-ch)
		}
		if got, _ := l.Decision("fp-1"); !sameDecision(got, second) {
			t.Fatalf("the last decision wins: got %+v, want %+v", got, second)
		}
		third, err := l.Record(decision("fp-2", "approved", "conn:z"))
		if err != nil {
			t.Fatal(err)
		}
		list := l.List()
		if len(list) != 2 || !sameDecision(list[0], third) || !sameDecision(list[1], second) {
			t.Fatalf("List = %+v; want the current decision of fp-2, then of fp-1 (newest first)", list)
		}
		if err := l.Refresh(ctx(t), "fp-1", "fp-unknown"); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if got, _ := l.Decision("fp-1"); !sameDecision(got, second) {
			t.Fatalf("after Refresh, Decision(fp-1) = %+v, want %+v", got, second)
		}

		d = b.restart(d)
		if got, ok := d.Approvals.Decision("fp-1"); !ok || !sameDecision(got, second) {
			t.Fatalf("after a restart, Decision(fp-1) = %+v %v, want %+v", got, ok, second)
		}
		if list := d.Approvals.List(); len(list) != 2 {
			t.Fatalf("after a restart, List = %+v, want two decisions", list)
		}
	})

	// Decisions on one fingerprint that race: each is recorded, one is
	// current, the same one on every read and after a restart, and a
	// watch started before them receives one of them.
	t.Run("RacingDecisionsOnOneFingerprint", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		ch, stop := d.Approvals.Watch("fp")
		defer stop()
		recorded := make([]protocol.ApprovalRecord, racers)
		errs := make([]error, racers)
		race(racers, func(i int) {
			verdict := "approved"
			if i%2 == 1 {
				verdict = "rejected"
			}
			recorded[i], errs[i] = d.Approvals.Record(decision("fp", verdict, fmt.Sprintf("conn:%d", i)))
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("decision %d: %v", i, err)
			}
		}
		isOneOf := func(r protocol.ApprovalRecord) bool {
			for _, want := range recorded {
				if sameDecision(r, want) {
					return true
				}
			}
			return false
		}
		if got := received(t, ch, "the watch of fp"); !isOneOf(got) {
			t.Fatalf("the watch got %+v, none of the decisions recorded", got)
		}
		cur, ok := d.Approvals.Decision("fp")
		if !ok || !isOneOf(cur) {
			t.Fatalf("Decision(fp) = %+v %v, none of the decisions recorded", cur, ok)
		}
		if list := d.Approvals.List(); len(list) != 1 || !sameDecision(list[0], cur) {
			t.Fatalf("List = %+v, want only the current decision %+v", list, cur)
		}
		d = b.restart(d)
		if got, _ := d.Approvals.Decision("fp"); !sameDecision(got, cur) {
			t.Fatalf("after a restart the current decision is %+v, before it was %+v", got, cur)
		}
	})

	if !opts.Shared {
		return
	}
	// A decision recorded on one daemon reaches the other's watch and
	// Decision; Refresh reads it at once.
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a"), b.open("node-b")
		ch, stop := other.Approvals.Watch("fp")
		defer stop()
		rec, err := a.Approvals.Record(decision("fp", "approved", "conn:a"))
		if err != nil {
			t.Fatal(err)
		}
		if got := received(t, ch, "node-b's watch of a decision on node-a"); !sameDecision(got, rec) {
			t.Fatalf("node-b's watch got %+v, want %+v", got, rec)
		}
		second, err := a.Approvals.Record(decision("fp", "rejected", "conn:a"))
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Approvals.Refresh(ctx(t), "fp"); err != nil {
			t.Fatal(err)
		}
		if got, _ := other.Approvals.Decision("fp"); !sameDecision(got, second) {
			t.Fatalf("after Refresh node-b's decision is %+v, want %+v", got, second)
		}
		testwait.Eventually(t, suiteTimeout, "node-b's List showing node-a's decision", func() bool {
			list := other.Approvals.List()
			return len(list) == 1 && sameDecision(list[0], second)
		})
	})
}
