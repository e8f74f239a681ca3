package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// A quorum of two: a call of a matching tool needs an approval even below
// the grant; one person's approval (twice, or with a plain client's) leaves
// it at 1 of 2, the second person's allows it, and a rejection starts over;
// a supervisor's escalation to the ledger counts the same way.
func TestAQuorumCountsDistinctPeople(t *testing.T) {
	ledger := fileLedger(t)
	rt := newRuntime(t, Options{Approvals: ledger, Desk: host.New(host.Options{})})
	rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "quorum:deploy_*", Rule: policy.Quorum{Tool: "deploy_*", Approvers: 2}}))
	a := protocol.Action{ID: "a", Type: protocol.ActionToolCall, Tool: "deploy_docs", Parameters: map[string]any{"site": "docs"}}
	p := &protocol.ActionProposal{Actions: []protocol.Action{a}}
	row := func() PermissionRow {
		t.Helper()
		return rt.EvaluatePermissions(p, policy.FullAccess)[0] // granted everything: only the quorum asks
	}
	if r := row(); r.Decision != DecisionNeedsApproval || r.Quorum != 2 || !strings.Contains(r.Reason, "needs 2 distinct people") {
		t.Fatalf("before any approval: %+v", r)
	}
	fp, tier := approvals.Fingerprint(&a), rt.Classify(&a).Tier
	decide := func(who string, approved bool) approvals.Record {
		t.Helper()
		res, err := rt.ResolveApproval("c", Decision{Fingerprint: fp, Tier: tier, Approved: approved, Reviewer: who})
		if err != nil {
			t.Fatal(err)
		}
		return *res.Record
	}
	sub := &Submission{Proposal: p, Session: &Session{ID: "s"}}
	for _, who := range []string{"person:alice", "person:alice", "conn:c1"} {
		rec := decide(who, true)
		if r := row(); r.Decision != DecisionNeedsApproval || !strings.Contains(r.Reason, "1 of 2 approved so far") {
			t.Fatalf("after %s: %+v (record %+v)", who, r, rec)
		}
		if err := rt.escalated(ctxT(t), sub, "conn:sup", "check"); err == nil || !strings.Contains(err.Error(), "2 distinct people approve fingerprint") {
			t.Fatalf("an escalation after %s: %v", who, err)
		}
	}
	rec := decide("person:bob", true)
	if !slices.Equal(rec.Approvers, []string{"person:alice", "person:bob"}) {
		t.Fatalf("the record's approvers: %v", rec.Approvers)
	}
	if r := row(); r.Decision != DecisionAllow || r.Reason != "approved by person:alice, person:bob" {
		t.Fatalf("after two people: %+v", r)
	}
	if err := rt.escalated(ctxT(t), sub, "conn:sup", "check"); err != nil {
		t.Fatalf("an escalation with the quorum: %v", err)
	}
	decide("person:carol", false)
	decide("person:alice", true)
	if r := row(); r.Decision != DecisionNeedsApproval || !strings.Contains(r.Reason, "1 of 2 approved so far") {
		t.Fatalf("after a rejection and one approval: %+v", r)
	}
}
