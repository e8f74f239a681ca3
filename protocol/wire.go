package protocol

import (
	"encoding/json"
	"time"
)

// Object is a JSON object whose members this package does not fix: a state
// snapshot, an analysis report or a runtime figure whose fields the
// documents in docs/ describe. The OpenRPC document describes it as "any object".
type Object = map[string]any

// OKResult is the reply of a method that only confirms it acted.
type OKResult struct {
	OK bool `json:"ok"`
}

// SubscriptionResult is the reply to a *.unsubscribe method.
type SubscriptionResult struct {
	Subscribed    bool `json:"subscribed"`
	WasSubscribed bool `json:"was_subscribed"`
}

// ServerStatusResult is the reply to server.status. Its members are in the
// order the daemon sends them, alphabetical.
type ServerStatusResult struct {
	Connections int `json:"connections"`
	// Members are the daemons sharing the store, this one included; a
	// member whose heartbeat stopped is listed with alive false.
	Members []Member `json:"members"`
	// MembersError says why the member list could not be read (the store is
	// unavailable); Members is then empty.
	MembersError string        `json:"members_error,omitempty"`
	Runtime      RuntimeStatus `json:"runtime"`
	// Store is the kind of store the daemon keeps its shared parts in:
	// file (the journals under $CAR_HOME) or postgres.
	Store   string `json:"store,omitempty"`
	Version string `json:"version"`
	// Listen are the TCP addresses the daemon serves WebSocket and the
	// dashboard on, as it listens (a port 0 resolved).
	Listen []string `json:"listen"`
}

// RuntimeStatus is what the runtime is doing now, in server.status.
type RuntimeStatus struct {
	UptimeSecs        float64 `json:"uptime_secs"`
	Sessions          int     `json:"sessions"`
	ProposalsInFlight int64   `json:"proposals_in_flight"`
	Supervisors       int     `json:"supervisors"`
	ParkedIntents     int     `json:"parked_intents"`
	OperatorPolicies  int     `json:"operator_policies"`
	Events            int     `json:"events"`
	// What the rings and queues hold now, each bounded by bytes besides
	// count (docs/security.md's limits table).
	EventBytes          int64  `json:"event_bytes"`           // the event log (event_log_bytes)
	HostEvents          int    `json:"host_events"`           // the host event ring's events
	HostEventBytes      int64  `json:"host_event_bytes"`      // its bytes (host_event_ring_bytes)
	FeedQueueBytes      int64  `json:"feed_queue_bytes"`      // every live feed's undelivered notifications (feed_queue_bytes per subscriber)
	StreamBufferedBytes int64  `json:"stream_buffered_bytes"` // undrained chunks of every stream handle (max_stream_buffered_bytes)
	StreamChunksDropped uint64 `json:"stream_chunks_dropped"` // chunks dropped since start because all handles held max_stream_buffered_bytes
}

// Member is one daemon sharing the store.
type Member struct {
	ID            string    `json:"id"`
	Version       string    `json:"version"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Alive         bool      `json:"alive"`
}

// ApprovalRecord is one decision on the durable approval ledger.
type ApprovalRecord struct {
	Fingerprint  string    `json:"fingerprint"`
	Decision     string    `json:"decision"` // approved or rejected
	RequiredTier string    `json:"required_tier"`
	Reviewer     string    `json:"reviewer"`
	Reason       string    `json:"reason,omitempty"`
	Evidence     any       `json:"evidence,omitempty"`
	RecordedAt   time.Time `json:"recorded_at"`
	// The operation decided, as far as the door that decided it knew it:
	// the fingerprint's inputs and the tier the deciding session held.
	Type         string `json:"type,omitempty"`
	Tool         string `json:"tool,omitempty"`
	ParamsDigest string `json:"params_digest,omitempty"` // sha256 of the canonical parameters, hex
	GrantedTier  string `json:"granted_tier,omitempty"`
	// ExpiresAt ends an approval (nil: never). Uses is how many admissions
	// it allows (0: unlimited) and Used how many it has allowed; an
	// approval past either is gone and the next identical operation asks.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Uses      int        `json:"uses,omitempty"`
	Used      int        `json:"used,omitempty"`
	// Approvers are the distinct people (person:NAME) who approved this
	// operation at this tier while the approval stood: a quorum rule's
	// approval counts once they are as many as it requires.
	Approvers []string `json:"approvers,omitempty"`
}

// ApprovalsListResult is the reply to approvals.list.
type ApprovalsListResult struct {
	Approvals []ApprovalRecord `json:"approvals"`
}

// TierResult is the reply to permission.get_tier and permission.set_tier.
type TierResult struct {
	GrantedTier string `json:"granted_tier"` // read_only, sandbox_edit or full_access
}

// SetTierParams are the params of permission.set_tier.
type SetTierParams struct {
	Tier string `json:"tier"`
}

// Classification is one action's row in permission.classify.
type Classification struct {
	ActionID            string        `json:"action_id"`
	Tool                string        `json:"tool,omitempty"`
	RequiredTier        string        `json:"required_tier"`
	Reversibility       Reversibility `json:"reversibility"`
	MissingCompensation bool          `json:"missing_compensation"`
	Signals             []string      `json:"signals"`
}

// ClassifyResult is the reply to permission.classify.
type ClassifyResult struct {
	Classifications          []Classification `json:"classifications"`
	DeclaredRollbackContract Reversibility    `json:"declared_rollback_contract"`
}

// EvaluateResult is the reply to permission.evaluate.
type EvaluateResult struct {
	Decisions []PermissionDecision `json:"decisions"`
	// Intent is the intent gate's verdict on each action; omitted when no
	// intent is in force.
	Intent []IntentDecision `json:"intent,omitempty"`
}

// PendingResult is the reply to permission.pending: the rows that need an
// approval.
type PendingResult struct {
	Pending []PermissionDecision `json:"pending"`
}

// DecisionParams are the params of permission.approve and
// permission.reject: {fingerprint, required_tier} or {action}.
type DecisionParams struct {
	Fingerprint  string          `json:"fingerprint,omitempty"`
	RequiredTier string          `json:"required_tier,omitempty"`
	Action       json.RawMessage `json:"action,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Evidence     any             `json:"evidence,omitempty"`
	Limits
}

// Limits bound an approval: ExpiresIn seconds from now (0: no expiry) and
// Uses admissions (0: unlimited). Rejections take neither.
type Limits struct {
	ExpiresIn int64 `json:"expires_in,omitempty"`
	Uses      int   `json:"uses,omitempty"`
}

// SupervisionSubscribeParams are the params of supervision.subscribe.
type SupervisionSubscribeParams struct {
	Filter *SupervisionFilter `json:"filter,omitempty"`
}

// SupervisionFilter says which intents a supervisor is sent.
type SupervisionFilter struct {
	Tools            []string      `json:"tools,omitempty"`
	Sessions         []string      `json:"sessions,omitempty"`
	MinReversibility Reversibility `json:"min_reversibility,omitempty"`
}

// SupervisionSubscribeResult is the reply to supervision.subscribe.
type SupervisionSubscribeResult struct {
	DecisionTimeoutMs int64 `json:"decision_timeout_ms"`
	Subscribed        bool  `json:"subscribed"`
	Supervisors       int   `json:"supervisors"`
}

// IntentAction is one action of an intent: its parameter names and a
// digest, never parameter values.
type IntentAction struct {
	ID               string        `json:"id"`
	ActionType       ActionType    `json:"action_type"`
	Tool             string        `json:"tool,omitempty"`
	Reversibility    Reversibility `json:"reversibility"`
	ParameterKeys    []string      `json:"parameter_keys"`
	ParametersDigest string        `json:"parameters_digest"`
}

// Intent is a proposal waiting for a supervisor's decision.
type Intent struct {
	ID            string            `json:"id"`
	ProposalID    string            `json:"proposal_id"`
	Source        string            `json:"source"`
	SessionID     string            `json:"session_id,omitempty"`
	Scope         map[string]string `json:"scope,omitempty"`
	Reversibility Reversibility     `json:"reversibility"`
	CreatedAt     time.Time         `json:"created_at"`
	Actions       []IntentAction    `json:"actions"`
	// Node is the daemon the proposal waits on (several daemons on one
	// store only).
	Node string `json:"node,omitempty"`
	// ActionsOmitted counts the actions left out of an intent that came from
	// another daemon, so that it fits one cross-daemon notification.
	ActionsOmitted int `json:"actions_omitted,omitempty"`
}

// IntentNotice is the params of supervision.intent; dropped > 0 says that
// many intents before it were dropped: re-read supervision.pending.
type IntentNotice struct {
	Intent
	Cursor  uint64 `json:"cursor"`
	Dropped uint64 `json:"dropped"`
}

// SupervisionPendingResult is the reply to supervision.pending.
type SupervisionPendingResult struct {
	Intents []Intent `json:"intents"`
}

// SupervisionDecideParams are the params of supervision.decide.
type SupervisionDecideParams struct {
	IntentID string               `json:"intent_id"`
	Decision *SupervisionDecision `json:"decision"`
}

// SupervisionDecision is a supervisor's answer to an intent.
type SupervisionDecision struct {
	Kind   string `json:"kind"` // allow, deny or escalate
	Reason string `json:"reason,omitempty"`
}

// SupervisionDecideResult is the reply to supervision.decide.
type SupervisionDecideResult struct {
	Decided bool `json:"decided"`
}

// EventsQueryParams are the params of events.query, and the engine's
// filter of events; every set field must match.
type EventsQueryParams struct {
	Kinds       []EventKind       `json:"kinds,omitempty"`
	ActionID    string            `json:"action_id,omitempty"`
	ProposalID  string            `json:"proposal_id,omitempty"`
	Since       *time.Time        `json:"since,omitempty"`
	Until       *time.Time        `json:"until,omitempty"`
	DataMatches map[string]string `json:"data_matches,omitempty"`
	Limit       int               `json:"limit,omitempty"`
	// AfterCursor keeps only events with a larger Seq: how a subscriber
	// backfills a gap in its events.event feed (in a cluster, with Node:
	// Seq is the place in that daemon's chain).
	AfterCursor uint64 `json:"after_cursor,omitempty"`
	// Node keeps only the events one daemon of a cluster recorded.
	Node string `json:"node,omitempty"`
}

// Event is one entry of the event log. Node, in a cluster, is the daemon
// that recorded it; Seq is its place in that daemon's chain. Data holds
// names and counts, never parameter values.
type Event struct {
	Seq        uint64    `json:"seq"`
	Node       string    `json:"node,omitempty"`
	Kind       EventKind `json:"kind"`
	Timestamp  time.Time `json:"timestamp"`
	ProposalID string    `json:"proposal_id,omitempty"`
	ActionID   string    `json:"action_id,omitempty"`
	Connection string    `json:"connection,omitempty"`
	Data       Object    `json:"data,omitempty"`
	PrevHash   string    `json:"prev_hash,omitempty"`
	Hash       string    `json:"hash,omitempty"`
}

// EventsQueryResult is the reply to events.query, newest first. Truncated,
// in a cluster, says that older events were not looked at.
type EventsQueryResult struct {
	Count     int     `json:"count"`
	Events    []Event `json:"events"`
	Truncated bool    `json:"truncated,omitempty"`
}

// ChainVerifyResult is the reply to events.chain.verify: verified, or the
// index where the chain breaks. In a cluster, Verified is the sum over
// Nodes, every daemon's chain, and TamperedAt (when one breaks) the index of
// the first bad event in the shared log's order.
type ChainVerifyResult struct {
	Verified   *int        `json:"verified,omitempty"` // events checked
	TamperedAt *int        `json:"tampered_at,omitempty"`
	Nodes      []NodeChain `json:"nodes,omitempty"`
}

// NodeChain is one daemon's chain in a cluster: how many of its events
// verify, and the seq of the first that does not (absent: the chain holds).
type NodeChain struct {
	Node     string  `json:"node"`
	Verified int     `json:"verified"`
	Tampered *uint64 `json:"tampered,omitempty"`
}

// AuditStatus is the reply to audit.status: what the daemon's last check
// of its durable event log found, as car-server audit verify checks it.
type AuditStatus struct {
	// Log is what was checked: "file" (segments, signed heads), "postgres"
	// (every daemon's chain, no signed heads) or "memory" (no durable log).
	Log       string     `json:"log"`
	OK        bool       `json:"ok"`
	Failure   string     `json:"failure,omitempty"` // the first failure and what it means
	Events    int        `json:"events"`
	FirstSeq  uint64     `json:"first_seq,omitempty"`
	LastSeq   uint64     `json:"last_seq,omitempty"`
	Heads     int        `json:"heads"`
	Head      *AuditHead `json:"head,omitempty"`    // the newest signed head, which the log was verified up to
	Daemons   int        `json:"daemons,omitempty"` // postgres: the chains checked
	CheckedAt time.Time  `json:"checked_at"`
}

// AuditHead is a signed head as audit.status names it.
type AuditHead struct {
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	Node string    `json:"node,omitempty"`
}

// RetentionPolicy bounds the event log.
type RetentionPolicy struct {
	MaxEvents  *uint64 `json:"max_events,omitempty"`
	MaxAgeSecs *uint64 `json:"max_age_secs,omitempty"`
}

// RetentionParams are the params of events.retention; without a policy it
// reads the one in force.
type RetentionParams struct {
	Policy *RetentionPolicy `json:"policy,omitempty"`
}

// RetentionResult is the reply to events.retention.
type RetentionResult struct {
	Policy  RetentionPolicy `json:"policy"`
	Removed *int            `json:"removed,omitempty"`
}

// HostEventsParams are the params of host.events.
type HostEventsParams struct {
	Limit int `json:"limit,omitempty"` // default 100
}

// HostAgent is an agent a client registered with the host surface.
type HostAgent struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	Capabilities []string  `json:"capabilities"`
	Project      string    `json:"project,omitempty"`
	PID          *int64    `json:"pid,omitempty"`
	Display      Object    `json:"display,omitempty"`
	Metadata     Object    `json:"metadata,omitempty"`
	Status       string    `json:"status"`
	CurrentTask  string    `json:"current_task,omitempty"`
	Message      string    `json:"message,omitempty"`
	Payload      Object    `json:"payload,omitempty"`
	SessionID    string    `json:"session_id"`
	RegisteredAt time.Time `json:"registered_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// HostApproval is a question a person answers with host.resolve_approval.
type HostApproval struct {
	ID                string     `json:"id"`
	AgentID           string     `json:"agent_id,omitempty"`
	Title             string     `json:"title"`
	Description       string     `json:"description,omitempty"`
	Context           Object     `json:"context,omitempty"`
	RequiredApprovals int        `json:"required_approvals"`
	Status            string     `json:"status"` // pending, approved, denied or expired
	ClientID          string     `json:"client_id,omitempty"`
	CreatedAt         time.Time  `json:"created_at"`
	ResolvedAt        *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy        string     `json:"resolved_by,omitempty"`
	Approved          *bool      `json:"approved,omitempty"`
	Notes             string     `json:"notes,omitempty"`
	// Approvers are the people (person:NAME) whose approvals count so far
	// while RequiredApprovals (a quorum rule's) are not all given.
	Approvers []string `json:"approvers,omitempty"`
	Node      string   `json:"node,omitempty"` // the daemon that raised it (several daemons on one store only)
	// RequestedBy is who caused it: the connection that asked with
	// host.request_approval, or whose proposal the daemon parked.
	RequestedBy *ApprovalRequester `json:"requested_by,omitempty"`
}

// Principals an approval's requester can be.
const (
	PrincipalAgent = "agent" // a connection bound with an agent token
	PrincipalPlain = "plain" // the ordinary token
	PrincipalHost  = "host"  // the host token
)

// ApprovalRequester names the principal behind an approval, so that a
// person sees who asked, not only a connection id.
type ApprovalRequester struct {
	Principal string `json:"principal"` // agent, plain or host
	// AgentID is the agent an agent-bound connection is bound to, and
	// AgentName that agent's name when it registered with the host surface
	// under the same id.
	AgentID   string `json:"agent_id,omitempty"`
	AgentName string `json:"agent_name,omitempty"`
	// ClientName is what the client called itself in server.handshake
	// (client_name, else client_version).
	ClientName string `json:"client_name,omitempty"`
	Connection string `json:"connection"`
}

// String says who asked as a person reads it: "agent planner (Planner)
// via my-ide, connection c1", "plain client my-ide, connection c1" or
// "host, connection c1".
func (r ApprovalRequester) String() string {
	var who string
	switch r.Principal {
	case PrincipalAgent:
		who = "agent " + r.AgentID
		if r.AgentName != "" {
			who += " (" + r.AgentName + ")"
		}
	case PrincipalHost:
		who = "host"
	default:
		who = "plain client"
		if r.ClientName != "" {
			who += " " + r.ClientName
		}
	}
	if r.ClientName != "" && (r.Principal == PrincipalAgent || r.Principal == PrincipalHost) {
		who += " via " + r.ClientName
	}
	return who + ", connection " + r.Connection
}

// HostEventEntry is something a host subscriber shows happened.
type HostEventEntry struct {
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Kind      string    `json:"kind"`
	AgentID   string    `json:"agent_id,omitempty"`
	Message   string    `json:"message,omitempty"`
	Payload   Object    `json:"payload"`
	Node      string    `json:"node,omitempty"` // the daemon it happened on (several daemons on one store only)
}

// HostEventNotice is the params of host.event; dropped > 0 says that many
// events before it were dropped: re-read host.events, host.agents and
// host.approvals.
type HostEventNotice struct {
	HostEventEntry
	Cursor  uint64 `json:"cursor"`
	Dropped uint64 `json:"dropped"`
}

// HostSnapshot is the reply to host.subscribe.
type HostSnapshot struct {
	Subscribed bool             `json:"subscribed"`
	Agents     []HostAgent      `json:"agents"`
	Approvals  []HostApproval   `json:"approvals"`
	Events     []HostEventEntry `json:"events"`
	Devices    []any            `json:"devices"`
	Identity   HostIdentity     `json:"identity"`
}

// HostApprovalsResult is the reply to host.approvals.
type HostApprovalsResult struct {
	Approvals []HostApproval `json:"approvals"`
}

// HostEventsResult is the reply to host.events.
type HostEventsResult struct {
	Events []HostEventEntry `json:"events"`
}

// HostAgentParams are the params of host.register_agent.
type HostAgentParams struct {
	ID           string   `json:"id,omitempty"`
	Name         string   `json:"name"`
	Kind         string   `json:"kind"`
	Capabilities []string `json:"capabilities,omitempty"`
	Project      string   `json:"project,omitempty"`
	PID          *int64   `json:"pid,omitempty"`
	Display      Object   `json:"display,omitempty"`
	Metadata     Object   `json:"metadata,omitempty"`
}

// HostAgentIDParams are the params of host.unregister_agent.
type HostAgentIDParams struct {
	AgentID string `json:"agent_id"`
}

// HostStatusParams are the params of host.set_status.
type HostStatusParams struct {
	AgentID     string `json:"agent_id"`
	Status      string `json:"status"` // idle, running, waiting_for_approval, paused, completed, errored or stopped
	CurrentTask string `json:"current_task,omitempty"`
	Message     string `json:"message,omitempty"`
	Payload     Object `json:"payload,omitempty"`
}

// HostNotifyParams are the params of host.notify.
type HostNotifyParams struct {
	Kind    string `json:"kind,omitempty"` // default host.notification
	AgentID string `json:"agent_id,omitempty"`
	Message string `json:"message,omitempty"`
	Payload Object `json:"payload,omitempty"`
}

// HostApprovalParams are the params of host.request_approval.
type HostApprovalParams struct {
	AgentID           string `json:"agent_id,omitempty"`
	Title             string `json:"title"`
	Description       string `json:"description,omitempty"`
	Context           Object `json:"context,omitempty"`
	RequiredApprovals int    `json:"required_approvals,omitempty"`
}

// ConnectionInfo is one open connection in server.connections.
type ConnectionInfo struct {
	ID     string `json:"id"`
	Role   string `json:"role"` // host, client or unauthenticated
	Tier   string `json:"tier"` // the standing permission tier
	Remote string `json:"remote,omitempty"`
	// Principal, AgentID and ClientName say who an authenticated
	// connection is, as an approval's requested_by does (agent, plain or
	// host; the agent it is bound to; what server.handshake called its
	// client), so that a person can tell a reviewer's or a submitter's
	// connection by more than its id. Only a host-role caller is told.
	Principal  string `json:"principal,omitempty"`
	AgentID    string `json:"agent_id,omitempty"`
	ClientName string `json:"client_name,omitempty"`
	// MemoryNamespace is what session.auth named; it has no effect.
	MemoryNamespace string `json:"memory_namespace,omitempty"`
}

// ServerConnectionsResult is the reply to server.connections; Self is the
// caller's own connection id.
type ServerConnectionsResult struct {
	Connections []ConnectionInfo `json:"connections"`
	Self        string           `json:"self"`
}
