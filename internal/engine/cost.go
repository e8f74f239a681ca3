package engine

import (
	"fmt"
	"sort"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Spend. An agent run of multi.* that reports tokens (EventAgentRun) and a
// recorded run turn that does (EventInferenceMetered) are metered: their
// tokens and cost fold into metrics.summary and events.cost_by_agent by
// their "agent" field. The cumulative cost is counted as events are
// appended, so a retention trim never rolls it back.

// EventInferenceMetered is spend a run turn reported.
const EventInferenceMetered EventKind = "inference_metered"

// AgentCost is one agent's spend (events.cost_by_agent).
type AgentCost = protocol.AgentCost

// spendOf reads the spend an event reports; ok is false for an event that
// reports none.
func spendOf(e *Event) (agent string, in, out int64, cost float64, ok bool) {
	if e.Kind != EventAgentRun && e.Kind != EventInferenceMetered {
		return "", 0, 0, 0, false
	}
	fin, hasIn := jsonvalue.ToFloat(e.Data["tokens_in"])
	fout, hasOut := jsonvalue.ToFloat(e.Data["tokens_out"])
	cost, hasCost := jsonvalue.ToFloat(e.Data["cost_usd"])
	if !hasIn && !hasOut && !hasCost {
		return "", 0, 0, 0, false
	}
	if a, isStr := e.Data["agent"].(string); isStr {
		agent = a
	}
	return agent, int64(fin), int64(fout), cost, true
}

// foldSpend adds events' spend to s, and its split by agent; the cumulative
// cost is the caller's.
func foldSpend(events eventSeq, s *MetricsSummary) {
	by := map[string]*AgentCost{}
	for i := range events.len() {
		agent, in, out, cost, ok := spendOf(events.at(i))
		if !ok {
			continue
		}
		s.TokensIn += int(in)
		s.TokensOut += int(out)
		s.CostUSD += cost
		a := by[agent]
		if a == nil {
			a = &AgentCost{Agent: agent}
			by[agent] = a
		}
		a.Calls++
		a.TokensIn += in
		a.TokensOut += out
		a.CostUSD += cost
	}
	s.CostByAgent = make([]AgentCost, 0, len(by))
	for _, a := range by {
		s.CostByAgent = append(s.CostByAgent, *a)
	}
	sort.Slice(s.CostByAgent, func(i, j int) bool { return s.CostByAgent[i].Agent < s.CostByAgent[j].Agent })
}

// CostByAgent is the retained events' spend by agent, sorted by agent: the
// spend fold alone, not the whole summary.
func (l *EventLog) CostByAgent() []AgentCost {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s MetricsSummary
	foldSpend(&l.events, &s)
	return s.CostByAgent
}

// AlertThresholds are metrics.alerts' params (nil is unchecked); an Alert
// is one threshold crossed.
type (
	AlertThresholds = protocol.AlertThresholds
	Alert           = protocol.Alert
)

// Alerts judges the summary against th. The cost budget is checked against
// the cumulative cost, which retention never rolls back.
func (l *EventLog) Alerts(th AlertThresholds) (MetricsSummary, []Alert) {
	s := l.Summary()
	return s, judge(&s, th)
}

// judge lists the thresholds of th that s crosses.
func judge(s *MetricsSummary, th AlertThresholds) []Alert {
	alerts := []Alert{}
	if th.MaxCostUSD != nil && s.CumulativeCostUSD > *th.MaxCostUSD {
		alerts = append(alerts, Alert{Kind: "cost_overage", Observed: s.CumulativeCostUSD, Threshold: *th.MaxCostUSD,
			Message: fmt.Sprintf("cumulative cost $%g is over the budget of $%g", s.CumulativeCostUSD, *th.MaxCostUSD)})
	}
	minActions := 5
	if th.MinActions != nil {
		minActions = *th.MinActions
	}
	if done := s.ActionsSucceeded + s.ActionsFailed; th.MaxErrorRate != nil && done >= minActions && s.ErrorRate > *th.MaxErrorRate {
		alerts = append(alerts, Alert{Kind: "error_rate", Observed: s.ErrorRate, Threshold: *th.MaxErrorRate,
			Message: fmt.Sprintf("error rate %.3f over %d actions is above %.3f", s.ErrorRate, done, *th.MaxErrorRate)})
	}
	if th.MaxAvgLatencyMs != nil && s.AvgLatencyMs > *th.MaxAvgLatencyMs {
		alerts = append(alerts, Alert{Kind: "latency", Observed: s.AvgLatencyMs, Threshold: *th.MaxAvgLatencyMs,
			Message: fmt.Sprintf("average action latency %.1f ms is above %.1f ms", s.AvgLatencyMs, *th.MaxAvgLatencyMs)})
	}
	if th.MaxGoalsUngrounded != nil && s.GoalsUngrounded > *th.MaxGoalsUngrounded {
		alerts = append(alerts, Alert{Kind: "goal_ungrounded", Observed: float64(s.GoalsUngrounded), Threshold: float64(*th.MaxGoalsUngrounded),
			Message: fmt.Sprintf("%d goals were met on ungrounded evidence (at most %d allowed)", s.GoalsUngrounded, *th.MaxGoalsUngrounded)})
	}
	return alerts
}
