package engine

import (
	"math"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// Budget is the longest a proposal may take when every wait it is allowed
// runs to its end: the supervision timeout, the approval timeout (once, and
// again per action with references, when there is a ledger for approvals
// that wait for a person), then, for every tool call, each
// attempt's timeout and rate-limit wait plus the backoff before each retry,
// and a grace so that per-action timeouts fire first. It is computed from the
// validated proposal (defaults applied) and saturates rather than overflow.
func (rt *Runtime) Budget(sub *Submission) time.Duration {
	total := addSat(rt.opts.SupervisionTimeout, rt.opts.ProposalGrace)
	if rt.opts.Approvals != nil {
		total = addSat(total, rt.opts.ApprovalTimeout) // the gate may park once
	}
	for i := range sub.Proposal.Actions {
		a := &sub.Proposal.Actions[i]
		total = addSat(total, rt.actionBudget(sub, a))
		total = addSat(total, rt.awaitBudget(a))
		if rt.opts.Approvals != nil && hasReferences(a) {
			total = addSat(total, rt.opts.ApprovalTimeout) // it may park again once resolved
		}
	}
	return total
}

// hasReferences reports whether an action's parameters or effects name an
// earlier action's output.
func hasReferences(a *protocol.Action) bool {
	refs := map[string]bool{}
	referencedIDs(a.Parameters, refs)
	referencedIDs(a.ExpectedEffects, refs)
	return len(refs) > 0
}

// actionBudget is one action's share of Budget.
func (rt *Runtime) actionBudget(sub *Submission, a *protocol.Action) time.Duration {
	if a.Type != protocol.ActionToolCall {
		return 0
	}
	perAttempt := rt.actionTimeout(a)
	if t, ok := sub.Session.Tools.Lookup(a.Tool); ok {
		perAttempt = addSat(perAttempt, t.tokenEvery)
	}
	attempts := uint64(rt.attempts(a))
	total := mulSat(perAttempt, attempts)
	for n := 1; uint64(n) < attempts; n++ {
		total = addSat(total, rt.backoff(n))
	}
	return total
}

// awaitBudget is how long an action may wait for the streams it awaits:
// its timeout_ms, or the default tool timeout.
func (rt *Runtime) awaitBudget(a *protocol.Action) time.Duration {
	if len(a.Await) == 0 {
		return 0
	}
	return rt.actionTimeout(a)
}

// addSat is a+b for non-negative durations, saturating.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat is d·n for a non-negative duration, saturating.
func mulSat(d time.Duration, n uint64) time.Duration {
	if n != 0 && uint64(d) > uint64(math.MaxInt64)/n {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}
