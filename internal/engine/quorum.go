package engine

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/protocol"
)

// Quorums. An operator rule ([[quorum]] tool = "deploy_*" approvers = 2)
// makes every call of a matching tool need a recorded approval, and that
// approval counts only once as many distinct people (person:NAME) have
// approved the same operation at the same tier. Each person's approval is
// added to the ledger record's approvers (recordDecision), so the count is
// kept where the decision is, on every daemon sharing the ledger; the
// operation stays parked until the count is reached, and any rejection
// ends it.

// quorumRefresh bounds the look at the shared ledger before a person's
// approval is added to the ones already recorded.
const quorumRefresh = 5 * time.Second

// quorumOf is how many distinct people must approve a, by the operator's
// quorum rules; 0 when no rule matches.
func (rt *Runtime) quorumOf(a *protocol.Action) int {
	if a.Type != protocol.ActionToolCall {
		return 0
	}
	return rt.OperatorPolicies().Quorum(a.Tool)
}

// quorumMet reports whether rec's approvers reach quorum. Up to one, any
// approval counts, as without a rule.
func quorumMet(rec approvals.Record, quorum int) bool {
	return quorum <= 1 || len(people(rec.Approvers)) >= quorum
}

// people is the distinct people among approvers, in order.
func people(approvers []string) []string {
	var out []string
	for _, a := range approvers {
		if strings.HasPrefix(a, protocol.PersonPrefix) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// countApprovers sets rec.Approvers: the people who approved the same
// fingerprint at the same tier while that approval stood, with rec's
// reviewer added when a person (the same person twice counts once). A
// rejection, or an approval past its time or uses, starts the count again.
// The caller holds rt.decideMu, so two people deciding on this daemon at
// once both count.
func (rt *Runtime) countApprovers(rec *approvals.Record) {
	if rec.Decision != approvals.Approved {
		return
	}
	led := rt.opts.Approvals
	ctx, cancel := context.WithTimeout(context.Background(), quorumRefresh)
	_ = led.Refresh(ctx, rec.Fingerprint) // unread, the local copy counts
	cancel()
	var approvers []string
	if prev, ok := led.Decision(rec.Fingerprint); ok && prev.Decision == approvals.Approved && prev.RequiredTier == rec.RequiredTier && approvals.Live(prev, time.Now()) {
		approvers = people(prev.Approvers)
	}
	if strings.HasPrefix(rec.Reviewer, protocol.PersonPrefix) && !slices.Contains(approvers, rec.Reviewer) {
		approvers = append(approvers, rec.Reviewer)
	}
	rec.Approvers = approvers
}
