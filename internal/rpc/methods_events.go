package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// In a cluster, events.count, events.query, events.chain.verify and
// metrics.summary cover every daemon's events (engine.EventLog's *All
// methods); alone, this daemon's.

func (c *conn) eventsCount(ctx context.Context, _ *json.RawMessage) (any, error) {
	return c.srv.rt.Events.CountAll(ctx)
}

const eventQueryShape = "{kinds?: string[], action_id?: string, proposal_id?: string, node?: string, since?: RFC3339, until?: RFC3339, data_matches?: {key: string}, limit?: number, after_cursor?: number}"

// eventsQueryResult is the reply to events.query.
type eventsQueryResult = protocol.EventsQueryResult

func (c *conn) eventsQuery(ctx context.Context, params *json.RawMessage) (any, error) {
	var q protocol.EventsQueryParams
	if err := optionalParams(params, &q, eventQueryShape); err != nil {
		return nil, err
	}
	if q.Limit < 0 {
		return nil, invalidParams("param 'limit' must be 0 (no limit) or more")
	}
	events, truncated, err := c.srv.rt.Events.QueryAll(ctx, q)
	if err != nil {
		return nil, err
	}
	return eventsQueryResult{Count: len(events), Events: events, Truncated: truncated}, nil
}

func (c *conn) eventsChainEnable(context.Context, *json.RawMessage) (any, error) {
	c.srv.rt.Events.EnableChain()
	return protocol.OKResult{OK: true}, nil
}

func (c *conn) eventsChainVerify(ctx context.Context, _ *json.RawMessage) (any, error) {
	return c.srv.rt.Events.VerifyAll(ctx)
}

func (c *conn) eventsRetention(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.RetentionParams
	if err := optionalParams(params, &p, "{policy?: {max_events?: number, max_age_secs?: number}}"); err != nil {
		return nil, err
	}
	if p.Policy == nil {
		return protocol.RetentionResult{Policy: c.srv.rt.Events.Retention()}, nil
	}
	if a := p.Policy.MaxAgeSecs; a != nil && *a > engine.MaxAgeSecsLimit {
		return nil, invalidParams("policy.max_age_secs must be at most %d (about 100 years), got %d", engine.MaxAgeSecsLimit, *a)
	}
	removed := c.srv.rt.Events.SetRetention(*p.Policy)
	return protocol.RetentionResult{Policy: *p.Policy, Removed: &removed}, nil
}

func (c *conn) metricsSummary(ctx context.Context, _ *json.RawMessage) (any, error) {
	return c.srv.rt.Events.SummaryAll(ctx)
}
