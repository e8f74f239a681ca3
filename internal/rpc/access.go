package rpc

import (
	"github.com/parslee-ai/car-server/protocol"
)

// The capability table: for every client → server method, which principals
// may call it. There are three principals:
//   - a person: a connection authenticated with the host token;
//   - an agent: a connection bound with an agent token (session.auth
//     {token, agent_id});
//   - a plain client: the ordinary token, as upstream has it.
//
// Agents are the governed party everywhere. With approver_role = host,
// plain clients are governed too. docs/security.md's *Security model* carries the
// same table; a test keeps the two, and protocol.Methods, in step.
type access uint8

const (
	// accessUnset is no entry: a method the table forgot. Never served.
	accessUnset access = iota
	// accessAny is every authenticated connection. What a method reaches
	// inside (another connection's proposal, another agent's run) the
	// handler still checks.
	accessAny
	// accessDecide is a person, or a plain client while approver_role is
	// any: deciding, recording, erasing and the operator's backups. Never an
	// agent.
	accessDecide
	// accessHost is the host role only, whatever approver_role says.
	accessHost
)

// String names who the access admits, as docs/security.md's table and the
// refusals say it.
func (a access) String() string {
	switch a {
	case accessAny:
		return "any"
	case accessDecide:
		return "person"
	case accessHost:
		return "host"
	}
	return "none"
}

// methodAccess is the capability table. Every method in methods has a row;
// TestEveryMethodHasAnAccessRow fails when one is missing.
var methodAccess = map[string]access{
	protocol.MethodServerHandshake:   accessAny,
	protocol.MethodSessionInit:       accessAny,
	protocol.MethodServerStatus:      accessAny,
	protocol.MethodApprovalsList:     accessAny,
	protocol.MethodServerConnections: accessAny,
	protocol.MethodRPCDiscover:       accessAny,

	protocol.MethodSessionPolicyOpen:  accessAny,
	protocol.MethodSessionPolicyClose: accessAny,
	protocol.MethodPolicyRegister:     accessAny,
	protocol.MethodPolicyUnregister:   accessAny,
	protocol.MethodPolicyList:         accessAny,

	protocol.MethodToolsRegister: accessAny,
	protocol.MethodToolsList:     accessAny,
	protocol.MethodToolsFeedback: accessAny,

	protocol.MethodHarnessGet:      accessAny,
	protocol.MethodHarnessSet:      accessDecide,
	protocol.MethodHarnessUpdate:   accessDecide,
	protocol.MethodToolsUnregister: accessAny,

	protocol.MethodToolsPoll:              accessAny,
	protocol.MethodToolsCancel:            accessAny,
	protocol.MethodToolsStreamSubscribe:   accessAny,
	protocol.MethodToolsStreamUnsubscribe: accessAny,
	protocol.MethodToolsHandles:           accessAny,

	protocol.MethodStateGet:      accessAny,
	protocol.MethodStateSet:      accessAny,
	protocol.MethodStateExists:   accessAny,
	protocol.MethodStateKeys:     accessAny,
	protocol.MethodStateSnapshot: accessAny,

	protocol.MethodCheckpointSave: accessAny,
	protocol.MethodCheckpointList: accessAny,
	// Restoring or deleting a checkpoint touches what another principal
	// saved: the operator's backups among them.
	protocol.MethodCheckpointRestore: accessDecide,
	protocol.MethodCheckpointDelete:  accessDecide,

	// Capability sets only narrow (the handler refuses widening).
	protocol.MethodSessionCapabilitiesSet: accessAny,
	protocol.MethodSessionCapabilitiesGet: accessAny,

	// An intent only narrows (the handler refuses widening); clearing it
	// widens, so an agent cannot shed the intent it was given. The taint
	// ledger is read by anyone; clearing it is a person's host-role act.
	protocol.MethodSessionIntentSet:   accessAny,
	protocol.MethodSessionIntentGet:   accessAny,
	protocol.MethodSessionIntentClear: accessHost,
	protocol.MethodTaintList:          accessAny,
	protocol.MethodTaintClear:         accessHost,
	// Stricter than transaction_check by anyone; laxer by the host role
	// only (the handler checks).
	protocol.MethodSessionTransactionCheckSet: accessAny,
	protocol.MethodReceiptsVerify:             accessAny,

	protocol.MethodProposalSubmit: accessAny,
	protocol.MethodProposalCancel: accessAny,
	// A candidate runs through proposal.submit's gates; scoring reads
	// what verify and tools.feedback would show this connection.
	protocol.MethodProposalScore: accessAny,
	protocol.MethodProposalPlan:  accessAny,

	protocol.MethodReplanSetConfig:  accessAny,
	protocol.MethodSessionBudgetSet: accessAny,

	protocol.MethodMultiSwarm:      accessAny,
	protocol.MethodMultiPipeline:   accessAny,
	protocol.MethodMultiSupervisor: accessAny,
	protocol.MethodMultiMapReduce:  accessAny,
	protocol.MethodMultiVote:       accessAny,
	protocol.MethodMultiTournament: accessAny,
	// spawn_subtask calls are tool calls in the caller's own proposals,
	// under every gate.
	protocol.MethodMultiSubtask: accessAny,

	protocol.MethodVerify:           accessAny,
	protocol.MethodSimulate:         accessAny,
	protocol.MethodEquivalent:       accessAny,
	protocol.MethodOptimize:         accessAny,
	protocol.MethodVerifyMonteCarlo: accessAny,

	protocol.MethodPermissionGetTier: accessAny,
	// Lowering one's own tier is open; raising it is a decision (the
	// handler asks mayApprove).
	protocol.MethodPermissionSetTier:  accessAny,
	protocol.MethodPermissionClassify: accessAny,
	protocol.MethodPermissionEvaluate: accessAny,
	protocol.MethodPermissionPending:  accessAny,
	protocol.MethodPermissionApprove:  accessDecide,
	protocol.MethodPermissionReject:   accessDecide,

	// A supervisor sees every matching intent and decides it.
	protocol.MethodSupervisionSubscribe:   accessDecide,
	protocol.MethodSupervisionUnsubscribe: accessAny,
	protocol.MethodSupervisionPending:     accessDecide,
	protocol.MethodSupervisionDecide:      accessDecide,

	protocol.MethodHostSubscribe:       accessAny,
	protocol.MethodHostUnsubscribe:     accessAny,
	protocol.MethodHostAgents:          accessAny,
	protocol.MethodHostApprovals:       accessAny,
	protocol.MethodHostEvents:          accessAny,
	protocol.MethodHostRegisterAgent:   accessAny,
	protocol.MethodHostUnregisterAgent: accessAny,
	protocol.MethodHostSetStatus:       accessAny,
	protocol.MethodHostNotify:          accessAny,
	protocol.MethodHostRequestApproval: accessAny,
	// Resolving one's own host.request_approval is open; anything else is a
	// decision (the handler asks mayApprove).
	protocol.MethodHostResolveApproval: accessAny,

	protocol.MethodEventsCount:       accessAny,
	protocol.MethodEventsQuery:       accessAny,
	protocol.MethodEventsChainEnable: accessDecide,
	protocol.MethodEventsChainVerify: accessAny,
	protocol.MethodEventsRetention:   accessHost,
	protocol.MethodEventsSubscribe:   accessAny,
	protocol.MethodEventsUnsubscribe: accessAny,
	protocol.MethodMetricsSummary:    accessAny,
	protocol.MethodMetricsAlerts:     accessAny,
	protocol.MethodEventsCostByAgent: accessAny,

	// Run handlers check that a run is the caller's own, or the caller a host.
	protocol.MethodRunsStart:       accessAny,
	protocol.MethodRunsComplete:    accessAny,
	protocol.MethodRunsRecordTurns: accessAny,
	protocol.MethodRunsSubscribe:   accessAny,
	protocol.MethodRunsUnsubscribe: accessAny,
	protocol.MethodRunsList:        accessAny,
	protocol.MethodRunsGetTrace:    accessAny,

	// agent_permissions.get reads one's own posture, .set only tightens it
	// (the handlers check); a host reads and sets any.
	protocol.MethodAgentPermissionsGet:        accessAny,
	protocol.MethodAgentPermissionsSet:        accessAny,
	protocol.MethodAgentPermissionsSetDefault: accessHost,
	protocol.MethodAgentPermissionsReset:      accessHost,
	protocol.MethodAgentPermissionsEvaluate:   accessAny,
	protocol.MethodAgentsRevoke:               accessHost,

	// An agent leases only its own agent_id; a plain client or the host
	// any (the handlers check). The holder is the caller's principal.
	protocol.MethodLeaseAcquire: accessAny,
	protocol.MethodLeaseRenew:   accessAny,
	protocol.MethodLeaseRelease: accessAny,
	protocol.MethodLeaseStatus:  accessAny,

	// Connector management runs programs on the daemon's machine
	// (connectors.add_stdio) and decides which tools every agent sees:
	// a person's, never an agent's.
	protocol.MethodConnectorsAdd:          accessDecide,
	protocol.MethodConnectorsAddStdio:     accessDecide,
	protocol.MethodConnectorsList:         accessDecide,
	protocol.MethodConnectorsTools:        accessDecide,
	protocol.MethodConnectorsEnableTools:  accessDecide,
	protocol.MethodConnectorsDisableTools: accessDecide,
	protocol.MethodConnectorsRefresh:      accessDecide,
	protocol.MethodConnectorsRemove:       accessDecide,
}

// principal names who the connection is, for logs and refusals.
func (c *conn) principal() string {
	switch {
	case c.isHost():
		return "host"
	case c.agentID() != "":
		return "agent " + c.agentID()
	}
	return "plain client"
}

// mayCall refuses a method the connection's principal may not call, with
// -32003 naming the method, the role it needs and how to get it.
func (c *conn) mayCall(method string) error {
	switch methodAccess[method] {
	case accessAny:
		return nil
	case accessDecide:
		return c.mayApprove(method)
	case accessHost:
		if c.isHost() {
			return nil
		}
		return hostOnly(method)
	}
	return rpcError(protocol.CodeApprovalDenied, "%s has no entry in the capability table, so no connection may call it", method)
}
