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

// decodeVerify reads {proposal, initial_state?}, with ids minted.
func decodeVerify(params *json.RawMessage, shape string) (*protocol.ActionProposal, map[string]any, error) {
	var p struct {
		Proposal     json.RawMessage `json:"proposal"`
		InitialState map[string]any  `json:"initial_state"`
	}
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, nil, err
	}
	prop, err := protocol.DecodeProposal(p.Proposal)
	if err != nil {
		return nil, nil, invalidParams("%v", err)
	}
	engine.Normalize(prop)
	return prop, p.InitialState, nil
}

func (c *conn) verify(_ context.Context, params *json.RawMessage) (any, error) {
	prop, state, err := decodeVerify(params, verifyShape)
	if err != nil {
		return nil, err
	}
	return engine.Verify(prop, state, c.sess.Tools, c.srv.rt.MaxActions()), nil
}

func (c *conn) simulate(_ context.Context, params *json.RawMessage) (any, error) {
	prop, state, err := decodeVerify(params, verifyShape)
	if err != nil {
		return nil, err
	}
	return engine.Simulate(prop, state, c.sess.Tools), nil
}

func (c *conn) equivalent(_ context.Context, params *json.RawMessage) (any, error) {
	var p struct {
		A          json.RawMessage  `json:"a"`
		B          json.RawMessage  `json:"b"`
		TestStates []map[string]any `json:"test_states"`
	}
	const shape = "{a: ActionProposal, b: ActionProposal, test_states?: object[]}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	a, err := protocol.DecodeProposal(p.A)
	if err != nil {
		return nil, invalidParams("a: %v", err)
	}
	b, err := protocol.DecodeProposal(p.B)
	if err != nil {
		return nil, invalidParams("b: %v", err)
	}
	engine.Normalize(a)
	engine.Normalize(b)
	return engine.Equivalent(a, b, p.TestStates, c.sess.Tools), nil
}

func (c *conn) optimize(_ context.Context, params *json.RawMessage) (any, error) {
	prop, _, err := decodeVerify(params, "{proposal: ActionProposal}")
	if err != nil {
		return nil, err
	}
	out, pruned := engine.Optimize(prop)
	return map[string]any{"proposal": out, "pruned": pruned}, nil
}

func (c *conn) monteCarlo(ctx context.Context, params *json.RawMessage) (any, error) {
	var p engine.MonteCarloParams
	const shape = "{proposal, initial_state?, tool_success_rates?, goal?, rate_window_days?, config?: {trials?, seed?, default_success_rate?, retry_attempts?}}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	prop, err := protocol.DecodeProposal(p.Proposal)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	engine.Normalize(prop)
	res, err := engine.MonteCarlo(ctx, prop, p, c.sess.Tools)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	return res, nil
}
