package rpc

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/protocol"
)

// Spend and alerts over the event log (events.cost_by_agent,
// metrics.alerts).

func (c *conn) eventsCostByAgent(ctx context.Context, _ *json.RawMessage) (any, error) {
	return c.srv.rt.Events.CostByAgentAll(ctx)
}

const alertsShape = "{max_cost_usd?: number, max_error_rate?: number, max_avg_latency_ms?: number, max_goals_ungrounded?: number, min_actions?: number}"

func (c *conn) metricsAlerts(ctx context.Context, params *json.RawMessage) (any, error) {
	var th protocol.AlertThresholds
	if err := optionalParams(params, &th, alertsShape); err != nil {
		return nil, err
	}
	if r := th.MaxErrorRate; r != nil && (*r < 0 || *r > 1) {
		return nil, invalidParams("param 'max_error_rate' must be between 0 and 1, got %g", *r)
	}
	summary, alerts, err := c.srv.rt.Events.AlertsAll(ctx, th)
	if err != nil {
		return nil, err
	}
	for _, a := range alerts {
		c.srv.log.Named("alerts").Warn("alert fired", zap.String("kind", a.Kind), zap.String("message", a.Message),
			zap.Float64("observed", a.Observed), zap.Float64("threshold", a.Threshold))
	}
	return protocol.MetricsAlertsResult{Alerts: alerts, Summary: summary}, nil
}
