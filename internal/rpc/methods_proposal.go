package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

const submitShape = "{proposal: ActionProposal, session_id?: string, scope?: {tenantId?: string, callerId?: string}}"

func (c *conn) proposalSubmit(ctx context.Context, params *json.RawMessage) (any, error) {
	p, ok := splitSubmit(params)
	if !ok {
		if err := decodeParams(params, &p, submitShape); err != nil {
			return nil, err
		}
	}
	prop, err := c.decodeProposal(p.Proposal)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	if len(prop.FieldWarnings) > 0 && (prop.Strict || c.srv.opts.StrictFields) {
		return nil, invalidParams("%v", protocol.StrictFieldsError(prop.FieldWarnings))
	}
	tenant := scopeTenant(p.Scope)
	if err := c.mayUseTenant(protocol.MethodProposalSubmit, tenant); err != nil {
		return nil, err
	}
	sub := c.submission(prop, p.SessionID, p.Scope)
	rec := engine.Recovery{Replanner: c, Timeout: c.attemptTimeout}
	if cfg := c.replan.Load(); cfg != nil {
		rec.Config = *cfg
	} else {
		// A connection that set no replan config gets the harness's budget.
		rec.Config.MaxReplans = int(c.srv.rt.Harness().PlanningMaxReplans)
	}
	res, err := c.srv.rt.Execute(ctx, sub, rec)
	if c.srv.opts.Tracer != nil {
		noteRequestSpan(ctx, sub.SpanContext()) // the request's log line names the proposal's span
	}
	if err != nil {
		return nil, executeError(protocol.MethodProposalSubmit, err)
	}
	if res != nil {
		res.Warnings = slices.Concat(prop.FieldWarnings, res.Warnings)
	}
	return res, err
}

// scopeTenant is the tenant a RuntimeScope names ("": the default).
func scopeTenant(scope *protocol.RuntimeScope) string {
	if scope == nil {
		return ""
	}
	return scope.TenantID
}

// submission is a proposal as this connection submits it: in its session,
// as its agent, under the policy sub-session and the scope given, with its
// run recorder and cost budget. proposal.submit and proposal.plan build
// every run this way.
func (c *conn) submission(prop *protocol.ActionProposal, policySession string, scope *protocol.RuntimeScope) *engine.Submission {
	sub := &engine.Submission{Proposal: prop, Session: c.sess, PolicySession: policySession, Agent: c.agentID(), Recorder: c.recorder(), Budget: c.budgetMeter()}
	sub.Tenant = scopeTenant(scope)
	return sub
}

// executeError is the reply to a proposal Execute refused (over a limit) or
// cut off (past its deadline).
func executeError(method string, err error) error {
	var deadline *engine.DeadlineError
	if errors.As(err, &deadline) {
		return deadlineError(method, deadline.Timeout)
	}
	var limit *engine.LimitError
	if errors.As(err, &limit) {
		return invalidParams("%v", err)
	}
	return err
}

// splitSubmit reads proposal.submit's params in one walk, the proposal left
// as the slice of them it is (DecodeProposal checks it): params come from a
// frame the frame check found valid. ok is false for anything but plain
// members of the right types, which decodeParams then reads and words.
func splitSubmit(params *json.RawMessage) (p protocol.SubmitParams, ok bool) {
	if params == nil {
		return p, false
	}
	var seen [3]bool
	ok = jsonvalue.Members(*params, func(name, value []byte) bool {
		var k int
		switch string(name) {
		case "proposal":
			p.Proposal, k = value, 0
		case "session_id":
			if value[0] != '"' || bytes.IndexByte(value, '\\') >= 0 || !utf8.Valid(value) {
				return false
			}
			p.SessionID, k = string(value[1:len(value)-1]), 1
		case "scope":
			if json.Unmarshal(value, &p.Scope) != nil {
				return false
			}
			k = 2
		case "_meta", "traceparent", "tracestate":
			return true // W3C Trace Context, read in conn.serve
		default:
			// encoding/json matches names regardless of case and escapes.
			return bytes.IndexByte(name, '\\') < 0 && !strings.EqualFold(string(name), "proposal") &&
				!strings.EqualFold(string(name), "session_id") && !strings.EqualFold(string(name), "scope")
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		return true
	})
	return p, ok && p.Proposal != nil
}

// attemptTimeout is the deadline of one attempt of a proposal (each replan
// has its own): its budget, when that is longer than the handler timeout,
// so that an in-budget proposal is never cut off.
func (c *conn) attemptTimeout(sub *engine.Submission) time.Duration {
	return c.srv.attemptTimeout(sub)
}

// attemptTimeout is conn.attemptTimeout for any submitter (an MCP call).
func (s *Server) attemptTimeout(sub *engine.Submission) time.Duration {
	return max(s.opts.HandlerTimeout, s.rt.Budget(sub))
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

// decodeProposal decodes a proposal a client sent, with ids of at most
// max_action_id_bytes.
func (c *conn) decodeProposal(raw []byte) (*protocol.ActionProposal, error) {
	return protocol.DecodeProposalLimited(raw, c.srv.opts.MaxActionIDBytes)
}
