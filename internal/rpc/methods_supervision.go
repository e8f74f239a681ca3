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
	var p struct {
		Filter engine.SupervisionFilter `json:"filter"`
	}
	if err := optionalParams(params, &p, "{filter?: {tools?: string[], sessions?: string[], min_reversibility?: string}}"); err != nil {
		return nil, err
	}
	n, err := c.srv.rt.Supervisors.Subscribe(ctx, c.id, p.Filter, c.intentFeed().Push)
	if errors.Is(err, engine.ErrCluster) {
		return nil, internalError("%v", err)
	}
	if err != nil {
		return nil, invalidParams("filter: %v", err)
	}
	return map[string]any{"subscribed": true, "decision_timeout_ms": c.srv.rt.Supervisors.Timeout().Milliseconds(), "supervisors": n}, nil
}

// intentNotice is the params of supervision.intent: the intent and its
// place in this connection's feed. dropped > 0 says that many intents before
// this one were dropped because the supervisor fell behind: re-read
// supervision.pending.
type intentNotice struct {
	engine.Intent
	Cursor  uint64 `json:"cursor"`
	Dropped uint64 `json:"dropped"`
}

// intentFeed is this connection's supervision.intent queue, made on first
// use; run closes it when the connection ends.
func (c *conn) intentFeed() *fanout.Queue[engine.Intent] {
	return feed(c, &c.intents, c.deliverIntent)
}

// deliverIntent writes one queued intent to this supervisor.
func (c *conn) deliverIntent(ctx context.Context, it fanout.Item[engine.Intent]) error {
	return c.notify(ctx, protocol.MethodSupervisionIntent, intentNotice{Intent: it.Value, Cursor: it.Cursor, Dropped: it.Dropped})
}

func (c *conn) supervisionUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	was := c.srv.rt.Supervisors.Unsubscribe(c.id)
	return map[string]any{"subscribed": false, "was_subscribed": was}, nil
}

func (c *conn) supervisionPending(context.Context, *json.RawMessage) (any, error) {
	return map[string]any{"intents": c.srv.rt.Supervisors.Pending()}, nil
}

func (c *conn) supervisionDecide(ctx context.Context, params *json.RawMessage) (any, error) {
	var p struct {
		IntentID string                      `json:"intent_id"`
		Decision *engine.SupervisionDecision `json:"decision"`
	}
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
	if err := c.srv.rt.Supervisors.Decide(ctx, c.id, p.IntentID, *p.Decision); err != nil {
		if errors.Is(err, engine.ErrCluster) {
			return nil, internalError("%v", err)
		}
		return nil, invalidParams("%v", err)
	}
	return map[string]any{"decided": true}, nil
}
