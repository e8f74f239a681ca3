package protocol

// Client → server methods.
const (
	MethodSessionAuth        = "session.auth"
	MethodServerHandshake    = "server.handshake"
	MethodSessionInit        = "session.init"
	MethodServerStatus       = "server.status"      // operator: version, uptime, connections, in-flight proposals
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
)

// Server → client requests and notifications.
const (
	MethodToolsExecute = "tools.execute" // request: run a tool the client registered
	MethodToolsCancel  = "tools.cancel"  // notification: the daemon gave up on a tools.execute

	MethodSupervisionIntent = "supervision.intent" // notification: a proposal waits for a supervisor
	MethodMultiRunAgent     = "multi.run_agent"    // request: run one agent, answer an AgentOutput
	MethodEventsEvent       = "events.event"       // notification: an appended event, to an events.subscribe connection
)
