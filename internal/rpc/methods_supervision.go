package rpc

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

func (c *conn) supervisionSubscribe(_ context.Context, params *json.RawMessage) (any, error) {
	var p struct {
		Filter engine.SupervisionFilter `json:"filter"`
	}
	if err := optionalParams(params, &p, "{filter?: {tools?: string[], sessions?: string[], min_reversibility?: string}}"); err != nil {
		return nil, err
	}
	n, err := c.srv.rt.Supervisors.Subscribe(c.id, p.Filter, c.sendIntent)
	if err != nil {
		return nil, invalidParams("filter: %v", err)
	}
	return map[string]any{"subscribed": true, "decision_timeout_ms": c.srv.rt.Supervisors.Timeout().Milliseconds(), "supervisors": n}, nil
}

// sendIntent delivers a parked proposal to this supervisor.
func (c *conn) sendIntent(in engine.Intent) {
	<-c.ready
	if err := c.rpc.Notify(context.Background(), protocol.MethodSupervisionIntent, in); err != nil {
		c.log.Debug("supervision.intent not sent", zap.String("intent", in.ID), zap.Error(err))
	}
}

func (c *conn) supervisionUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	was := c.srv.rt.Supervisors.Unsubscribe(c.id)
	return map[string]any{"subscribed": false, "was_subscribed": was}, nil
}

func (c *conn) supervisionPending(context.Context, *json.RawMessage) (any, error) {
	return map[string]any{"intents": c.srv.rt.Supervisors.Pending()}, nil
}

func (c *conn) supervisionDecide(_ context.Context, params *json.RawMessage) (any, error) {
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
	if err := c.srv.rt.Supervisors.Decide(c.id, p.IntentID, *p.Decision); err != nil {
		return nil, invalidParams("%v", err)
	}
	return map[string]any{"decided": true}, nil
}
