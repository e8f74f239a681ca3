package protocol

// MethodToolsFeedback reports each tool's observed outcomes from the
// trajectory store.
const MethodToolsFeedback = "tools.feedback"

// DefaultFeedbackWindowDays is tools.feedback's window without window_days.
const DefaultFeedbackWindowDays = 30

// ToolsFeedbackParams are the params of tools.feedback: the last
// WindowDays UTC days (today included; default 30, at most the daemon's
// trajectory_retention_days), for the named Tools or, without them, every
// tool with a record in the window.
type ToolsFeedbackParams struct {
	WindowDays *int     `json:"window_days,omitempty"`
	Tools      []string `json:"tools,omitempty"`
}

// ToolFeedback is one tool's dispatched attempts in the window. SuccessRate,
// P50Ms and P99Ms are null when nothing was dispatched; the percentiles are
// within 2% of the exact ones.
type ToolFeedback struct {
	Tool        string   `json:"tool"`
	Dispatched  int      `json:"dispatched"`
	Succeeded   int      `json:"succeeded"`
	Failed      int      `json:"failed"`
	SuccessRate *float64 `json:"success_rate" jsonschema:"nullable"`
	P50Ms       *float64 `json:"p50_ms" jsonschema:"nullable"`
	P99Ms       *float64 `json:"p99_ms" jsonschema:"nullable"`
}

// ToolsFeedbackResult is the reply to tools.feedback, tools sorted by name.
type ToolsFeedbackResult struct {
	Tools      []ToolFeedback `json:"tools"`
	WindowDays int            `json:"window_days"`
}
