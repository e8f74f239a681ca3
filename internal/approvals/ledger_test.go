package approvals

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func TestLedgerLastDecisionWinsAndPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.jsonl")
	l, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a := &protocol.Action{ID: "one", Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "prod"}}
	b := &protocol.Action{ID: "two", Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "prod"}}
	fp := Fingerprint(a)
	if fp != Fingerprint(b) || len(fp) != 32 {
		t.Fatalf("the fingerprint must not depend on the action id: %s %s", fp, Fingerprint(b))
	}
	if fp == Fingerprint(&protocol.Action{Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "staging"}}) {
		t.Fatal("different parameters, same fingerprint")
	}
	if _, err := l.Record(Record{Fingerprint: fp, Decision: Approved, RequiredTier: "full_access", Reviewer: "conn:a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record(Record{Fingerprint: fp, Decision: Rejected, RequiredTier: "full_access", Reviewer: "conn:b", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record(Record{Fingerprint: fp, Decision: "maybe"}); err == nil {
		t.Fatal("an unknown decision was recorded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, rep, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	rec, ok := l.Decision(fp)
	if !ok || rec.Decision != Rejected || rec.Reviewer != "conn:b" || rep.Live != 1 || rep.Lines != 2 {
		t.Fatalf("after reopening: %+v %v %+v", rec, ok, rep)
	}
	if list := l.List(); len(list) != 1 || list[0].Reason != "no" {
		t.Fatalf("list %+v", list)
	}
}

func TestWatchWakesOnTheNextDecisionOnly(t *testing.T) {
	l, _, err := Open(filepath.Join(t.TempDir(), "approvals.jsonl"))
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
	if _, err := l.Record(Record{Fingerprint: "fp1", Decision: Approved, RequiredTier: "full_access", Reviewer: "conn:a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.Decision != Approved || r.Reviewer != "conn:a" {
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
	if _, err := l.Record(Record{Fingerprint: "fp1", Decision: Rejected, RequiredTier: "full_access", Reviewer: "conn:b"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		t.Fatalf("a stopped watcher woke: %+v", r)
	default:
	}
	l.Watchers.mu.Lock()
	left := len(l.Watchers.set)
	l.Watchers.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d fingerprints watched, want only fp2", left)
	}
}

// Fingerprints are stored in the ledger: the same operation must keep its
// fingerprint from one version of the daemon to the next.
func TestFingerprintIsStable(t *testing.T) {
	a := &protocol.Action{Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{
		"env": "prod<&>", "n": json.Number("3"), "list": []any{1.5, nil, true}, "é": map[string]any{}}}
	if got, want := Fingerprint(a), "5dc0348b021d17d43b700f54501b541c"; got != want {
		t.Errorf("fingerprint %s, want %s", got, want)
	}
	if got, want := Fingerprint(&protocol.Action{Type: protocol.ActionStateWrite}), "81628a2723e6a1aab4b3fc696f0a87c2"; got != want {
		t.Errorf("fingerprint of an action without parameters %s, want %s", got, want)
	}
}
