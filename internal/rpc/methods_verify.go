package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// Verification methods are pure: they read the caller's tool registry and
// never call a tool or change state.

const verifyShape = "{proposal: ActionProposal, initial_state?: object}"

// decodeAnalysed decodes a proposal a method analyses without executing it:
// within max_actions, as proposal.submit would take it, with ids minted.
// label prefixes errors ("a: ...") when a method takes more than one.
func (c *conn) decodeAnalysed(raw []byte, label string) (*protocol.ActionProposal, error) {
	prop, err := c.decodeProposal(raw)
	if err == nil {
		err = c.srv.rt.CheckActions(prop)
	}
	if err != nil {
		return nil, invalidParams("%s%v", label, err)
	}
	engine.Normalize(prop)
	return prop, nil
}

// decodeVerify reads {proposal, initial_state?}, with ids minted.
func (c *conn) decodeVerify(params *json.RawMessage, shape string) (*protocol.ActionProposal, protocol.Object, error) {
	var p protocol.VerifyParams
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, nil, err
	}
	prop, err := c.decodeAnalysed(p.Proposal, "")
	if err != nil {
		return nil, nil, err
	}
	return prop, p.InitialState, nil
}

func (c *conn) verify(ctx context.Context, params *json.RawMessage) (any, error) {
	prop, state, err := c.decodeVerify(params, verifyShape)
	if err != nil {
		return nil, err
	}
	res := engine.Verify(prop, state, c.sess.Tools, c.srv.rt.MaxActions())
	c.srv.rt.VerifyFlow(&res, prop, c.sess)
	c.srv.rt.VerifyIntent(ctx, &res, prop, c.sess, "")
	c.srv.rt.VerifyTransactions(ctx, &res, prop, c.sess, "")
	return res, nil
}

func (c *conn) simulate(_ context.Context, params *json.RawMessage) (any, error) {
	prop, state, err := c.decodeVerify(params, verifyShape)
	if err != nil {
		return nil, err
	}
	return engine.Simulate(prop, state, c.sess.Tools), nil
}

func (c *conn) equivalent(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.EquivalentParams
	const shape = "{a: ActionProposal, b: ActionProposal, test_states?: object[]}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if len(p.TestStates) > engine.MaxTestStates {
		return nil, invalidParams("param 'test_states' has %d states; at most %d are compared: split the comparison", len(p.TestStates), engine.MaxTestStates)
	}
	a, err := c.decodeAnalysed(p.A, "a: ")
	if err != nil {
		return nil, err
	}
	b, err := c.decodeAnalysed(p.B, "b: ")
	if err != nil {
		return nil, err
	}
	return engine.Equivalent(a, b, p.TestStates, c.sess.Tools), nil
}

func (c *conn) optimize(_ context.Context, params *json.RawMessage) (any, error) {
	prop, _, err := c.decodeVerify(params, "{proposal: ActionProposal}")
	if err != nil {
		return nil, err
	}
	out, pruned := engine.Optimize(prop)
	return protocol.OptimizeResult{Proposal: out, Pruned: pruned}, nil
}

func (c *conn) monteCarlo(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.MonteCarloParams
	const shape = "{proposal, initial_state?, tool_success_rates?, goal?, rate_window_days?, config?: {trials?, seed?, default_success_rate?, retry_attempts?}}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	prop, err := c.decodeAnalysed(p.Proposal, "")
	if err != nil {
		return nil, err
	}
	var used []string
	for i := range prop.Actions {
		if prop.Actions[i].Type == protocol.ActionToolCall {
			used = append(used, prop.Actions[i].Tool)
		}
	}
	observed, err := c.observedRates(ctx, protocol.MethodVerifyMonteCarlo, "rate_window_days", p.RateWindowDays, used)
	if err != nil {
		return nil, err
	}
	res, err := engine.MonteCarloObserved(ctx, prop, p, c.sess.Tools, observed)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	return res, nil
}
