package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

const submitShape = "{proposal: ActionProposal, session_id?: string, scope?: {tenantId?: string, callerId?: string}}"

func (c *conn) proposalSubmit(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SubmitParams
	if err := decodeParams(params, &p, submitShape); err != nil {
		return nil, err
	}
	prop, err := protocol.DecodeProposal(p.Proposal)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	sub := &engine.Submission{Proposal: prop, Session: c.sess, PolicySession: p.SessionID, Agent: c.agentID(), Recorder: c.recorder(), Budget: c.budgetMeter()}
	if p.Scope != nil {
		sub.Tenant = p.Scope.TenantID
	}
	rec := engine.Recovery{Replanner: c, Timeout: c.attemptTimeout}
	if cfg := c.replan.Load(); cfg != nil {
		rec.Config = *cfg
	}
	res, err := c.srv.rt.Execute(ctx, sub, rec)
	var deadline *engine.DeadlineError
	if errors.As(err, &deadline) {
		return nil, deadlineError(protocol.MethodProposalSubmit, deadline.Timeout)
	}
	var limit *engine.LimitError
	if errors.As(err, &limit) {
		return nil, invalidParams("%v", err)
	}
	return res, err
}

// attemptTimeout is the deadline of one attempt of a proposal (each replan
// has its own): its budget, when that is longer than the handler timeout,
// so that an in-budget proposal is never cut off.
func (c *conn) attemptTimeout(sub *engine.Submission) time.Duration {
	return max(c.srv.opts.HandlerTimeout, c.srv.rt.Budget(sub))
}

const cancelShape = "{proposal_id: string, reason?: string}"

// proposalCancel stops the running proposals with this id that this
// connection submitted (any of them, for a host-role connection).
func (c *conn) proposalCancel(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ProposalCancelParams
	if err := decodeParams(params, &p, cancelShape); err != nil {
		return nil, err
	}
	if err := requireString("proposal_id", p.ProposalID, cancelShape); err != nil {
		return nil, err
	}
	return protocol.ProposalCancelResult{Cancelled: c.srv.rt.Cancel(p.ProposalID, p.Reason, c.id, c.isHost())}, nil
}
