package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/protocol"
)

func (c *conn) supervisionSubscribe(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SupervisionSubscribeParams
	if err := optionalParams(params, &p, "{filter?: {tools?: string[], sessions?: string[], min_reversibility?: string}}"); err != nil {
		return nil, err
	}
	var filter protocol.SupervisionFilter
	if p.Filter != nil {
		filter = *p.Filter
	}
	n, err := c.srv.rt.Supervisors.Subscribe(ctx, c.id, filter, c.intentFeed().Push)
	if errors.Is(err, engine.ErrCluster) {
		return nil, internalError("%v", err)
	}
	if err != nil {
		return nil, invalidParams("filter: %v", err)
	}
	return protocol.SupervisionSubscribeResult{DecisionTimeoutMs: c.srv.rt.Supervisors.Timeout().Milliseconds(), Subscribed: true, Supervisors: n}, nil
}

// intentFeed is this connection's supervision.intent queue, made on first
// use; run closes it when the connection ends.
func (c *conn) intentFeed() *fanout.Queue[engine.Intent] {
	return feed(c, &c.intents, c.deliverIntent)
}

// deliverIntent writes one queued intent to this supervisor, with its place
// in this connection's feed and how many intents before it were dropped
// because the supervisor fell behind.
func (c *conn) deliverIntent(ctx context.Context, it fanout.Item[engine.Intent]) error {
	return c.notify(ctx, protocol.MethodSupervisionIntent, protocol.IntentNotice{Intent: it.Value, Cursor: it.Cursor, Dropped: it.Dropped})
}

func (c *conn) supervisionUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	was := c.srv.rt.Supervisors.Unsubscribe(c.id)
	return protocol.SubscriptionResult{Subscribed: false, WasSubscribed: was}, nil
}

func (c *conn) supervisionPending(context.Context, *json.RawMessage) (any, error) {
	return protocol.SupervisionPendingResult{Intents: c.srv.rt.Supervisors.Pending()}, nil
}

func (c *conn) supervisionDecide(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SupervisionDecideParams
	const shape = "{intent_id: string, decision: {kind: allow|deny|escalate, reason?: string}}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("intent_id", p.IntentID, shape); err != nil {
		return nil, err
	}
	if p.Decision == nil {
		return nil, invalidParams("param 'decision' is required: expected %s", shape)
	}
	if err := c.srv.rt.Supervisors.DecideAs(ctx, c.id, c.reviewer(), p.IntentID, *p.Decision); err != nil {
		if errors.Is(err, engine.ErrCluster) {
			return nil, internalError("%v", err)
		}
		return nil, invalidParams("%v", err)
	}
	return protocol.SupervisionDecideResult{Decided: true}, nil
}
