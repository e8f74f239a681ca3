package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/flow"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// laggingLedger is a ledger shared with other daemons whose local copy has
// not yet heard of their decisions: those are in elsewhere until Refresh
// reads them.
type laggingLedger struct {
	*file.Approvals
	elsewhere map[string]approvals.Record
	refreshed []string
	fail      error
}

func (l *laggingLedger) Refresh(_ context.Context, fingerprints ...string) error {
	l.refreshed = append(l.refreshed, fingerprints...)
	if l.fail != nil {
		return l.fail
	}
	for _, fp := range fingerprints {
		if r, ok := l.elsewhere[fp]; ok {
			if _, err := l.Record(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// laggingRuntime is a Runtime over a laggingLedger on a fresh journal, and
// a session on it.
func laggingRuntime(t *testing.T) (*laggingLedger, *Runtime, *Session) {
	t.Helper()
	ledger := fileLedger(t)
	l := &laggingLedger{Approvals: ledger, elsewhere: map[string]approvals.Record{}}
	rt := newRuntime(t, Options{Approvals: l})
	return l, rt, rt.OpenSession("s", nil)
}

// TestPermissionGateRefreshesTheSharedLedgerBeforeRefusing: an approval
// committed on another daemon that the local copy lacks still admits, read
// from the store by the gate; an admission needing no approval does not
// ask the store; a store that cannot be read refuses, saying so.
func TestPermissionGateRefreshesTheSharedLedgerBeforeRefusing(t *testing.T) {
	l, rt, s := laggingRuntime(t)
	gate := permissionGate{rt}
	submission := func(a protocol.Action) *Submission {
		return &Submission{Proposal: &protocol.ActionProposal{ID: "p", Actions: []protocol.Action{a}}, Session: s}
	}
	deploy := func(env string) protocol.Action {
		return protocol.Action{ID: "d", Type: protocol.ActionToolCall, Tool: "deploy_service", Parameters: map[string]any{"env": env}}
	}

	approved := deploy("prod")
	fp := approvals.Fingerprint(&approved)
	l.elsewhere[fp] = approvals.Record{Fingerprint: fp, Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:elsewhere"}
	if err := gate.Admit(context.Background(), submission(approved)); err != nil {
		t.Fatalf("approved on another daemon: %v", err)
	}
	if !slices.Equal(l.refreshed, []string{fp}) {
		t.Fatalf("refreshed %v, want %s", l.refreshed, fp)
	}

	// Approved here now: no new decision needed, nothing read.
	l.refreshed = nil
	if err := gate.Admit(context.Background(), submission(approved)); err != nil || len(l.refreshed) != 0 {
		t.Fatalf("an admission needing no new decision: %v, refreshed %v", err, l.refreshed)
	}

	l.fail = fmt.Errorf("read the decisions: %w", store.ErrUnavailable)
	err := gate.Admit(context.Background(), submission(deploy("staging-prod")))
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "needs full_access") || !strings.Contains(err.Error(), "the shared store is unavailable") {
		t.Fatalf("with the store down: %v", err)
	}
}

// TestLedgerDecisionReadsThroughForEveryDoor: the doors that ask the ledger
// outside the permission gate (a checkpoint restore, an ordering
// escalation, a supervisor's escalation) see an approval committed on
// another daemon that the local copy lacks, do not ask the store for one
// the copy settles, and say so when the store cannot be read.
func TestLedgerDecisionReadsThroughForEveryDoor(t *testing.T) {
	l, rt, s := laggingRuntime(t)
	restoreOf := func(id string) string {
		op := protocol.Action{ID: "restore-" + id, Type: protocol.ActionToolCall, Tool: "checkpoint.restore", Parameters: map[string]any{"checkpoint_id": id}}
		return approvals.Fingerprint(&op)
	}

	fp := restoreOf("cp1")
	l.elsewhere[fp] = approvals.Record{Fingerprint: fp, Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:elsewhere"}
	if err := rt.approveRestore(context.Background(), s, "cp1"); err != nil {
		t.Fatalf("restore approved on another daemon: %v", err)
	}
	if !slices.Equal(l.refreshed, []string{fp}) {
		t.Fatalf("refreshed %v, want %s", l.refreshed, fp)
	}

	l.refreshed = nil
	if err := rt.approveRestore(context.Background(), s, "cp1"); err != nil || len(l.refreshed) != 0 {
		t.Fatalf("a restore the local copy approves: %v, refreshed %v", err, l.refreshed)
	}

	// An ordering escalation and a supervisor's escalation.
	deploy := protocol.Action{ID: "d", Type: protocol.ActionToolCall, Tool: "deploy_service", Parameters: map[string]any{"env": "prod"}}
	sub := &Submission{Proposal: &protocol.ActionProposal{ID: "p", Actions: []protocol.Action{deploy}}, Session: s}
	hits := []flow.OrderingHit{{Step: 0, Rule: flow.Ordering{First: "read_secrets", Then: "deploy_service"}, FirstAt: "r"}}
	ofp := orderingFingerprint(hits[0].Rule, &deploy)
	dfp := approvals.Fingerprint(&deploy)
	l.elsewhere[ofp] = approvals.Record{Fingerprint: ofp, Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:elsewhere"}
	l.elsewhere[dfp] = approvals.Record{Fingerprint: dfp, Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:elsewhere"}
	l.refreshed = nil
	if err := rt.escalateOrderings(context.Background(), sub, hits); err != nil || !slices.Equal(l.refreshed, []string{ofp}) {
		t.Fatalf("an ordering approved on another daemon: %v, refreshed %v", err, l.refreshed)
	}
	l.refreshed = nil
	if err := rt.escalated(context.Background(), sub, "sup", "needs a human"); err != nil || !slices.Equal(l.refreshed, []string{dfp}) {
		t.Fatalf("an escalation approved on another daemon: %v, refreshed %v", err, l.refreshed)
	}

	l.fail = fmt.Errorf("read the decisions: %w", store.ErrUnavailable)
	err := rt.approveRestore(context.Background(), s, "cp2")
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "cannot be told") {
		t.Fatalf("restore with the store down: %v", err)
	}
	other := protocol.Action{ID: "d", Type: protocol.ActionToolCall, Tool: "deploy_service", Parameters: map[string]any{"env": "staging"}}
	sub = &Submission{Proposal: &protocol.ActionProposal{ID: "p2", Actions: []protocol.Action{other}}, Session: s}
	err = rt.escalateOrderings(context.Background(), sub, hits)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "is a forbidden ordering, and whether it was approved cannot be told") {
		t.Fatalf("ordering with the store down: %v", err)
	}
	err = rt.escalated(context.Background(), sub, "sup", "needs a human")
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "supervisor sup escalated to the approval ledger (needs a human), and it cannot be read") {
		t.Fatalf("supervisor's escalation with the store down: %v", err)
	}
}

// TestTheGateMessageListsAtMostTwentyActions: with nobody watching, a
// proposal of 1,000 actions needing approval and 1,000 denied is refused
// with a message that lists the first 20 and says how many more there
// are, not all 2,000: the message is the error of every action of the
// proposal, so listing all of them would grow the reply with the square of
// the proposal.
func TestTheGateMessageListsAtMostTwentyActions(t *testing.T) {
	l, rt, s := laggingRuntime(t)
	rejected := protocol.Action{Type: protocol.ActionToolCall, Tool: "deploy_service", Parameters: map[string]any{"env": "staging"}}
	if _, err := l.Record(approvals.Record{Fingerprint: approvals.Fingerprint(&rejected), Decision: approvals.Rejected, RequiredTier: "full_access", Reviewer: "conn:person"}); err != nil {
		t.Fatal(err)
	}
	var acts []protocol.Action
	for i := range 1000 {
		x := rejected
		x.ID = fmt.Sprintf("x%d", i)
		acts = append(acts,
			protocol.Action{ID: fmt.Sprintf("d%d", i), Type: protocol.ActionToolCall, Tool: "deploy_service", Parameters: map[string]any{"env": "prod"}}, x)
	}
	err := permissionGate{rt}.Admit(context.Background(), &Submission{Proposal: &protocol.ActionProposal{ID: "p", Actions: acts}, Session: s})
	if err == nil {
		t.Fatal("2,000 actions needing approval or denied were admitted")
	}
	msg := err.Error()
	t.Logf("the refusal of 2,000 actions: %d bytes, the error of each", len(msg))
	listed := strings.Count(msg, "action '")
	if listed != maxNamesInMessage || !strings.Contains(msg, "action 'd0' needs full_access") || !strings.Contains(msg, "action 'x9'") ||
		!strings.Contains(msg, fmt.Sprintf("and %d more actions", 2000-maxNamesInMessage)) || !strings.Contains(msg, "permission.evaluate") {
		t.Fatalf("the message lists %d actions (%d bytes): %.600s…", listed, len(msg), msg)
	}
}

// fileLedger is a file store's approval ledger in t's temporary directory,
// closed when t ends.
func fileLedger(t *testing.T) *file.Approvals {
	t.Helper()
	ledger, _, err := file.OpenApprovals(filepath.Join(t.TempDir(), "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	return ledger
}
