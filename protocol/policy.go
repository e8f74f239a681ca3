package protocol

// PolicyDefinition is a rule a client registers (policy.register, or the
// policies slot of session.init).
type PolicyDefinition struct {
	Name      string `json:"name"`
	Rule      string `json:"rule"`              // deny_tool, deny_tool_param or require_state
	Target    string `json:"target,omitempty"`  // the tool (deny_tool, deny_tool_param)
	Key       string `json:"key,omitempty"`     // the parameter (deny_tool_param) or state key (require_state)
	Pattern   string `json:"pattern,omitempty"` // substring of the parameter's string form (deny_tool_param)
	Value     any    `json:"value,omitempty"`   // the JSON value state[key] must equal (require_state)
	SessionID string `json:"session_id,omitempty"`
}

// PolicyInfo describes a policy in force (policy.list).
type PolicyInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Layer       string `json:"layer"` // operator, connection or session
}

// Policy layers, widest first.
const (
	LayerOperator   = "operator"
	LayerConnection = "connection"
	LayerSession    = "session"
)
