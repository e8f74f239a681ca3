package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
)

// ResolveApproval decides a gate's row on the ledger at its operation's
// tier, marks it once, and refuses what it cannot decide, recording
// nothing: an unknown row, another connection's question, any decision
// without a ledger.
func TestResolveApprovalDecidesEachKindOfRowOnce(t *testing.T) {
	ledger := fileLedger(t)
	desk := host.New(host.Options{})
	rt := newRuntime(t, Options{Approvals: ledger, Desk: desk})
	if rt.Desk() != desk {
		t.Fatal("the runtime does not serve the registry it was given")
	}
	recorded := func() int { return len(rt.Events.Query(EventQuery{Kinds: []EventKind{EventApprovalRecorded}})) }

	op := host.Operation{Fingerprint: "0123456789abcdef0123456789abcdef", RequiredTier: "full_access"}
	gate, err := desk.RaiseGate(host.ApprovalRequest{Title: "tool 'deploy' needs full_access"}, op)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.ResolveApproval("c1", Decision{ApprovalID: gate.ID, Approved: true, Reviewer: "conn:c1", Notes: "release window"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record == nil || res.Record.Fingerprint != op.Fingerprint || res.Record.RequiredTier != "full_access" || res.Record.Decision != approvals.Approved || res.Record.Reason != "release window" {
		t.Fatalf("the ledger record %+v", res.Record)
	}
	if res.Approval == nil || res.Approval.Status != host.ApprovalApproved || res.Approval.ResolvedBy != "conn:c1" {
		t.Fatalf("the row %+v", res.Approval)
	}
	if again, err := rt.ResolveApproval("c1", Decision{ApprovalID: gate.ID, Approved: true, Reviewer: "conn:c1"}); err != nil || again.Record != nil || again.Approval.ResolvedAt == nil || !again.Approval.ResolvedAt.Equal(*res.Approval.ResolvedAt) {
		t.Fatalf("the same decision again: %+v %v", again, err)
	}
	if _, err := rt.ResolveApproval("c2", Decision{ApprovalID: gate.ID, Approved: false, Reviewer: "conn:c2"}); !errors.Is(err, host.ErrInvalid) {
		t.Fatalf("another person deciding a resolved row: %v", err)
	}
	if n := recorded(); n != 1 {
		t.Fatalf("%d decisions recorded, want 1", n)
	}

	question, err := desk.RequestApproval("c1", host.ApprovalRequest{Title: "may I?"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ResolveApproval("c2", Decision{ApprovalID: question.ID, Approved: true, Reviewer: "conn:c2"}); !errors.Is(err, host.ErrNotOwner) {
		t.Fatalf("another connection's question: %v", err)
	}
	if res, err := rt.ResolveApproval("c1", Decision{ApprovalID: question.ID, Approved: true, Reviewer: "conn:c1"}); err != nil || res.Record != nil || res.Approval.Status != host.ApprovalApproved {
		t.Fatalf("its own question: %+v %v", res, err)
	}
	if _, err := rt.ResolveApproval("c1", Decision{ApprovalID: "approval-nope", Approved: true, Reviewer: "conn:c1"}); !errors.Is(err, host.ErrNotFound) || !strings.Contains(err.Error(), "approval-nope") {
		t.Fatalf("an unknown row: %v", err)
	}
	if n := recorded(); n != 1 {
		t.Fatalf("%d decisions recorded after the refusals, want 1", n)
	}

	off := newRuntime(t, Options{})
	if _, err := off.ResolveApproval("c1", Decision{Fingerprint: op.Fingerprint, Tier: policy.FullAccess, Approved: true, Reviewer: "conn:c1"}); err == nil || !strings.Contains(err.Error(), "no approval ledger") {
		t.Fatalf("a decision without a ledger: %v", err)
	}
}

// A reviewer who approved a row and then rejects it is told the row is
// decided, not answered as if the rejection had been taken.
func TestResolveApprovalRefusesTheSameReviewersOppositeDecision(t *testing.T) {
	ledger := fileLedger(t)
	desk := host.New(host.Options{})
	rt := newRuntime(t, Options{Approvals: ledger, Desk: desk})
	gate, err := desk.RaiseGate(host.ApprovalRequest{Title: "tool 'deploy' needs full_access"}, host.Operation{Fingerprint: "0123456789abcdef0123456789abcdef", RequiredTier: "full_access"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ResolveApproval("c1", Decision{ApprovalID: gate.ID, Approved: true, Reviewer: "conn:c1"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.ResolveApproval("c1", Decision{ApprovalID: gate.ID, Approved: false, Reviewer: "conn:c1"})
	if !errors.Is(err, host.ErrInvalid) {
		t.Fatalf("rejecting a row the same reviewer approved: %+v %v", res.Approval, err)
	}
}
