package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Approvals that wait for a person. When the permission gate finds actions
// that need an approval and some connection that may approve is watching
// (a host subscriber), the proposal parks instead of being rejected: each
// distinct operation (fingerprint) is raised on the approval desk with a
// preview a person can read, and the proposal waits, up to ApprovalTimeout,
// for a decision on the durable ledger. Whatever door records it
// (host.resolve_approval, permission.approve/reject, the CLI: see
// ResolveApproval), the ledger record is what releases the action. With
// nobody watching, the gate rejects at once, as it always has.

// Event kinds of parked approvals.
const (
	EventApprovalWaiting EventKind = "approval_waiting" // an operation was raised for a person
	EventApprovalSettled EventKind = "approval_settled" // it was approved, denied or expired
)

// StoppingReason is why a wait for a person ended when the daemon began to
// stop: the proposal's answer and the expired request both say it.
const StoppingReason = "the daemon is stopping (an approval recorded now or after it restarts is kept on the ledger)"

// Desk is the host registry where actions needing approval wait for a
// person (Options.Desk): the rpc layer serves the host.* methods from it.
func (rt *Runtime) Desk() *host.Registry { return rt.opts.Desk }

// canPark reports whether a needs_approval row may wait for a person.
func (rt *Runtime) canPark() bool {
	return rt.opts.Approvals != nil && rt.opts.Desk.HasApprovers()
}

// waitingOp is one operation (fingerprint) waiting for a decision.
type waitingOp struct {
	row      PermissionRow
	actions  []string // the ids of this proposal's actions with this fingerprint
	approval host.Approval
	decision *approvals.Record // nil until decided
}

// awaitApprovals parks the needs_approval rows of sub until a person decides
// each of them, or ApprovalTimeout passes, or ctx ends. It returns the
// actions whose operation was rejected, with the reason; an error means the
// wait ended undecided, and names what to approve.
func (rt *Runtime) awaitApprovals(ctx context.Context, sub *Submission, rows []PermissionRow, params func(actionID string) map[string]any) (denied map[string]string, err error) {
	ops, order := groupByFingerprint(rows)
	var waits waitSpans
	defer func() { waits.endAll(err) }()
	type decided struct {
		fp  string
		rec approvals.Record
	}
	settled := make(chan decided, len(order))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each operation is watched before the ledger is read, so a decision
	// recorded in between is not missed; those still undecided are then
	// counted against max_approvals_per_proposal before any is raised.
	type watch struct {
		ch   <-chan approvals.Record
		stop func()
	}
	watches := map[string]watch{}
	var raise []string
	for _, fp := range order {
		op := ops[fp]
		ch, stop := rt.opts.Approvals.Watch(fp)
		// A decision recorded before the watch began is in the ledger.
		if rec, ok := rt.opts.Approvals.Decision(fp); ok && rt.settles(rec, op.row) {
			stop()
			op.decision = &rec
			continue
		}
		watches[fp] = watch{ch, stop}
		raise = append(raise, fp)
	}
	if err := sub.raisedTally().add(raise, rt.opts.MaxApprovalsPerProposal); err != nil {
		for _, w := range watches {
			w.stop()
		}
		return nil, fmt.Errorf("proposal '%s' %w", sub.Proposal.ID, err)
	}
	by := sub.Session.requester()
	for _, fp := range raise {
		op, w := ops[fp], watches[fp]
		op.approval, err = rt.opts.Desk.RaiseGateFor(approvalRequest(sub, op, params(op.actions[0])), gateOperation(fp, op.row, params(op.actions[0])), &by)
		if err != nil {
			for _, rest := range raise {
				if ops[rest].approval.ID == "" {
					watches[rest].stop()
				}
			}
			rt.expireAll(ops, order, "the request could not be raised")
			return nil, fmt.Errorf("action '%s' needs %s, and it could not be put to a person: %w", op.actions[0], op.row.Required, err)
		}
		rt.Events.Append(Event{Kind: EventApprovalWaiting, ProposalID: sub.Proposal.ID, ActionID: op.actions[0], Connection: sub.Session.ID, Data: map[string]any{
			"fingerprint": fp, "approval_id": op.approval.ID, "tool": op.row.Tool, "required": op.row.Required.String(),
		}})
		if rt.tracing() {
			waits.start(rt, ctx, sub.Proposal.ID, fp, op)
		}
		if rec, ok := rt.opts.Approvals.Decision(fp); ok && rt.counts(rec, op.row) {
			_, _ = rt.opts.Desk.Count(op.approval.ID, people(rec.Approvers))
		}
		go func() {
			defer w.stop()
			for {
				select {
				case rec := <-w.ch:
					if rt.settles(rec, op.row) {
						settled <- decided{fp, rec}
						return
					}
					if rt.counts(rec, op.row) {
						// Pending or decided elsewhere meanwhile: the ledger rules.
						_, _ = rt.opts.Desk.Count(op.approval.ID, people(rec.Approvers))
					}
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	timer := time.NewTimer(rt.opts.ApprovalTimeout)
	defer timer.Stop()
	for pending := countUndecided(ops); pending > 0; pending-- {
		select {
		case d := <-settled:
			op := ops[d.fp]
			op.decision = &d.rec
			// The door that named this row may have settled it already.
			if _, err := rt.settleRow("", op.approval.ID, d.rec.Decision == approvals.Approved, d.rec.Reason, d.rec.Reviewer); err != nil && !errors.Is(err, host.ErrInvalid) {
				return nil, fmt.Errorf("settle approval %s: %w", op.approval.ID, err)
			}
			data := map[string]any{"fingerprint": d.fp, "approval_id": op.approval.ID, "decision": d.rec.Decision, "reviewer": d.rec.Reviewer}
			if d.rec.Reason != "" {
				data["reason"] = d.rec.Reason
			}
			rt.waitSettledAfterRecord()
			rt.Events.Append(Event{Kind: EventApprovalSettled, ProposalID: sub.Proposal.ID, ActionID: op.actions[0], Connection: sub.Session.ID, Data: data})
			waits.end(d.fp, d.rec)
		case <-timer.C:
			return nil, rt.undecided(sub, ops, order, fmt.Sprintf("nobody decided within %s (approval_timeout)", rt.opts.ApprovalTimeout))
		case <-rt.stopping:
			return nil, rt.undecided(sub, ops, order, StoppingReason)
		case <-ctx.Done():
			return nil, rt.undecided(sub, ops, order, fmt.Sprintf("the proposal stopped while waiting: %v", context.Cause(ctx)))
		}
	}
	denied = map[string]string{}
	for _, fp := range order {
		op := ops[fp]
		var reason string
		switch {
		case op.decision.Decision == approvals.Rejected:
			reason = fmt.Sprintf("rejected by %s", op.decision.Reviewer)
			if op.decision.Reason != "" {
				reason += ": " + op.decision.Reason
			}
		default:
			// An approval releases the wait only with a use of it left.
			rec, ok, err := rt.opts.Approvals.Use(ctx, fp, time.Now())
			if err != nil {
				return nil, store.Wrap("the approval ledger could not count the use of an approval", err)
			}
			if ok {
				rt.approvalUsed(sub, op.actions[0], rec)
				continue
			}
			reason = fmt.Sprintf("the approval by %s expired or its uses were spent by another proposal; propose again to be asked", op.decision.Reviewer)
		}
		for _, id := range op.actions {
			denied[id] = fmt.Sprintf("action '%s' (fingerprint %s) was not approved: %s", id, fp, reason)
		}
	}
	return denied, nil
}

// approvalTally is the operations one proposal has raised for a person, so
// that it raises at most max_approvals_per_proposal of them, at admission
// and mid-run together.
type approvalTally struct {
	mu     sync.Mutex
	raised map[string]bool // by fingerprint
}

// add counts fps as raised, or refuses them all when the distinct ones
// would pass max.
func (t *approvalTally) add(fps []string, max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.raised)
	for _, fp := range fps {
		if !t.raised[fp] {
			n++
		}
	}
	if n > max {
		return fmt.Errorf("would put %d distinct operations (fingerprints) to a person, more than max_approvals_per_proposal (%d): split it into smaller proposals, or approve the operations ahead with permission.approve {fingerprint, required_tier}", n, max)
	}
	if t.raised == nil {
		t.raised = map[string]bool{}
	}
	for _, fp := range fps {
		t.raised[fp] = true
	}
	return nil
}

// raisedTally is the proposal's tally; a submission that did not come
// through Submit (a checkpoint restore's) counts on its own.
func (sub *Submission) raisedTally() *approvalTally {
	if sub.raised == nil {
		return &approvalTally{}
	}
	return sub.raised
}

// requester is who this session's connection is, for the approvals its
// proposals raise; without Session.RequestedBy, a plain client.
func (s *Session) requester() host.Requester {
	if s.RequestedBy != nil {
		return s.RequestedBy()
	}
	return host.Requester{Principal: protocol.PrincipalPlain, Connection: s.ID}
}

// settles reports whether rec decides row: any rejection does, an approval
// only at or above the tier the operation needs.
func (rt *Runtime) settles(rec approvals.Record, row PermissionRow) bool {
	return rec.Decision == approvals.Rejected || (approvedAtOrAbove(rec, row.Required) && approvals.Live(rec, time.Now()) && quorumMet(rec, row.Quorum))
}

// counts reports whether rec is part of a quorum row still waits for: a
// standing approval at its tier with some of the people it needs.
func (rt *Runtime) counts(rec approvals.Record, row PermissionRow) bool {
	return row.Quorum > 1 && approvedAtOrAbove(rec, row.Required) && approvals.Live(rec, time.Now()) && len(people(rec.Approvers)) > 0
}

// undecided expires what is still waiting and says how to get past it.
func (rt *Runtime) undecided(sub *Submission, ops map[string]*waitingOp, order []string, why string) error {
	rt.expireAll(ops, order, why)
	var todo []string
	for _, fp := range order {
		op := ops[fp]
		if op.decision != nil {
			continue
		}
		rt.Events.Append(Event{Kind: EventApprovalSettled, ProposalID: sub.Proposal.ID, ActionID: op.actions[0], Connection: sub.Session.ID, Data: map[string]any{
			"fingerprint": fp, "approval_id": op.approval.ID, "decision": "expired",
		}})
		todo = append(todo, fmt.Sprintf("action '%s' needs %s: approve fingerprint %s with permission.approve {fingerprint: \"%s\", required_tier: \"%s\"}",
			op.actions[0], op.row.Required, fp, fp, op.row.Required))
	}
	return fmt.Errorf("approval not given: %s; %s, then resubmit the proposal", why, strings.Join(todo, "; "))
}

// expireAll marks every raised, undecided request expired.
func (rt *Runtime) expireAll(ops map[string]*waitingOp, order []string, why string) {
	for _, fp := range order {
		if op := ops[fp]; op.decision == nil && op.approval.ID != "" {
			// Already resolved through another door is fine: the ledger rules.
			_, _ = rt.opts.Desk.Expire(op.approval.ID, why)
		}
	}
}

// countUndecided is the number of operations still waiting.
func countUndecided(ops map[string]*waitingOp) int {
	n := 0
	for _, op := range ops {
		if op.decision == nil {
			n++
		}
	}
	return n
}

// groupByFingerprint gathers the rows that need approval by operation, in
// the order they first appear.
func groupByFingerprint(rows []PermissionRow) (map[string]*waitingOp, []string) {
	ops := map[string]*waitingOp{}
	var order []string
	for _, r := range rows {
		if r.Decision != DecisionNeedsApproval {
			continue
		}
		op := ops[r.Fingerprint]
		if op == nil {
			op = &waitingOp{row: r}
			ops[r.Fingerprint] = op
			order = append(order, r.Fingerprint)
		}
		op.actions = append(op.actions, r.ActionID)
	}
	return ops, order
}

// proposalParams looks up an action's parameters as the proposal gives them.
func proposalParams(p *protocol.ActionProposal) func(string) map[string]any {
	return func(id string) map[string]any {
		for i := range p.Actions {
			if p.Actions[i].ID == id {
				return p.Actions[i].Parameters
			}
		}
		return nil
	}
}

// approvalRequest is what a person sees: what would run, why it needs them,
// and a preview of its parameters with credentials redacted. RaiseGate adds
// the operation (fingerprint and required tier) to the context.
func approvalRequest(sub *Submission, op *waitingOp, params map[string]any) host.ApprovalRequest {
	r := op.row
	actions := append([]string(nil), op.actions...)
	sort.Strings(actions)
	title := fmt.Sprintf("%s needs %s", describe(r), r.Required)
	if r.Quorum > 1 {
		title += fmt.Sprintf(" from %d people", r.Quorum)
	}
	return host.ApprovalRequest{
		Title:       title,
		Description: fmt.Sprintf("Proposal %s wants to run %s (%s). Approve to record it at %s on the approval ledger.", sub.Proposal.ID, describe(r), r.Reversibility, r.Required),
		Context: map[string]any{
			"proposal_id":   sub.Proposal.ID,
			"action_id":     op.actions[0],
			"action_ids":    actions,
			"connection":    sub.Session.ID,
			"tool":          r.Tool,
			"granted_tier":  r.Granted.String(),
			"reversibility": string(r.Reversibility),
			"signals":       append([]string{}, r.Signals...),
			"preview":       policy.Preview(params),
		},
		RequiredApprovals: max(1, r.Quorum),
	}
}

// describe names the operation of a row for a person.
func describe(r PermissionRow) string {
	if r.Tool != "" {
		return fmt.Sprintf("tool '%s'", r.Tool)
	}
	return fmt.Sprintf("action '%s'", r.ActionID)
}

// gateOperation is what a raised approval decides: the operation's
// fingerprint, its inputs and the tiers, kept on the ledger's record.
func gateOperation(fp string, row PermissionRow, params map[string]any) host.Operation {
	var rec approvals.Record
	approvals.Operation(&rec, &protocol.Action{Type: row.Type, Tool: row.Tool, Parameters: params})
	return host.Operation{Fingerprint: fp, RequiredTier: row.Required.String(), Type: rec.Type, Tool: rec.Tool, ParamsDigest: rec.ParamsDigest, GrantedTier: row.Granted.String()}
}

// waitSettledAfterRecord waits for a decision this daemon is recording to
// be done: recordDecision holds decideMu from the ledger's record, which
// wakes the wait, until its approval_recorded is appended, so a proposal's
// story names who approved before it says the wait was settled.
func (rt *Runtime) waitSettledAfterRecord() {
	rt.decideMu.Lock()
	defer rt.decideMu.Unlock()
}
