package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/policy"
)

// escalation is one action a gate puts to a person: why, and the
// fingerprint a decision about it is recorded under.
type escalation struct {
	step        int // the action's index in the proposal
	why         string
	fingerprint string
	signal      string // for the approval's signals
}

// escalate asks a person about each item. The question is an approval on
// the ledger, at full_access, under the item's fingerprint; a decision
// already recorded answers it. A rejection blocks the proposal.
func (rt *Runtime) escalate(ctx context.Context, sub *Submission, items []escalation) error {
	var rows []PermissionRow
	var todo, denied []string
	for _, it := range items {
		a := &sub.Proposal.Actions[it.step]
		row := PermissionRow{
			ActionID: a.ID, Tool: a.Tool, Fingerprint: it.fingerprint, Decision: DecisionNeedsApproval,
			Required: policy.FullAccess, Reversibility: rt.Classify(a).Reversibility, Granted: sub.Session.Tier(),
			Reason: it.why, Signals: []string{it.signal},
		}
		rec, ok, err := rt.ledgerDecision(ctx, row.Fingerprint, policy.FullAccess)
		if err != nil {
			return fmt.Errorf("action '%s': %s, and whether it was approved cannot be told: %w", a.ID, it.why, err)
		}
		if ok {
			if rec.Decision == approvals.Rejected {
				denied = append(denied, fmt.Sprintf("action '%s': %s, and it was rejected by %s (fingerprint %s)", a.ID, it.why, rec.Reviewer, row.Fingerprint))
				continue
			}
			if approvedAtOrAbove(rec, policy.FullAccess) {
				continue
			}
		}
		rows = append(rows, row)
		todo = append(todo, fmt.Sprintf("action '%s': %s: approve fingerprint %s with permission.approve {fingerprint: \"%s\", required_tier: \"full_access\"}",
			a.ID, it.why, row.Fingerprint, row.Fingerprint))
	}
	if len(denied) > 0 {
		return errors.New(strings.Join(denied, "; "))
	}
	if len(rows) == 0 {
		return nil
	}
	if !rt.canPark() || sub.noPark {
		return fmt.Errorf("escalated to approval: %s", strings.Join(todo, "; "))
	}
	refused, err := rt.awaitApprovals(ctx, sub, rows, proposalParams(sub.Proposal))
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		reasons := make([]string, 0, len(refused))
		for _, r := range rows {
			if reason, ok := refused[r.ActionID]; ok {
				reasons = append(reasons, reason+" ("+r.Reason+")")
			}
		}
		return errors.New(strings.Join(reasons, "; "))
	}
	return nil
}
