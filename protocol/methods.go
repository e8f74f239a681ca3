package protocol

// Client → server methods.
const (
	MethodSessionAuth        = "session.auth"
	MethodServerHandshake    = "server.handshake"
	MethodSessionInit        = "session.init"
	MethodServerStatus       = "server.status"      // operator: version, uptime, connections, in-flight proposals, store members
	MethodApprovalsList      = "approvals.list"     // operator: every decision on the approval ledger
	MethodServerConnections  = "server.connections" // the open connections, their role and standing tier
	MethodSessionPolicyOpen  = "session.policy.open"
	MethodSessionPolicyClose = "session.policy.close"

	MethodPolicyRegister   = "policy.register"
	MethodPolicyUnregister = "policy.unregister"
	MethodPolicyList       = "policy.list"

	MethodToolsRegister   = "tools.register"
	MethodToolsList       = "tools.list"
	MethodToolsUnregister = "tools.unregister"

	MethodToolsPoll              = "tools.poll"
	MethodToolsStreamSubscribe   = "tools.stream.subscribe"
	MethodToolsStreamUnsubscribe = "tools.stream.unsubscribe"
	MethodToolsHandles           = "tools.handles"
	// tools.cancel {handle} is also a client → server request: the same
	// name as the notification below, the opposite direction.

	MethodStateGet      = "state.get"
	MethodStateSet      = "state.set"
	MethodStateExists   = "state.exists"
	MethodStateKeys     = "state.keys"
	MethodStateSnapshot = "state.snapshot"

	MethodProposalSubmit = "proposal.submit"
	MethodProposalCancel = "proposal.cancel"

	MethodMultiSwarm      = "multi.swarm"
	MethodMultiPipeline   = "multi.pipeline"
	MethodMultiSupervisor = "multi.supervisor"
	MethodMultiMapReduce  = "multi.map_reduce"
	MethodMultiVote       = "multi.vote"
	MethodMultiTournament = "multi.tournament"
	MethodMultiSubtask    = "multi.subtask"

	MethodVerify           = "verify"
	MethodSimulate         = "simulate"
	MethodEquivalent       = "equivalent"
	MethodOptimize         = "optimize"
	MethodVerifyMonteCarlo = "verify.monte_carlo"

	MethodPermissionGetTier  = "permission.get_tier"
	MethodPermissionSetTier  = "permission.set_tier"
	MethodPermissionClassify = "permission.classify"
	MethodPermissionEvaluate = "permission.evaluate"
	MethodPermissionPending  = "permission.pending"
	MethodPermissionApprove  = "permission.approve"
	MethodPermissionReject   = "permission.reject"

	MethodSupervisionSubscribe   = "supervision.subscribe"
	MethodSupervisionUnsubscribe = "supervision.unsubscribe"
	MethodSupervisionPending     = "supervision.pending"
	MethodSupervisionDecide      = "supervision.decide"

	MethodEventsCount       = "events.count"
	MethodEventsQuery       = "events.query"
	MethodEventsChainEnable = "events.chain.enable"
	MethodEventsChainVerify = "events.chain.verify"
	MethodEventsRetention   = "events.retention"
	MethodEventsSubscribe   = "events.subscribe"
	MethodEventsUnsubscribe = "events.unsubscribe"
	MethodMetricsSummary    = "metrics.summary"
	MethodMetricsAlerts     = "metrics.alerts"
	MethodEventsCostByAgent = "events.cost_by_agent"

	MethodRunsStart       = "runs.start"
	MethodRunsComplete    = "runs.complete"
	MethodRunsRecordTurns = "runs.record_turns"
	MethodRunsSubscribe   = "runs.subscribe"
	MethodRunsUnsubscribe = "runs.unsubscribe"
	MethodRunsList        = "runs.list"
	MethodRunsGetTrace    = "runs.get_trace"

	MethodAgentPermissionsGet        = "agent_permissions.get"
	MethodAgentPermissionsSet        = "agent_permissions.set"
	MethodAgentPermissionsSetDefault = "agent_permissions.set_default"
	MethodAgentPermissionsReset      = "agent_permissions.reset"
	MethodAgentPermissionsEvaluate   = "agent_permissions.evaluate"
	MethodAgentsRevoke               = "agents.revoke" // host role: close the connections bound to an agent whose token is revoked

	MethodLeaseAcquire = "lease.acquire"
	MethodLeaseRenew   = "lease.renew"
	MethodLeaseRelease = "lease.release"
	MethodLeaseStatus  = "lease.status"
)

// Server → client requests and notifications.
const (
	MethodToolsExecute = "tools.execute" // request: run a tool the client registered
	MethodToolsCancel  = "tools.cancel"  // notification: the daemon gave up on a tools.execute, or cancelled a handle

	MethodToolsStreamChunk = "tools.stream.chunk" // client → server notification: a chunk of a handle the client runs
	MethodToolsStreamEvent = "tools.stream.event" // notification: a chunk, to a tools.stream.subscribe connection

	MethodSupervisionIntent = "supervision.intent" // notification: a proposal waits for a supervisor
	MethodMultiRunAgent     = "multi.run_agent"    // request: run one agent, answer an AgentOutput
	MethodEventsEvent       = "events.event"       // notification: an appended event, to an events.subscribe connection
	MethodRunsTraceEvent    = "runs.trace.event"   // notification: a record appended to a subscribed run
)
