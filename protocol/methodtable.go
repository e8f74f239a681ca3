package protocol

import "encoding/json"

// MethodRPCDiscover returns the OpenRPC document of this protocol.
const MethodRPCDiscover = "rpc.discover"

// MethodSpec describes one method for the OpenRPC document (openrpc.json),
// which is generated from these tables: adding a method is one entry here,
// then make openrpc.
type MethodSpec struct {
	Name    string
	Summary string
	// Params is a value of the params type: a struct is taken by name, a
	// slice is the whole params array; nil means no params.
	Params any
	// Result is a value of the result type (json.RawMessage: any JSON
	// value; a nil pointer: that type or null; Null: null); nil means a
	// notification, which has no reply.
	Result any
	// Errors are the codes the method answers beyond the ones every method
	// may answer (invalid params, internal error, handler deadline).
	Errors []int
}

// BeforeHandshake are the client methods served before server.handshake;
// every other one answers -32005 until the connection has agreed on the
// protocol version (unless the daemon's require_handshake is off).
var BeforeHandshake = map[string]bool{
	MethodSessionAuth:     true,
	MethodServerHandshake: true,
	MethodRPCDiscover:     true,
}

// Null is the result of a method that answers null.
type Null struct{}

// Methods are the client → server methods, in the order of docs/protocol.md's table.
var Methods = []MethodSpec{
	{Name: MethodSessionAuth, Summary: "Authenticate the connection; must be the first request when auth is on.", Params: AuthParams{}, Result: AuthResult{}, Errors: []int{CodeAuthRequired}},
	{Name: MethodServerHandshake, Summary: "Agree on the protocol version.", Params: HandshakeParams{}, Result: HandshakeResult{}, Errors: []int{CodeVersionMismatch}},
	{Name: MethodRPCDiscover, Summary: "This OpenRPC document.", Result: Object{}},
	{Name: MethodSessionInit, Summary: "Register tools and policies in one call.", Params: SessionInitParams{}, Result: SessionInitResult{}},
	{Name: MethodServerStatus, Summary: "Version, connections, runtime figures, and the store with its members (operator).", Result: ServerStatusResult{}},
	{Name: MethodApprovalsList, Summary: "Every decision on the approval ledger (operator).", Result: ApprovalsListResult{}},
	{Name: MethodServerConnections, Summary: "The open connections, their role and standing tier.", Result: ServerConnectionsResult{}},
	{Name: MethodSessionPolicyOpen, Summary: "Open a policy sub-session inside the connection.", Result: SessionPolicyOpenResult{}},
	{Name: MethodSessionPolicyClose, Summary: "Close a policy sub-session; idempotent.", Params: SessionPolicyCloseParams{}, Result: SessionPolicyCloseResult{}},

	{Name: MethodPolicyRegister, Summary: "Register a policy on the connection or a sub-session.", Params: PolicyDefinition{}, Result: PolicyRegisterResult{}},
	{Name: MethodPolicyUnregister, Summary: "Remove every policy of that name.", Params: PolicyUnregisterParams{}, Result: PolicyUnregisterResult{}},
	{Name: MethodPolicyList, Summary: "The policies in force, operator rules included.", Params: PolicyListParams{}, Result: PolicyListResult{}},

	{Name: MethodToolsRegister, Summary: "Register tools on the connection; answers how many.", Params: []ToolSchema{}, Result: 0},
	{Name: MethodToolsList, Summary: "The connection's tools, sorted by name.", Result: ToolsListResult{}},
	{Name: MethodHarnessGet, Summary: "The daemon-wide harness config: default max_retries, retry_backoff_ms and planning_max_replans.", Result: HarnessConfig{}},
	{Name: MethodHarnessSet, Summary: "Replace the named fields of the harness config; returns the config after.", Params: HarnessFields{}, Result: HarnessConfig{}},
	{Name: MethodHarnessUpdate, Summary: "Set, then add to, fields of the harness config in one atomic step; returns the config after.", Params: HarnessUpdateParams{}, Result: HarnessConfig{}},
	{Name: MethodToolsFeedback, Summary: "Each tool's dispatched attempts in a window of days: counts, success rate, p50 and p99.", Params: ToolsFeedbackParams{}, Result: ToolsFeedbackResult{}},
	{Name: MethodToolsUnregister, Summary: "Remove a tool; removed 0 is not an error.", Params: ToolsUnregisterParams{}, Result: ToolsUnregisterResult{}},
	{Name: MethodToolsHandles, Summary: "The stream handles the connection may see (every one for a host), with their latest progress.", Result: ToolHandlesResult{}},

	{Name: MethodToolsPoll, Summary: "Drain a streaming handle's chunks since the last poll; null for an unknown or consumed handle.", Params: ToolHandleParams{}, Result: (*ToolPollResult)(nil)},
	{Name: MethodToolsCancel, Summary: "Cancel a running handle; its tool's connection is sent tools.cancel {handle}.", Params: ToolHandleParams{}, Result: ToolsCancelResult{}},
	{Name: MethodToolsStreamSubscribe, Summary: "Receive tools.stream.event for the chunks of the handles this connection may see.", Result: ToolStreamSubscribeResult{}},
	{Name: MethodToolsStreamUnsubscribe, Summary: "Stop receiving tools.stream.event.", Result: ToolStreamSubscribeResult{}},
	{Name: MethodToolsStreamChunk, Summary: "Notification: a chunk of a streaming handle this client runs.", Params: ToolStreamChunkParams{}},

	{Name: MethodStateGet, Summary: "A state value, or null.", Params: StateKeyParams{}, Result: json.RawMessage(nil)},
	{Name: MethodStateSet, Summary: `Set a state value; answers "ok".`, Params: StateSetParams{}, Result: ""},
	{Name: MethodStateExists, Summary: "Whether a state key is set.", Params: StateKeyParams{}, Result: false},
	{Name: MethodStateKeys, Summary: "The state keys, sorted.", Params: TenantParams{}, Result: []string{}},
	{Name: MethodStateSnapshot, Summary: "Every state key and value.", Params: TenantParams{}, Result: Object{}},

	{Name: MethodCheckpointSave, Summary: "Save state (one namespace, or all) as a checkpoint.", Params: CheckpointSaveParams{}, Result: CheckpointSaveResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodCheckpointList, Summary: "The checkpoints, oldest first.", Result: CheckpointListResult{}},
	{Name: MethodCheckpointRestore, Summary: "Replace state with a checkpoint; needs full_access through the approval ledger.", Params: CheckpointIDParams{}, Result: CheckpointRestoreResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodCheckpointDelete, Summary: "Delete a checkpoint.", Params: CheckpointIDParams{}, Result: CheckpointDeleteResult{}},

	{Name: MethodSessionCapabilitiesSet, Summary: "Narrow the connection's tools, state keys and action count; widening needs the host role.", Params: CapabilitiesSetParams{}, Result: CapabilitySet{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodSessionCapabilitiesGet, Summary: "The capabilities in force; null members are unrestricted.", Result: CapabilitySet{}},

	{Name: MethodSessionIntentSet, Summary: "Narrow the operator's intent for this connection's proposals; it can never widen.", Params: IntentSetParams{}, Result: IntentState{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodSessionIntentGet, Summary: "The operator's and the connection's intents, and the capability names.", Result: IntentState{}},
	{Name: MethodSessionIntentClear, Summary: "Drop the connection's own intent (the host role only).", Result: IntentState{}},
	{Name: MethodTaintList, Summary: "The tainted state keys: which action's untrusted data reached each, and when.", Params: TaintListParams{}, Result: TaintListResult{}},
	{Name: MethodTaintClear, Summary: "Clear keys' taint (the host role only; recorded).", Params: TaintClearParams{}, Result: TaintClearResult{}},
	{Name: MethodSessionTransactionCheckSet, Summary: "The connection's transaction check mode; laxer than transaction_check needs the host role.", Params: TransactionCheckParams{}, Result: TransactionCheckParams{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodReceiptsVerify, Summary: "Check a model's tool claims against the daemon's own receipts.", Params: ReceiptsVerifyParams{}, Result: ReceiptReport{}},

	{Name: MethodProposalSubmit, Summary: "Run a proposal; its deadline follows the actions' budgets.", Params: SubmitParams{}, Result: ProposalResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodProposalCancel, Summary: "Stop a running proposal this connection submitted.", Params: ProposalCancelParams{}, Result: ProposalCancelResult{}},
	{Name: MethodProposalScore, Summary: "Score candidate proposals (verify validity, observed tool success and duration, size) without running any.", Params: ScoreParams{}, Result: ScoreResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodProposalPlan, Summary: "Score candidate proposals and run the best valid one as proposal.submit would; a run that fails and aborts falls back to the next-best.", Params: PlanParams{}, Result: PlanResult{}, Errors: []int{CodeApprovalDenied}},

	{Name: MethodReplanSetConfig, Summary: "This connection's replan loop; max_replans 0 turns it off.", Params: ReplanConfig{}, Result: Null{}},
	{Name: MethodSessionBudgetSet, Summary: "The connection's cost budget; no limit removes it.", Params: BudgetLimits{}, Result: BudgetReport{}},

	{Name: MethodMultiSwarm, Summary: "Agents in parallel, in sequence, in debate or hybrid (parallel, then one debate round); each agent is a multi.run_agent callback.", Params: SwarmParams{}, Result: SwarmResult{}},
	{Name: MethodMultiPipeline, Summary: "Agents in stages, each fed the previous answer.", Params: PipelineParams{}, Result: PipelineResult{}},
	{Name: MethodMultiSupervisor, Summary: "Workers reviewed by a supervisor agent.", Params: SupervisorParams{}, Result: SupervisorResult{}},
	{Name: MethodMultiMapReduce, Summary: "A mapper per item, then a reducer.", Params: MapReduceParams{}, Result: MapReduceResult{}},
	{Name: MethodMultiVote, Summary: "Agents vote; the majority answer wins.", Params: VoteParams{}, Result: VoteResult{}},
	{Name: MethodMultiTournament, Summary: "Competitors judged pairwise.", Params: TournamentParams{}, Result: TournamentResult{}},
	{Name: MethodMultiSubtask, Summary: "The main agent, lent the spawn_subtask tool while it runs: each call of it in a proposal on this connection starts a sub-agent with a subset of the main agent's tools.", Params: SubtaskParams{}, Result: SubtaskResult{}},

	{Name: MethodVerify, Summary: "Check a proposal without running it.", Params: VerifyParams{}, Result: VerifyResult{}},
	{Name: MethodSimulate, Summary: "Apply a proposal's expected effects to a state.", Params: VerifyParams{}, Result: SimulateResult{}},
	{Name: MethodEquivalent, Summary: "Whether two proposals reach the same states (sampled).", Params: EquivalentParams{}, Result: EquivalentResult{}},
	{Name: MethodOptimize, Summary: "Prune phantom state dependencies.", Params: ProposalParams{}, Result: OptimizeResult{}},
	{Name: MethodVerifyMonteCarlo, Summary: "Seeded Monte Carlo estimate of a proposal's success.", Params: MonteCarloParams{}, Result: MonteCarloResult{}},

	{Name: MethodPermissionGetTier, Summary: "The connection's permission tier.", Result: TierResult{}},
	{Name: MethodPermissionSetTier, Summary: "Set the tier; raising it needs the approver role.", Params: SetTierParams{}, Result: TierResult{}},
	{Name: MethodPermissionClassify, Summary: "The tier and reversibility each action needs.", Params: PermissionProposalParams{}, Result: ClassifyResult{}},
	{Name: MethodPermissionEvaluate, Summary: "Each action's permission decision at the connection's tier.", Params: PermissionProposalParams{}, Result: EvaluateResult{}},
	{Name: MethodPermissionPending, Summary: "The actions that need an approval.", Params: PermissionProposalParams{}, Result: PendingResult{}},
	{Name: MethodPermissionApprove, Summary: "Record an approval on the ledger.", Params: DecisionParams{}, Result: ApprovalRecord{}},
	{Name: MethodPermissionReject, Summary: "Record a rejection on the ledger.", Params: DecisionParams{}, Result: ApprovalRecord{}},

	{Name: MethodSupervisionSubscribe, Summary: "Receive supervision.intent for proposals to admit.", Params: SupervisionSubscribeParams{}, Result: SupervisionSubscribeResult{}},
	{Name: MethodSupervisionUnsubscribe, Summary: "Stop receiving supervision.intent.", Result: SubscriptionResult{}},
	{Name: MethodSupervisionPending, Summary: "The intents waiting for a decision.", Result: SupervisionPendingResult{}},
	{Name: MethodSupervisionDecide, Summary: "Allow, deny or escalate an intent.", Params: SupervisionDecideParams{}, Result: SupervisionDecideResult{}},

	{Name: MethodHostSubscribe, Summary: "Receive host.event; answers a snapshot of agents, approvals and events.", Result: HostSnapshot{}},
	{Name: MethodHostUnsubscribe, Summary: "Stop receiving host.event.", Result: SubscriptionResult{}},
	{Name: MethodHostAgents, Summary: "The registered agents.", Result: []HostAgent{}},
	{Name: MethodHostApprovals, Summary: "The approvals kept, pending and decided.", Result: HostApprovalsResult{}},
	{Name: MethodHostEvents, Summary: "The latest host events.", Params: HostEventsParams{}, Result: HostEventsResult{}},
	{Name: MethodHostRegisterAgent, Summary: "Register an agent owned by this connection.", Params: HostAgentParams{}, Result: HostAgent{}},
	{Name: MethodHostUnregisterAgent, Summary: "Remove an agent this connection owns.", Params: HostAgentIDParams{}, Result: OKResult{}},
	{Name: MethodHostSetStatus, Summary: "Set an agent's status.", Params: HostStatusParams{}, Result: HostAgent{}},
	{Name: MethodHostNotify, Summary: "Post a host event.", Params: HostNotifyParams{}, Result: HostEventEntry{}},
	{Name: MethodHostRequestApproval, Summary: "Ask a person a question.", Params: HostApprovalParams{}, Result: HostApproval{}},
	{Name: MethodHostResolveApproval, Summary: "Answer an approval; needs the approver role.", Params: HostResolveParams{}, Result: HostApproval{}},

	{Name: MethodEventsCount, Summary: "How many events the log holds.", Result: 0},
	{Name: MethodEventsQuery, Summary: "Events matching a filter, newest first.", Params: EventsQueryParams{}, Result: EventsQueryResult{}},
	{Name: MethodEventsChainEnable, Summary: "Kept for compatibility: every event is hash-chained always; it changes nothing.", Result: OKResult{}},
	{Name: MethodEventsChainVerify, Summary: "Check the hash chain: verified, or where it breaks.", Result: ChainVerifyResult{}},
	{Name: MethodEventsRetention, Summary: "Read or set the in-memory event log's retention (host role; the durable log keeps its settings).", Params: RetentionParams{}, Result: RetentionResult{}},
	{Name: MethodEventsSubscribe, Summary: "Receive events.event for appended events.", Params: EventsSubscribeParams{}, Result: EventsSubscribeResult{}},
	{Name: MethodEventsUnsubscribe, Summary: "Stop receiving events.event.", Result: SubscriptionResult{}},
	{Name: MethodMetricsSummary, Summary: "Counts and rates over the event log.", Result: MetricsSummary{}},
	{Name: MethodMetricsAlerts, Summary: "The thresholds the metrics summary crosses.", Params: AlertThresholds{}, Result: MetricsAlertsResult{}},
	{Name: MethodEventsCostByAgent, Summary: "The retained events' spend by agent, sorted by agent.", Result: []AgentCost{}},

	{Name: MethodRunsStart, Summary: "Start an agent run; proposals the connection submits are recorded in it.", Params: RunsStartParams{}, Result: RunsStartResult{}},
	{Name: MethodRunsComplete, Summary: "End a run with its outcome.", Params: RunsCompleteParams{}, Result: RunsCompleteResult{}},
	{Name: MethodRunsRecordTurns, Summary: "Append turns to a run of this connection's bound agent.", Params: RunsRecordTurnsParams{}, Result: RunsRecordTurnsResult{}},
	{Name: MethodRunsSubscribe, Summary: "Receive runs.trace.event for a run; answers its records so far.", Params: RunIDParams{}, Result: RunSnapshot{}},
	{Name: MethodRunsUnsubscribe, Summary: "Stop receiving a run's runs.trace.event.", Params: RunIDParams{}, Result: RunsUnsubscribeResult{}},
	{Name: MethodRunsList, Summary: "An agent's runs.", Params: AgentIDParams{}, Result: RunsListResult{}},
	{Name: MethodRunsGetTrace, Summary: "A run's records from a cursor.", Params: RunsGetTraceParams{}, Result: RunsGetTraceResult{}},

	{Name: MethodAgentPermissionsGet, Summary: "The per-agent postures: the default and the overrides.", Result: AgentPostures{}},
	{Name: MethodAgentPermissionsSet, Summary: "Set an agent's posture; host role, or a bound agent tightening its own.", Params: AgentPermissionsSetParams{}, Result: AgentPostures{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodAgentPermissionsSetDefault, Summary: "Set the default posture; host role.", Params: AgentPermissionsSetDefaultParams{}, Result: AgentPostures{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodAgentPermissionsReset, Summary: "Remove an agent's override; host role.", Params: AgentIDParams{}, Result: AgentPostures{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodAgentPermissionsEvaluate, Summary: "The posture mode an agent's action at a tier gets.", Params: AgentPermissionsEvaluateParams{}, Result: AgentPermissionsEvaluateResult{}},
	{Name: MethodAgentsRevoke, Summary: "Revoke an agent's token and close its connection; host role.", Params: AgentIDParams{}, Result: AgentsRevokeResult{}, Errors: []int{CodeApprovalDenied}},

	{Name: MethodLeaseAcquire, Summary: "Take an agent id's lease with the next fencing epoch; an error while another holds it.", Params: LeaseAcquireParams{}, Result: Lease{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodLeaseRenew, Summary: "Extend a lease this principal holds at epoch; the epoch stays.", Params: LeaseRenewParams{}, Result: Lease{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodLeaseRelease, Summary: "Free a lease this principal holds at epoch; the next acquire succeeds at once.", Params: LeaseReleaseParams{}, Result: Lease{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodLeaseStatus, Summary: "An agent id's lease: holder, epoch and expiry.", Params: AgentIDParams{}, Result: Lease{}, Errors: []int{CodeApprovalDenied}},

	{Name: MethodConnectorsAdd, Summary: "Add a Streamable HTTP MCP server as a connector; answers once connected. A person's, never an agent's.", Params: ConnectorsAddParams{}, Result: ConnectorStatus{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsAddStdio, Summary: "Add an MCP server the daemon runs as a child process over stdio; answers once connected.", Params: ConnectorsAddStdioParams{}, Result: ConnectorStatus{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsList, Summary: "The connectors, sorted by slug, with their health.", Result: ConnectorsListResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsTools, Summary: "A connector's tools, enabled or not, with their classification.", Params: ConnectorSlugParams{}, Result: []ConnectorTool{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsEnableTools, Summary: "Enable tools of a connector for every session, all or none; persisted.", Params: ConnectorToolsParams{}, Result: ConnectorEnableResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsDisableTools, Summary: "Disable tools of a connector; persisted.", Params: ConnectorToolsParams{}, Result: ConnectorDisableResult{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsRefresh, Summary: "List a connector's tools again, keeping the enabled ones enabled.", Params: ConnectorSlugParams{}, Result: []ConnectorTool{}, Errors: []int{CodeApprovalDenied}},
	{Name: MethodConnectorsRemove, Summary: "Remove a connector added over the wire and end its process.", Params: ConnectorSlugParams{}, Result: ConnectorRemoveResult{}, Errors: []int{CodeApprovalDenied}},
}

// ServerMethods are the server → client requests (with a Result the client
// answers) and notifications (no Result). The document carries them as the
// x-server-to-client extension.
var ServerMethods = []MethodSpec{
	{Name: MethodToolsExecute, Summary: "Run a tool the client registered; answer the tool's output.", Params: ToolExecuteParams{}, Result: json.RawMessage(nil)},
	{Name: MethodToolsCancel, Summary: "The daemon gave up on a tools.execute.", Params: ToolCancelParams{}},
	{Name: MethodToolsStreamEvent, Summary: "A chunk of a handle, to a tools.stream.subscribe connection.", Params: ToolStreamEvent{}},
	{Name: MethodReplanPropose, Summary: "A proposal failed: answer a replacement ActionProposal, or null to give up.", Params: ReplanProposeParams{}, Result: (*ActionProposal)(nil)},
	{Name: MethodRunsTraceEvent, Summary: "A record appended to a run this connection subscribed to.", Params: RunTraceEvent{}},
	{Name: MethodMultiRunAgent, Summary: "Run one agent; answer an AgentOutput.", Params: RunAgentParams{}, Result: AgentOutput{}},
	{Name: MethodSupervisionIntent, Summary: "A proposal waits for a supervisor's decision.", Params: IntentNotice{}},
	{Name: MethodEventsEvent, Summary: "An appended event, to an events.subscribe connection.", Params: EventNotice{}},
	{Name: MethodHostEvent, Summary: "Something a host subscriber shows happened.", Params: HostEventNotice{}},
}

// ErrorMessages name each error code in the OpenRPC document.
var ErrorMessages = map[int]string{
	CodeParseError:       "Parse error: the frame is not JSON",
	CodeInvalidRequest:   "Invalid request",
	CodeMethodNotFound:   "Method not found",
	CodeInvalidParams:    "Invalid params: missing, mistyped or out of range",
	CodeInternal:         "Internal error",
	CodeAuthRequired:     "Auth required: session.auth must come first; the connection closes",
	CodeApprovalDenied:   "Approval denied or timed out",
	CodeHandlerDeadline:  "Handler deadline exceeded; the outcome may have committed",
	CodeHandshakeMissing: "Protocol handshake required",
	CodeVersionMismatch:  "Protocol version missing, malformed or different",
}
