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
	sub := &engine.Submission{Proposal: prop, Session: c.sess, PolicySession: p.SessionID}
	if p.Scope != nil {
		sub.Tenant = p.Scope.TenantID
	}
	res, err := c.srv.rt.Submit(ctx, sub)
	var limit *engine.LimitError
	if errors.As(err, &limit) {
		return nil, invalidParams("%v", err)
	}
	return res, err
}

// proposalGrace is added to a proposal's own budget, so that the engine's
// per-action timeouts fire before the handler deadline does.
const proposalGrace = 15 * time.Second

// proposalDeadline derives proposal.submit's deadline from its actions'
// budgets: the sum over actions of timeout_ms (or the daemon's tool budget)
// times the attempts the action may make, plus a grace. The caller keeps the
// general deadline when this is lower.
func proposalDeadline(c *conn, params *json.RawMessage) time.Duration {
	if params == nil {
		return 0
	}
	var p struct {
		Proposal struct {
			Actions []struct {
				TimeoutMs       *uint64 `json:"timeout_ms"`
				MaxRetries      *uint64 `json:"max_retries"`
				FailureBehavior string  `json:"failure_behavior"`
			} `json:"actions"`
		} `json:"proposal"`
	}
	if json.Unmarshal(*params, &p) != nil {
		return 0
	}
	var total time.Duration
	for _, a := range p.Proposal.Actions {
		budget := c.srv.rt.ToolTimeout()
		if a.TimeoutMs != nil {
			budget = time.Duration(*a.TimeoutMs) * time.Millisecond
		}
		attempts := time.Duration(1)
		if a.FailureBehavior == string(protocol.FailRetry) {
			retries := uint64(3)
			if a.MaxRetries != nil {
				retries = *a.MaxRetries
			}
			attempts += time.Duration(retries)
		}
		total += budget * attempts
	}
	return total + proposalGrace
}
