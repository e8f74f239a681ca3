package protocol

// The host surface: a person's view of the daemon (upstream's host.*), the
// methods a dashboard, a tray app or the operator CLI use to watch agents and
// decide approvals.
const (
	MethodHostSubscribe       = "host.subscribe"
	MethodHostUnsubscribe     = "host.unsubscribe"
	MethodHostAgents          = "host.agents"
	MethodHostApprovals       = "host.approvals"
	MethodHostEvents          = "host.events"
	MethodHostRegisterAgent   = "host.register_agent"
	MethodHostUnregisterAgent = "host.unregister_agent"
	MethodHostSetStatus       = "host.set_status"
	MethodHostNotify          = "host.notify"
	MethodHostRequestApproval = "host.request_approval"
	MethodHostResolveApproval = "host.resolve_approval"

	MethodHostEvent = "host.event" // notification: something a host subscriber shows happened
)

// HostIdentity tells a host which daemon it is talking to.
type HostIdentity struct {
	Version   string `json:"version"`
	PID       int    `json:"pid"`
	Home      string `json:"home"`
	StartedAt string `json:"started_at"` // RFC 3339
	// Role is this connection's role ("host" for the host token), and
	// ApproverRole who may approve on this daemon ("any" or "host").
	Role         string `json:"role,omitempty"`
	ApproverRole string `json:"approver_role"`
}

// HostResolveParams are the params of host.resolve_approval.
type HostResolveParams struct {
	ApprovalID string `json:"approval_id"`
	Approved   *bool  `json:"approved"`
	Notes      string `json:"notes,omitempty"`
	Limits
}
