package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// feedbackPrincipal is whose attempts tools.feedback counts for this
// connection: an agent its own, a plain client or the host role everyone's.
func (c *conn) feedbackPrincipal() string {
	if agent := c.agentID(); agent != "" {
		return protocol.PrincipalAgent + ":" + agent
	}
	return ""
}

// feedbackWindow checks a window in days against the retention setting.
func (c *conn) feedbackWindow(name string, days *int) (int, error) {
	if days == nil {
		return min(protocol.DefaultFeedbackWindowDays, c.srv.opts.TrajectoryRetentionDays), nil
	}
	if *days < 1 || *days > c.srv.opts.TrajectoryRetentionDays {
		return 0, invalidParams("%s must be 1 to %d (trajectory_retention_days: older days are deleted), got %d", name, c.srv.opts.TrajectoryRetentionDays, *days)
	}
	return *days, nil
}

// toolsFeedback answers tools.feedback from the trajectory store.
func (c *conn) toolsFeedback(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ToolsFeedbackParams
	const shape = "{window_days?: integer, tools?: [string]}"
	if params != nil {
		if err := decodeParams(params, &p, shape); err != nil {
			return nil, err
		}
	}
	window, err := c.feedbackWindow("window_days", p.WindowDays)
	if err != nil {
		return nil, err
	}
	if max := c.srv.opts.MaxFeedbackTools; len(p.Tools) > max {
		return nil, invalidParams("tools names %d tools; at most %d (max_tools): ask in parts", len(p.Tools), max)
	}
	for _, t := range p.Tools {
		if t == "" || len(t) > protocol.DefaultMaxIDBytes {
			return nil, invalidParams("each of tools must be a tool name of 1 to %d bytes", protocol.DefaultMaxIDBytes)
		}
	}
	fb, err := c.srv.rt.ToolFeedback(ctx, window, p.Tools, c.srv.opts.MaxFeedbackTools, c.feedbackPrincipal())
	if errors.Is(err, engine.ErrNoTrajectories) {
		return nil, internalError("tools.feedback: this daemon keeps no trajectory store")
	}
	if err != nil {
		return nil, internalError("tools.feedback: %v", err)
	}
	return protocol.ToolsFeedbackResult{Tools: fb, WindowDays: window}, nil
}

// observedRates are the feedback figures of tools that method
// (verify.monte_carlo, proposal.plan, proposal.score) draws from, over the
// window its param windowName gave: nil when the daemon keeps no
// trajectories.
func (c *conn) observedRates(ctx context.Context, method, windowName string, windowDays *int, tools []string) (*engine.ObservedRates, error) {
	window, err := c.feedbackWindow(windowName, windowDays)
	if err != nil {
		return nil, err
	}
	fb, err := c.srv.rt.ToolFeedback(ctx, window, tools, c.srv.opts.MaxFeedbackTools, c.feedbackPrincipal())
	if errors.Is(err, engine.ErrNoTrajectories) {
		return nil, nil
	}
	if err != nil {
		return nil, internalError("%s: reading tool feedback: %v", method, err)
	}
	obs := &engine.ObservedRates{Window: window, Tools: map[string]protocol.ToolFeedback{}}
	for _, f := range fb {
		obs.Tools[f.Tool] = f
	}
	return obs, nil
}
