package protocol

import "encoding/json"

// AuthParams are the params of session.auth.
type AuthParams struct {
	Token     string `json:"token,omitempty"`
	HostToken string `json:"host_token,omitempty"` // grants the host role
	AgentID   string `json:"agent_id,omitempty"`   // binds the connection to this agent; Token is then the agent's own token
	// MemoryNamespace is accepted and recorded (the connection's log line
	// and server.connections to the host role) and has no effect: this
	// daemon keeps no memory. At most MaxClientName printable bytes.
	MemoryNamespace string `json:"memory_namespace,omitempty"`
}

// AuthResult is the reply to a successful session.auth.
type AuthResult struct {
	OK          bool   `json:"ok"`
	AuthEnabled bool   `json:"auth_enabled"`
	Role        string `json:"role,omitempty"`     // "host" for the host-token path
	AgentID     string `json:"agent_id,omitempty"` // the agent the connection is now bound to
	// Person is who holds the host role: "operator" for the daemon's host
	// token, else the name a token of car-server people was issued to.
	Person string `json:"person,omitempty"`
}

// PersonPrefix starts the principal of a person's decisions: person:NAME.
const PersonPrefix = "person:"

// RoleHost is the role of a connection that authenticated with the host
// token: it may approve when approver_role is host, and cancel any proposal.
const RoleHost = "host"

// HandshakeParams are the params of server.handshake. ProtocolVersion is raw
// so that a missing or non-numeric value can be told apart from a wrong one.
type HandshakeParams struct {
	ProtocolVersion json.RawMessage `json:"protocol_version,omitempty"`
	ClientVersion   string          `json:"client_version,omitempty"`
	// ClientName names the client to a person (on the approvals it causes);
	// without it, ClientVersion does.
	ClientName string `json:"client_name,omitempty"`
}

// MaxClientName is the longest client_name (and client_version) the
// daemon keeps, in bytes.
const MaxClientName = 128

// HandshakeResult is the reply to a successful server.handshake.
type HandshakeResult struct {
	ProtocolVersion       int    `json:"protocol_version"`
	ServerVersion         string `json:"server_version"`
	ClientProtocolVersion int    `json:"client_protocol_version"`
}

// SessionInitParams are the params of session.init.
type SessionInitParams struct {
	Tools    []ToolSchema            `json:"tools"`
	Policies []Raw[PolicyDefinition] `json:"policies,omitempty"`
}

// SessionInitResult is the reply to session.init.
type SessionInitResult struct {
	SessionID          string `json:"session_id"`
	ToolsRegistered    int    `json:"tools_registered"`
	PoliciesRegistered int    `json:"policies_registered"`
}
