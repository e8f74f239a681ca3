package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/engine"
)

func (c *conn) eventsCount(context.Context, *json.RawMessage) (any, error) {
	return c.srv.rt.Events.Count(), nil
}

const eventQueryShape = "{kinds?: string[], action_id?: string, proposal_id?: string, since?: RFC3339, until?: RFC3339, data_matches?: {key: string}, limit?: number, after_cursor?: number}"

func (c *conn) eventsQuery(_ context.Context, params *json.RawMessage) (any, error) {
	var q engine.EventQuery
	if err := optionalParams(params, &q, eventQueryShape); err != nil {
		return nil, err
	}
	if q.Limit < 0 {
		return nil, invalidParams("param 'limit' must be 0 (no limit) or more")
	}
	events := c.srv.rt.Events.Query(q)
	return map[string]any{"count": len(events), "events": events}, nil
}

func (c *conn) eventsChainEnable(context.Context, *json.RawMessage) (any, error) {
	c.srv.rt.Events.EnableChain()
	return map[string]any{"ok": true}, nil
}

func (c *conn) eventsChainVerify(context.Context, *json.RawMessage) (any, error) {
	verified, tampered := c.srv.rt.Events.VerifyChain()
	if tampered >= 0 {
		return map[string]any{"tampered_at": tampered}, nil
	}
	return map[string]any{"verified": verified}, nil
}

func (c *conn) eventsRetention(_ context.Context, params *json.RawMessage) (any, error) {
	var p struct {
		Policy *engine.RetentionPolicy `json:"policy"`
	}
	if err := optionalParams(params, &p, "{policy?: {max_events?: number, max_age_secs?: number}}"); err != nil {
		return nil, err
	}
	if p.Policy == nil {
		return map[string]any{"policy": c.srv.rt.Events.Retention()}, nil
	}
	if a := p.Policy.MaxAgeSecs; a != nil && *a > engine.MaxAgeSecsLimit {
		return nil, invalidParams("policy.max_age_secs must be at most %d (about 100 years), got %d", engine.MaxAgeSecsLimit, *a)
	}
	removed := c.srv.rt.Events.SetRetention(*p.Policy)
	return map[string]any{"policy": *p.Policy, "removed": removed}, nil
}

func (c *conn) metricsSummary(context.Context, *json.RawMessage) (any, error) {
	return c.srv.rt.Events.Summary(), nil
}
