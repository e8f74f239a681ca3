package protocol

// PolicyDefinition is a rule a client registers (policy.register, or the
// policies slot of session.init).
type PolicyDefinition struct {
	Name      string `json:"name"`
	Rule      string `json:"rule"`              // deny_tool, deny_connector, deny_tool_param, require_state or require_claim
	Target    string `json:"target,omitempty"`  // the tool (deny_tool, deny_tool_param; require_claim: only its calls), or the connector's slug (deny_connector)
	Key       string `json:"key,omitempty"`     // the parameter (deny_tool_param; scope.callerId or scope.claims.<k> read the submission's scope), state key (require_state) or claim (require_claim)
	Pattern   string `json:"pattern,omitempty"` // substring of the parameter's string form (deny_tool_param)
	Value     any    `json:"value,omitempty"`   // the JSON value state[key] (require_state) or the claim (require_claim, optional) must equal
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

// SessionPolicyOpenResult is the reply to session.policy.open.
type SessionPolicyOpenResult struct {
	SessionID string `json:"session_id"`
}

// SessionPolicyCloseParams are the params of session.policy.close.
type SessionPolicyCloseParams struct {
	SessionID string `json:"session_id"`
}

// SessionPolicyCloseResult is the reply to session.policy.close.
type SessionPolicyCloseResult struct {
	Closed bool `json:"closed"`
}

// PolicyScope is where a reply's policies bind: the string "global" (this
// connection, never the whole daemon) or a PolicySessionScope.
type PolicyScope = any

// PolicyScopeGlobal is the scope of a policy bound to the connection.
const PolicyScopeGlobal = "global"

// PolicySessionScope is the scope of a policy bound to a sub-session.
type PolicySessionScope struct {
	SessionID string `json:"session_id"`
}

// PolicyRegisterResult is the reply to policy.register.
type PolicyRegisterResult struct {
	Name       string      `json:"name"`
	Registered string      `json:"registered"` // the name again, as upstream's other shape has it
	Scope      PolicyScope `json:"scope" jsonschema:"oneof_type=string;object"`
}

// PolicyUnregisterParams are the params of policy.unregister.
type PolicyUnregisterParams struct {
	Name      string `json:"name"`
	SessionID string `json:"session_id,omitempty"`
}

// PolicyUnregisterResult is the reply to policy.unregister; Removed counts
// the policies of that name that were removed. Its members are in the
// reply's order.
type PolicyUnregisterResult struct {
	Removed      int         `json:"removed"`
	Scope        PolicyScope `json:"scope" jsonschema:"oneof_type=string;object"`
	Unregistered string      `json:"unregistered"`
}

// PolicyListParams are the params of policy.list.
type PolicyListParams struct {
	SessionID string `json:"session_id,omitempty"`
}

// PolicyListResult is the reply to policy.list.
type PolicyListResult struct {
	Policies []PolicyInfo `json:"policies"`
	Scope    PolicyScope  `json:"scope" jsonschema:"oneof_type=string;object"`
}
