package file

import (
	"path/filepath"
	"testing"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/protocol"
)

func TestLedgerLastDecisionWinsAndPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.jsonl")
	l, _, err := OpenApprovals(path)
	if err != nil {
		t.Fatal(err)
	}
	a := &protocol.Action{ID: "one", Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "prod"}}
	b := &protocol.Action{ID: "two", Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "prod"}}
	fp := approvals.Fingerprint(a)
	if fp != approvals.Fingerprint(b) || len(fp) != 32 {
		t.Fatalf("the fingerprint must not depend on the action id: %s %s", fp, approvals.Fingerprint(b))
	}
	if fp == approvals.Fingerprint(&protocol.Action{Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "staging"}}) {
		t.Fatal("different parameters, same fingerprint")
	}
	if _, err := l.Record(approvals.Record{Fingerprint: fp, Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record(approvals.Record{Fingerprint: fp, Decision: approvals.Rejected, RequiredTier: "full_access", Reviewer: "conn:b", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record(approvals.Record{Fingerprint: fp, Decision: "maybe"}); err == nil {
		t.Fatal("an unknown decision was recorded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, rep, err := OpenApprovals(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	rec, ok := l.Decision(fp)
	if !ok || rec.Decision != approvals.Rejected || rec.Reviewer != "conn:b" || rep.Live != 1 || rep.Lines != 2 {
		t.Fatalf("after reopening: %+v %v %+v", rec, ok, rep)
	}
	if list := l.List(); len(list) != 1 || list[0].Reason != "no" {
		t.Fatalf("list %+v", list)
	}
}

func TestWatchWakesOnTheNextDecisionOnly(t *testing.T) {
	l, _, err := OpenApprovals(filepath.Join(t.TempDir(), "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	ch, stop := l.Watch("fp1")
	other, stopOther := l.Watch("fp2")
	defer stopOther()
	if _, err := l.Record(approvals.Record{Fingerprint: "fp1", Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.Decision != approvals.Approved || r.Reviewer != "conn:a" {
			t.Fatalf("woke with %+v", r)
		}
	default:
		t.Fatal("a recorded decision did not wake its watcher")
	}
	select {
	case r := <-other:
		t.Fatalf("another fingerprint's watcher woke: %+v", r)
	default:
	}
	stop()
	if _, err := l.Record(approvals.Record{Fingerprint: "fp1", Decision: approvals.Rejected, RequiredTier: "full_access", Reviewer: "conn:b"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		t.Fatalf("a stopped watcher woke: %+v", r)
	default:
	}
}
