package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Execute-and-recover: a proposal that aborts (or, with
// replan_on_rejected, has actions rejected) is rolled back, its submitter is
// asked for a replacement, and the replacement goes through Submit — every
// validation and gate again — until one succeeds, the submitter gives up, or
// max_replans runs out.

// Events of the replan loop; their proposal_id is the original proposal's.
const (
	EventReplanRequested EventKind = "replan_requested"
	EventReplanExhausted EventKind = "replan_exhausted"
)

// Replanner asks the submitter of a failed proposal for a replacement. A nil
// proposal and nil error means it gave up.
type Replanner interface {
	Replan(ctx context.Context, req protocol.ReplanProposeParams) (*protocol.ActionProposal, error)
}

// Recovery is how Execute recovers a failed proposal.
type Recovery struct {
	Config    protocol.ReplanConfig
	Replanner Replanner // nil turns replanning off
	// Timeout is the deadline of one attempt, given its submission; nil
	// gives attempts no deadline of their own. Each attempt has its own,
	// so a replacement is never cut short by the time its predecessors took.
	Timeout func(*Submission) time.Duration
}

// DeadlineError is an attempt that ran past its deadline; its result is
// not reported, as the work may have committed.
type DeadlineError struct{ Timeout time.Duration }

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("the proposal ran past its %s deadline", e.Timeout)
}

// Execute submits a proposal and, when rec configures replanning, recovers
// it. The result keeps the original proposal id; with replans, its results
// and cost are the last executed attempt's and Replans lists every
// replacement tried. The error is non-nil only for a proposal that could not
// be considered at all (LimitError) or an attempt past its deadline
// (DeadlineError).
func (rt *Runtime) Execute(ctx context.Context, sub *Submission, rec Recovery) (*protocol.ProposalResult, error) {
	res, err := rt.execute(ctx, sub, rec)
	// The reply waits for the proposal's events to be durable. A log that
	// cannot write is reported by the store that holds it, and never fails
	// the proposal: the audit log does not take the runtime down.
	_ = rt.Events.Durable(context.WithoutCancel(ctx))
	return res, err
}

// execute is Execute before the wait for the durable log.
func (rt *Runtime) execute(ctx context.Context, sub *Submission, rec Recovery) (*protocol.ProposalResult, error) {
	if err := rt.CheckActions(sub.Proposal); err != nil {
		return nil, err
	}
	Normalize(sub.Proposal)
	replanning := rec.Config.MaxReplans > 0 && rec.Replanner != nil
	if replanning {
		// proposal.cancel with the original id must stop the whole loop,
		// the waits between attempts included.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		defer rt.running.untrack(sub.Proposal.ID, rt.running.track(sub.Proposal.ID, sub.Session.ID, cancel))
	}
	res, err := rt.runAttempt(ctx, sub, rec)
	if err != nil {
		return nil, err
	}
	if replanning {
		if res, err = rt.replan(ctx, sub, rec, res); err != nil {
			return nil, err
		}
	}
	if sub.Budget != nil {
		res.Cost.Budget = sub.Budget.Report()
	}
	return res, nil
}

// runAttempt is one Submit under the attempt's own deadline.
func (rt *Runtime) runAttempt(ctx context.Context, sub *Submission, rec Recovery) (*protocol.ProposalResult, error) {
	var timeout time.Duration
	if rec.Timeout != nil {
		timeout = rec.Timeout(sub)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	res, err := rt.Submit(ctx, sub)
	if res != nil && sub.Budget != nil {
		sub.Budget.addDuration(res.Cost.TotalDurationMs)
	}
	if rec.Timeout != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, &DeadlineError{Timeout: timeout}
	}
	return res, err
}

// replan is the loop after a first attempt that ended with res.
func (rt *Runtime) replan(ctx context.Context, sub *Submission, rec Recovery, res *protocol.ProposalResult) (*protocol.ProposalResult, error) {
	cfg := rec.Config
	origID := sub.Proposal.ID
	emit := func(kind EventKind, data map[string]any) {
		rt.Events.Append(Event{Kind: kind, ProposalID: origID, Connection: sub.Session.ID, Data: data})
	}
	last, lastProposal := res, sub.Proposal
	want := needsReplan(last, cfg)
	feedback := feedbackOf(last, lastProposal)
	var replans []protocol.Replan
	var stopped string
	for n := 1; want; n++ {
		if ctx.Err() != nil {
			stopped = "replanning stopped: " + context.Cause(ctx).Error()
			break
		}
		if sub.Budget != nil {
			if which := sub.Budget.Exceeded(); which != "" {
				stopped = "no replan: budget exceeded: " + which
				break
			}
		}
		if n > cfg.MaxReplans {
			stopped = fmt.Sprintf("max_replans (%d) exhausted; the results are the last attempt's", cfg.MaxReplans)
			emit(EventReplanExhausted, map[string]any{"max_replans": cfg.MaxReplans})
			break
		}
		if err := sleepCtx(ctx, time.Duration(cfg.DelayMs)*time.Millisecond); err != nil {
			stopped = "replanning stopped: " + context.Cause(ctx).Error()
			break
		}
		emit(EventReplanRequested, map[string]any{"attempt": n, "max_replans": cfg.MaxReplans, "failed": len(feedback.Failed)})
		req := feedback
		req.ProposalID, req.Attempt = origID, n
		next, err := rec.Replanner.Replan(ctx, req)
		if err != nil {
			stopped = err.Error()
			break
		}
		if next == nil {
			stopped = "the client gave up: replan.propose answered null"
			break
		}
		if problems := rt.invalidReplan(ctx, next, sub, cfg); len(problems) > 0 {
			// An invalid replacement counts as an attempt; it did not run.
			replans = append(replans, protocol.Replan{Attempt: n, ProposalID: next.ID, Outcome: protocol.ReplanInvalid, Error: joinProblems(problems)})
			feedback = protocol.ReplanProposeParams{Failed: problems, Succeeded: []string{}, StateKeysWritten: []string{}}
			continue
		}
		attempt := *sub
		attempt.Proposal = next
		attempt.denied = nil
		r, err := rt.runAttempt(ctx, &attempt, rec)
		if err != nil {
			return nil, err
		}
		last, lastProposal = r, next
		outcome, errText := outcomeOf(r, sub.Budget)
		replans = append(replans, protocol.Replan{Attempt: n, ProposalID: next.ID, Outcome: outcome, Error: errText})
		want = needsReplan(last, cfg)
		feedback = feedbackOf(last, lastProposal)
	}
	last.ProposalID = origID
	last.Replans = replans
	last.ReplanError = stopped
	return last, nil
}

// invalidReplan is what makes a replacement unfit to run before any gate
// sees it: over max_actions, or, with verify_before_execute, the errors
// verify finds against state now.
func (rt *Runtime) invalidReplan(ctx context.Context, next *protocol.ActionProposal, sub *Submission, cfg protocol.ReplanConfig) []protocol.ReplanFailure {
	if err := rt.CheckActions(next); err != nil {
		return []protocol.ReplanFailure{{Status: protocol.StatusRejected, Error: err.Error()}}
	}
	Normalize(next)
	if !cfg.VerifyBeforeExecute {
		return nil
	}
	snap, err := rt.State.Snapshot(ctx, sub.Tenant)
	if err != nil {
		return []protocol.ReplanFailure{{Status: protocol.StatusRejected, Error: store.Wrap("verify_before_execute could not read state", err).Error()}}
	}
	v := Verify(next, snap, sub.Session.Tools, rt.opts.MaxActions)
	tools := toolsByAction(next)
	var out []protocol.ReplanFailure
	for _, is := range v.Issues {
		if is.Severity == "error" {
			out = append(out, protocol.ReplanFailure{ActionID: is.ActionID, Tool: tools[is.ActionID], Status: protocol.StatusRejected, Error: "verify: " + is.Message})
		}
	}
	return out
}

// needsReplan reports whether an attempt's result calls for a replan: an
// action failed (the proposal aborted), or, with replan_on_rejected, one
// was rejected.
func needsReplan(res *protocol.ProposalResult, cfg protocol.ReplanConfig) bool {
	for _, ar := range res.Results {
		if ar.Status == protocol.StatusFailed || (cfg.ReplanOnRejected && ar.Status == protocol.StatusRejected) {
			return true
		}
	}
	return false
}

// outcomeOf sums up an executed attempt, with the first error that decided it.
func outcomeOf(res *protocol.ProposalResult, budget *Meter) (outcome, errText string) {
	firstWith := func(s protocol.ActionStatus) (string, bool) {
		for _, ar := range res.Results {
			if ar.Status == s {
				return fmt.Sprintf("action '%s': %s", ar.ActionID, ar.ErrorText()), true
			}
		}
		return "", false
	}
	if e, ok := firstWith(protocol.StatusFailed); ok {
		return protocol.ReplanFailed, e
	}
	if e, ok := firstWith(protocol.StatusRejected); ok {
		return protocol.ReplanRejected, e
	}
	if budget != nil {
		if which := budget.Exceeded(); which != "" {
			return protocol.ReplanFailed, "budget exceeded: " + which
		}
	}
	return protocol.ReplanSucceeded, ""
}

// feedbackOf is what replan.propose tells the client about an attempt: its
// failed and rejected actions, the ones that succeeded, and the state keys
// it wrote (all since rolled back).
func feedbackOf(res *protocol.ProposalResult, p *protocol.ActionProposal) protocol.ReplanProposeParams {
	tools := toolsByAction(p)
	fb := protocol.ReplanProposeParams{Failed: []protocol.ReplanFailure{}, Succeeded: []string{}, StateKeysWritten: []string{}}
	keys := map[string]struct{}{}
	for _, ar := range res.Results {
		switch ar.Status {
		case protocol.StatusFailed, protocol.StatusRejected:
			fb.Failed = append(fb.Failed, protocol.ReplanFailure{ActionID: ar.ActionID, Tool: tools[ar.ActionID], Status: ar.Status, Error: ar.ErrorText()})
		case protocol.StatusSucceeded:
			fb.Succeeded = append(fb.Succeeded, ar.ActionID)
			for k := range ar.StateChanges {
				keys[k] = struct{}{}
			}
		}
	}
	for k := range keys {
		fb.StateKeysWritten = append(fb.StateKeysWritten, k)
	}
	sort.Strings(fb.StateKeysWritten)
	return fb
}

func toolsByAction(p *protocol.ActionProposal) map[string]string {
	out := make(map[string]string, len(p.Actions))
	for _, a := range p.Actions {
		out[a.ID] = a.Tool
	}
	return out
}

func joinProblems(problems []protocol.ReplanFailure) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.Error
		if p.ActionID != "" {
			parts[i] = fmt.Sprintf("action '%s': %s", p.ActionID, p.Error)
		}
	}
	return strings.Join(parts, "; ")
}
