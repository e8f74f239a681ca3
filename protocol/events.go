package protocol

// EventKind names what happened in an event (proposal_received,
// action_failed, …: docs/execution.md lists them).
type EventKind string

// EventsSubscribeParams are the params of events.subscribe: which events
// the feed carries. Empty fields match everything.
type EventsSubscribeParams struct {
	Kinds      []EventKind `json:"kinds,omitempty"`
	ProposalID string      `json:"proposal_id,omitempty"`
}

// EventsSubscribeResult is the reply to events.subscribe. Cursor is the seq
// of the last event appended before the subscription took effect: history
// up to it is in events.query, and the feed carries what follows.
type EventsSubscribeResult struct {
	Subscribed bool   `json:"subscribed"`
	Cursor     uint64 `json:"cursor"`
}

// EventsUnsubscribeResult is the reply to events.unsubscribe, as to every
// *.unsubscribe.
type EventsUnsubscribeResult = SubscriptionResult

// EventNotice is the params of an events.event notification. Cursor is the
// event's seq. Missed, when present, says that the subscriber fell behind
// and lost matching events before this one.
type EventNotice struct {
	Cursor uint64        `json:"cursor"`
	Event  Event         `json:"event"`
	Missed *EventsMissed `json:"missed,omitempty"`
}

// EventsMissed is a gap in an events.event feed: Count matching events with
// seq between AfterCursor and the notice's cursor were dropped. The
// subscriber gets them back with events.query {after_cursor, kinds?,
// proposal_id?}, as long as the event log still retains them.
//
// In a cluster, where each daemon numbers its own events, Cursors says for
// each daemon whose events the feed has carried where its backfill starts:
// events.query {node, after_cursor: Cursors[node], kinds?, proposal_id?}.
type EventsMissed struct {
	Count       uint64            `json:"count"`
	AfterCursor uint64            `json:"after_cursor"`
	Cursors     map[string]uint64 `json:"cursors,omitempty"`
}

// ProposalCancelParams are the params of proposal.cancel.
type ProposalCancelParams struct {
	ProposalID string `json:"proposal_id"`
	Reason     string `json:"reason,omitempty"`
}

// ProposalCancelResult is the reply to proposal.cancel: whether a running
// proposal this connection may cancel was stopped.
type ProposalCancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// AgentCost is one agent's spend in events.cost_by_agent.
type AgentCost struct {
	Agent     string  `json:"agent"`
	Calls     int     `json:"calls"`
	TokensIn  int64   `json:"tokens_in"`
	TokensOut int64   `json:"tokens_out"`
	CostUSD   float64 `json:"cost_usd"`
}

// AlertThresholds are the params of metrics.alerts; an absent threshold is
// not checked.
type AlertThresholds struct {
	MaxCostUSD         *float64 `json:"max_cost_usd,omitempty"`
	MaxErrorRate       *float64 `json:"max_error_rate,omitempty"`
	MaxAvgLatencyMs    *float64 `json:"max_avg_latency_ms,omitempty"`
	MaxGoalsUngrounded *int     `json:"max_goals_ungrounded,omitempty"`
	MinActions         *int     `json:"min_actions,omitempty"` // below this many actions the error rate is not judged (5)
}

// Alert is one threshold metrics.alerts found crossed.
type Alert struct {
	Kind      string  `json:"kind"` // cost_overage, error_rate, latency or goal_ungrounded
	Message   string  `json:"message"`
	Observed  float64 `json:"observed"`
	Threshold float64 `json:"threshold"`
}

// MetricsAlertsResult is the reply to metrics.alerts: the metrics.summary
// it judged, and the thresholds crossed.
type MetricsAlertsResult struct {
	Alerts  []Alert        `json:"alerts"`
	Summary MetricsSummary `json:"summary"`
}

// MetricsSummary is the reply to metrics.summary: the operational rollup of
// the retained events.
type MetricsSummary struct {
	TotalEvents         int         `json:"total_events"`
	ProposalsReceived   int         `json:"proposals_received"`
	ActionsSucceeded    int         `json:"actions_succeeded"`
	ActionsFailed       int         `json:"actions_failed"`
	ActionsRejected     int         `json:"actions_rejected"`
	ActionsSkipped      int         `json:"actions_skipped"`
	SuccessRate         float64     `json:"success_rate"`
	ErrorRate           float64     `json:"error_rate"`
	AvgLatencyMs        float64     `json:"avg_latency_ms"`
	ToolCancellations   int         `json:"tool_cancellations"`
	GateRejections      int         `json:"gate_rejections"`
	PolicyViolations    int         `json:"policy_violations"`
	ApprovalsRecorded   int         `json:"approvals_recorded"`
	PermissionDecisions int         `json:"permission_decisions"`
	CostUSD             float64     `json:"cost_usd"`
	CumulativeCostUSD   float64     `json:"cumulative_cost_usd"`
	TokensIn            int         `json:"tokens_in"`
	TokensOut           int         `json:"tokens_out"`
	GoalEvaluations     int         `json:"goal_evaluations"` // upstream's goal fields: this daemon evaluates no goals yet
	GoalsMet            int         `json:"goals_met"`
	GoalsUngrounded     int         `json:"goals_ungrounded"`
	CostByAgent         []AgentCost `json:"cost_by_agent"`
	CallbackP50Ms       float64     `json:"callback_p50_ms"` // median duration of tool calls that made a callback
	CallbackP99Ms       float64     `json:"callback_p99_ms"`
	// SummarizedEvents is set in a cluster only: the counts, rates and
	// spend fold the newest SummarizedEvents events of the shared log,
	// while TotalEvents counts all of them.
	SummarizedEvents *int `json:"summarized_events,omitempty"`
}
