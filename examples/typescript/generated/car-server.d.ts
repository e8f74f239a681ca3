type AlwaysTrue = any;
export type StringDoaGddGA = string;
export type BooleanVyG3AETh = boolean;
export type Integer2AHOqbcQ = number;
export type NumberHo1ClIqD = number;
export interface ToolRateLimit {
  max_calls: Integer2AHOqbcQ;
  interval_secs: NumberHo1ClIqD;
}
export interface ToolSchema {
  name: StringDoaGddGA;
  description: StringDoaGddGA;
  parameters: AlwaysTrue;
  returns?: AlwaysTrue;
  idempotent: BooleanVyG3AETh;
  cache_ttl_secs?: Integer2AHOqbcQ;
  rate_limit?: ToolRateLimit;
}
export interface ObjectHAgrRKSz { [key: string]: any; }
export interface Precondition {
  key: StringDoaGddGA;
  operator: StringDoaGddGA;
  value: AlwaysTrue;
  description?: StringDoaGddGA;
}
export type UnorderedSetOfPrecondition05QbmKK5 = Precondition[];
export type UnorderedSetOfStringDoaGddGADvj0XlFa = StringDoaGddGA[];
export type SetOfAnykhpArGaq = AlwaysTrue[];
export interface Action {
  id: StringDoaGddGA;
  type: StringDoaGddGA;
  tool?: StringDoaGddGA;
  parameters: ObjectHAgrRKSz;
  preconditions?: UnorderedSetOfPrecondition05QbmKK5;
  expected_effects?: ObjectHAgrRKSz;
  state_dependencies?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  dependencies?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  read_set?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  write_set?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  assumptions?: SetOfAnykhpArGaq;
  invocation_mode?: StringDoaGddGA;
  reversibility: StringDoaGddGA;
  compensation?: AlwaysTrue;
  idempotent: BooleanVyG3AETh;
  max_retries: Integer2AHOqbcQ;
  failure_behavior: StringDoaGddGA;
  timeout_ms?: Integer2AHOqbcQ;
  metadata?: ObjectHAgrRKSz;
}
export type UnorderedSetOfActionjH5TWdwe = Action[];
export interface AgentSpec {
  name: StringDoaGddGA;
  system_prompt: StringDoaGddGA;
  tools: UnorderedSetOfStringDoaGddGADvj0XlFa;
  max_turns: Integer2AHOqbcQ;
  metadata: ObjectHAgrRKSz;
  cache_control?: BooleanVyG3AETh;
}
export interface ObjectBd6DQSjJ { [key: string]: any; }
export type StringV0UwQeVu = string;
export interface IntentAction {
  id: StringDoaGddGA;
  action_type: StringDoaGddGA;
  tool?: StringDoaGddGA;
  reversibility: StringDoaGddGA;
  parameter_keys: UnorderedSetOfStringDoaGddGADvj0XlFa;
  parameters_digest: StringDoaGddGA;
}
export type UnorderedSetOfIntentActionwPU8Pmrk = IntentAction[];
export interface EventsMissed {
  count: Integer2AHOqbcQ;
  after_cursor: Integer2AHOqbcQ;
}
export interface ApprovalRecord {
  fingerprint: StringDoaGddGA;
  decision: StringDoaGddGA;
  required_tier: StringDoaGddGA;
  reviewer: StringDoaGddGA;
  reason?: StringDoaGddGA;
  evidence?: AlwaysTrue;
  recorded_at: StringV0UwQeVu;
}
export type UnorderedSetOfApprovalRecord1ME9GYgP = ApprovalRecord[];
export interface PolicyInfo {
  name: StringDoaGddGA;
  description: StringDoaGddGA;
  layer: StringDoaGddGA;
}
export type UnorderedSetOfPolicyInfoLvPmkecg = PolicyInfo[];
export type UnorderedSetOfToolSchemagpWzu5Eb = ToolSchema[];
export type NullQu0Arl1F = null;
export type OneOfNullQu0Arl1FStringDoaGddGABsU3LTQx = StringDoaGddGA | NullQu0Arl1F;
export interface ActionResult {
  action_id: StringDoaGddGA;
  status: StringDoaGddGA;
  output: AlwaysTrue;
  error: OneOfNullQu0Arl1FStringDoaGddGABsU3LTQx;
  state_changes: ObjectHAgrRKSz;
  duration_ms: NumberHo1ClIqD;
  timestamp: StringDoaGddGA;
  cache_hit?: StringDoaGddGA;
}
export type UnorderedSetOfActionResultMQ0LCKpK = ActionResult[];
export interface CostSummary {
  tool_calls: Integer2AHOqbcQ;
  actions_executed: Integer2AHOqbcQ;
  actions_rejected: Integer2AHOqbcQ;
  actions_skipped: Integer2AHOqbcQ;
  total_duration_ms: NumberHo1ClIqD;
  retries: Integer2AHOqbcQ;
}
export interface ActionProposal {
  id: StringDoaGddGA;
  source: StringDoaGddGA;
  timestamp: StringDoaGddGA;
  actions: UnorderedSetOfActionjH5TWdwe;
  context?: ObjectHAgrRKSz;
}
export type UnorderedSetOfObjectHAgrRKSzAfoBnX12 = ObjectHAgrRKSz[];
export interface Classification {
  action_id: StringDoaGddGA;
  tool?: StringDoaGddGA;
  required_tier: StringDoaGddGA;
  reversibility: StringDoaGddGA;
  missing_compensation: BooleanVyG3AETh;
  signals: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export type UnorderedSetOfClassificationJyLVemAq = Classification[];
export interface Intent {
  id: StringDoaGddGA;
  proposal_id: StringDoaGddGA;
  source: StringDoaGddGA;
  session_id?: StringDoaGddGA;
  scope?: ObjectBd6DQSjJ;
  reversibility: StringDoaGddGA;
  created_at: StringV0UwQeVu;
  actions: UnorderedSetOfIntentActionwPU8Pmrk;
}
export type UnorderedSetOfIntenttQXtLtNP = Intent[];
export interface HostAgent {
  id: StringDoaGddGA;
  name: StringDoaGddGA;
  kind: StringDoaGddGA;
  capabilities: UnorderedSetOfStringDoaGddGADvj0XlFa;
  project?: StringDoaGddGA;
  pid?: Integer2AHOqbcQ;
  display?: ObjectHAgrRKSz;
  metadata?: ObjectHAgrRKSz;
  status: StringDoaGddGA;
  current_task?: StringDoaGddGA;
  message?: StringDoaGddGA;
  payload?: ObjectHAgrRKSz;
  session_id: StringDoaGddGA;
  registered_at: StringV0UwQeVu;
  updated_at: StringV0UwQeVu;
}
export type UnorderedSetOfHostAgentjRKNklaP = HostAgent[];
export interface HostApproval {
  id: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  title: StringDoaGddGA;
  description?: StringDoaGddGA;
  context?: ObjectHAgrRKSz;
  required_approvals: Integer2AHOqbcQ;
  status: StringDoaGddGA;
  client_id?: StringDoaGddGA;
  created_at: StringV0UwQeVu;
  resolved_at?: StringV0UwQeVu;
  resolved_by?: StringDoaGddGA;
  approved?: BooleanVyG3AETh;
  notes?: StringDoaGddGA;
}
export type UnorderedSetOfHostApprovaly0BJcnQa = HostApproval[];
export interface HostEventEntry {
  id: StringDoaGddGA;
  timestamp: StringV0UwQeVu;
  kind: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  message?: StringDoaGddGA;
  payload: ObjectHAgrRKSz;
}
export type UnorderedSetOfHostEventEntry1TpzsITw = HostEventEntry[];
export interface HostIdentity {
  version: StringDoaGddGA;
  pid: Integer2AHOqbcQ;
  home: StringDoaGddGA;
  started_at: StringDoaGddGA;
  role?: StringDoaGddGA;
  approver_role: StringDoaGddGA;
}
export interface Event {
  seq: Integer2AHOqbcQ;
  kind: StringDoaGddGA;
  timestamp: StringV0UwQeVu;
  proposal_id?: StringDoaGddGA;
  action_id?: StringDoaGddGA;
  connection?: StringDoaGddGA;
  data?: ObjectHAgrRKSz;
  prev_hash?: StringDoaGddGA;
  hash?: StringDoaGddGA;
}
export type UnorderedSetOfEventEgyDwpeu = Event[];
export interface RetentionPolicy {
  max_events?: Integer2AHOqbcQ;
  max_age_secs?: Integer2AHOqbcQ;
}
export interface TokenUsage {
  input_tokens: Integer2AHOqbcQ;
  output_tokens: Integer2AHOqbcQ;
  cost_usd?: NumberHo1ClIqD;
}
export interface RuntimeScope {
  callerId?: StringDoaGddGA;
  tenantId?: StringDoaGddGA;
  claims?: ObjectHAgrRKSz;
}
export interface SupervisionFilter {
  tools?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  sessions?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  min_reversibility?: StringDoaGddGA;
}
export interface SupervisionDecision {
  kind: StringDoaGddGA;
  reason?: StringDoaGddGA;
}
export interface ToolExecuteParams {
  action_id: StringDoaGddGA;
  tool: StringDoaGddGA;
  parameters: ObjectHAgrRKSz;
  timeout_ms: Integer2AHOqbcQ;
  attempt: Integer2AHOqbcQ;
  request_id: StringDoaGddGA;
  session_id?: StringDoaGddGA;
}
export interface ToolCancelParams {
  request_id: StringDoaGddGA;
  action_id: StringDoaGddGA;
  reason: StringDoaGddGA;
}
export interface RunAgentParams {
  spec: AgentSpec;
  task: StringDoaGddGA;
}
export interface IntentNotice {
  id: StringDoaGddGA;
  proposal_id: StringDoaGddGA;
  source: StringDoaGddGA;
  session_id?: StringDoaGddGA;
  scope?: ObjectBd6DQSjJ;
  reversibility: StringDoaGddGA;
  created_at: StringV0UwQeVu;
  actions: UnorderedSetOfIntentActionwPU8Pmrk;
  cursor: Integer2AHOqbcQ;
  dropped: Integer2AHOqbcQ;
}
export interface EventNotice {
  cursor: Integer2AHOqbcQ;
  event: AlwaysTrue;
  missed?: EventsMissed;
}
export interface HostEventNotice {
  id: StringDoaGddGA;
  timestamp: StringV0UwQeVu;
  kind: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  message?: StringDoaGddGA;
  payload: ObjectHAgrRKSz;
  cursor: Integer2AHOqbcQ;
  dropped: Integer2AHOqbcQ;
}
export interface AuthResult {
  ok: BooleanVyG3AETh;
  auth_enabled: BooleanVyG3AETh;
  role?: StringDoaGddGA;
}
export interface HandshakeResult {
  protocol_version: Integer2AHOqbcQ;
  server_version: StringDoaGddGA;
  client_protocol_version: Integer2AHOqbcQ;
}
export interface SessionInitResult {
  session_id: StringDoaGddGA;
  tools_registered: Integer2AHOqbcQ;
  policies_registered: Integer2AHOqbcQ;
}
export interface ServerStatusResult {
  version: StringDoaGddGA;
  connections: Integer2AHOqbcQ;
  runtime: ObjectHAgrRKSz;
}
export interface ApprovalsListResult {
  approvals: UnorderedSetOfApprovalRecord1ME9GYgP;
}
export interface SessionPolicyOpenResult {
  session_id: StringDoaGddGA;
}
export interface SessionPolicyCloseResult {
  closed: BooleanVyG3AETh;
}
export interface PolicyRegisterResult {
  registered: StringDoaGddGA;
  scope: AlwaysTrue;
}
export interface PolicyUnregisterResult {
  unregistered: StringDoaGddGA;
  removed: Integer2AHOqbcQ;
  scope: AlwaysTrue;
}
export interface PolicyListResult {
  policies: UnorderedSetOfPolicyInfoLvPmkecg;
  scope: AlwaysTrue;
}
export interface ToolsListResult {
  tools: UnorderedSetOfToolSchemagpWzu5Eb;
  count: Integer2AHOqbcQ;
}
export interface ToolsUnregisterResult {
  unregistered: StringDoaGddGA;
  removed: Integer2AHOqbcQ;
}
/**
 *
 * any JSON value
 *
 */
export type AnyKd7WMlqb = any;
export interface ProposalResult {
  proposal_id: StringDoaGddGA;
  results: UnorderedSetOfActionResultMQ0LCKpK;
  cost: CostSummary;
}
export interface ProposalCancelResult {
  cancelled: BooleanVyG3AETh;
}
export interface OptimizeResult {
  proposal: ActionProposal;
  pruned: UnorderedSetOfObjectHAgrRKSzAfoBnX12;
}
export interface TierResult {
  granted_tier: StringDoaGddGA;
}
export interface ClassifyResult {
  classifications: UnorderedSetOfClassificationJyLVemAq;
  declared_rollback_contract: StringDoaGddGA;
}
export interface EvaluateResult {
  decisions: UnorderedSetOfObjectHAgrRKSzAfoBnX12;
}
export interface PendingResult {
  pending: UnorderedSetOfObjectHAgrRKSzAfoBnX12;
}
export interface SupervisionSubscribeResult {
  subscribed: BooleanVyG3AETh;
  decision_timeout_ms: Integer2AHOqbcQ;
  supervisors: Integer2AHOqbcQ;
}
export interface SubscriptionResult {
  subscribed: BooleanVyG3AETh;
  was_subscribed: BooleanVyG3AETh;
}
export interface SupervisionPendingResult {
  intents: UnorderedSetOfIntenttQXtLtNP;
}
export interface SupervisionDecideResult {
  decided: BooleanVyG3AETh;
}
export interface HostSnapshot {
  subscribed: BooleanVyG3AETh;
  agents: UnorderedSetOfHostAgentjRKNklaP;
  approvals: UnorderedSetOfHostApprovaly0BJcnQa;
  events: UnorderedSetOfHostEventEntry1TpzsITw;
  devices: SetOfAnykhpArGaq;
  identity: HostIdentity;
}
export interface HostApprovalsResult {
  approvals: UnorderedSetOfHostApprovaly0BJcnQa;
}
export interface HostEventsResult {
  events: UnorderedSetOfHostEventEntry1TpzsITw;
}
export interface OKResult {
  ok: BooleanVyG3AETh;
}
export interface EventsQueryResult {
  count: Integer2AHOqbcQ;
  events: UnorderedSetOfEventEgyDwpeu;
}
export interface ChainVerifyResult {
  verified?: Integer2AHOqbcQ;
  tampered_at?: Integer2AHOqbcQ;
}
export interface RetentionResult {
  policy: RetentionPolicy;
  removed?: Integer2AHOqbcQ;
}
export interface EventsSubscribeResult {
  subscribed: BooleanVyG3AETh;
  cursor: Integer2AHOqbcQ;
}
export interface EventsUnsubscribeResult {
  subscribed: BooleanVyG3AETh;
  was_subscribed: BooleanVyG3AETh;
}
export interface AgentOutput {
  name: StringDoaGddGA;
  answer: StringDoaGddGA;
  turns: Integer2AHOqbcQ;
  tool_calls: Integer2AHOqbcQ;
  duration_ms: NumberHo1ClIqD;
  error: OneOfNullQu0Arl1FStringDoaGddGABsU3LTQx;
  tokens?: TokenUsage;
}
/**
 *
 * Generated! Represents an alias to any of the provided schemas
 *
 */
export type AnyOfStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAUnorderedSetOfToolSchemagpWzu5EbSetOfAnykhpArGaqStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAUnorderedSetOfToolSchemagpWzu5EbStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAActionProposalStringDoaGddGARuntimeScopeStringDoaGddGAStringDoaGddGAActionProposalObjectHAgrRKSzActionProposalObjectHAgrRKSzActionProposalActionProposalUnorderedSetOfObjectHAgrRKSzAfoBnX12ActionProposalStringDoaGddGAActionProposalActionProposalActionProposalStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAAlwaysTrueSupervisionFilterStringDoaGddGASupervisionDecisionInteger2AHOqbcQStringDoaGddGAStringDoaGddGAStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAInteger2AHOqbcQObjectHAgrRKSzObjectHAgrRKSzStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectHAgrRKSzStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectHAgrRKSzStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectHAgrRKSzInteger2AHOqbcQStringDoaGddGABooleanVyG3AEThStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAStringDoaGddGAStringV0UwQeVuStringV0UwQeVuObjectBd6DQSjJInteger2AHOqbcQInteger2AHOqbcQRetentionPolicyUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAToolExecuteParamsToolCancelParamsRunAgentParamsIntentNoticeEventNoticeHostEventNoticeAuthResultHandshakeResultObjectHAgrRKSzSessionInitResultServerStatusResultApprovalsListResultSessionPolicyOpenResultSessionPolicyCloseResultPolicyRegisterResultPolicyUnregisterResultPolicyListResultInteger2AHOqbcQToolsListResultToolsUnregisterResultAnyKd7WMlqbStringDoaGddGABooleanVyG3AEThUnorderedSetOfStringDoaGddGADvj0XlFaObjectHAgrRKSzProposalResultProposalCancelResultObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzObjectHAgrRKSzOptimizeResultObjectHAgrRKSzTierResultTierResultClassifyResultEvaluateResultPendingResultApprovalRecordApprovalRecordSupervisionSubscribeResultSubscriptionResultSupervisionPendingResultSupervisionDecideResultHostSnapshotSubscriptionResultUnorderedSetOfHostAgentjRKNklaPHostApprovalsResultHostEventsResultHostAgentOKResultHostAgentHostEventEntryHostApprovalHostApprovalInteger2AHOqbcQEventsQueryResultOKResultChainVerifyResultRetentionResultEventsSubscribeResultEventsUnsubscribeResultObjectHAgrRKSzAnyKd7WMlqbNullQu0Arl1FAgentOutputNullQu0Arl1FNullQu0Arl1FNullQu0Arl1F = StringDoaGddGA | AlwaysTrue | UnorderedSetOfToolSchemagpWzu5Eb | SetOfAnykhpArGaq | ActionProposal | RuntimeScope | ObjectHAgrRKSz | UnorderedSetOfObjectHAgrRKSzAfoBnX12 | SupervisionFilter | SupervisionDecision | Integer2AHOqbcQ | UnorderedSetOfStringDoaGddGADvj0XlFa | BooleanVyG3AETh | StringV0UwQeVu | ObjectBd6DQSjJ | RetentionPolicy | ToolExecuteParams | ToolCancelParams | RunAgentParams | IntentNotice | EventNotice | HostEventNotice | AuthResult | HandshakeResult | SessionInitResult | ServerStatusResult | ApprovalsListResult | SessionPolicyOpenResult | SessionPolicyCloseResult | PolicyRegisterResult | PolicyUnregisterResult | PolicyListResult | ToolsListResult | ToolsUnregisterResult | AnyKd7WMlqb | ProposalResult | ProposalCancelResult | OptimizeResult | TierResult | ClassifyResult | EvaluateResult | PendingResult | ApprovalRecord | SupervisionSubscribeResult | SubscriptionResult | SupervisionPendingResult | SupervisionDecideResult | HostSnapshot | UnorderedSetOfHostAgentjRKNklaP | HostApprovalsResult | HostEventsResult | HostAgent | OKResult | HostEventEntry | HostApproval | EventsQueryResult | ChainVerifyResult | RetentionResult | EventsSubscribeResult | EventsUnsubscribeResult | NullQu0Arl1F | AgentOutput;
export type SessionAuth = (token: StringDoaGddGA, host_token: StringDoaGddGA) => Promise<AuthResult>;
export type ServerHandshake = (protocol_version: AlwaysTrue, client_version: StringDoaGddGA) => Promise<HandshakeResult>;
export type RpcDiscover = () => Promise<ObjectHAgrRKSz>;
export type SessionInit = (tools: UnorderedSetOfToolSchemagpWzu5Eb, policies: SetOfAnykhpArGaq) => Promise<SessionInitResult>;
export type ServerStatus = () => Promise<ServerStatusResult>;
export type ApprovalsList = () => Promise<ApprovalsListResult>;
export type SessionPolicyOpen = () => Promise<SessionPolicyOpenResult>;
export type SessionPolicyClose = (session_id: StringDoaGddGA) => Promise<SessionPolicyCloseResult>;
export type PolicyRegister = (name: StringDoaGddGA, rule: StringDoaGddGA, target: StringDoaGddGA, key: StringDoaGddGA, pattern: StringDoaGddGA, value: AlwaysTrue, session_id: StringDoaGddGA) => Promise<PolicyRegisterResult>;
export type PolicyUnregister = (name: StringDoaGddGA, session_id: StringDoaGddGA) => Promise<PolicyUnregisterResult>;
export type PolicyList = (session_id: StringDoaGddGA) => Promise<PolicyListResult>;
export type ToolsRegister = (items: UnorderedSetOfToolSchemagpWzu5Eb) => Promise<Integer2AHOqbcQ>;
export type ToolsList = () => Promise<ToolsListResult>;
export type ToolsUnregister = (name: StringDoaGddGA) => Promise<ToolsUnregisterResult>;
export type StateGet = (key: StringDoaGddGA, tenant_id: StringDoaGddGA) => Promise<AnyKd7WMlqb>;
export type StateSet = (key: StringDoaGddGA, value: AlwaysTrue, tenant_id: StringDoaGddGA) => Promise<StringDoaGddGA>;
export type StateExists = (key: StringDoaGddGA, tenant_id: StringDoaGddGA) => Promise<BooleanVyG3AETh>;
export type StateKeys = (tenant_id: StringDoaGddGA) => Promise<UnorderedSetOfStringDoaGddGADvj0XlFa>;
export type StateSnapshot = (tenant_id: StringDoaGddGA) => Promise<ObjectHAgrRKSz>;
export type ProposalSubmit = (proposal: ActionProposal, session_id: StringDoaGddGA, scope: RuntimeScope) => Promise<ProposalResult>;
export type ProposalCancel = (proposal_id: StringDoaGddGA, reason: StringDoaGddGA) => Promise<ProposalCancelResult>;
export type MultiSwarm = () => Promise<ObjectHAgrRKSz>;
export type MultiPipeline = () => Promise<ObjectHAgrRKSz>;
export type MultiSupervisor = () => Promise<ObjectHAgrRKSz>;
export type MultiMapReduce = () => Promise<ObjectHAgrRKSz>;
export type MultiVote = () => Promise<ObjectHAgrRKSz>;
export type MultiTournament = () => Promise<ObjectHAgrRKSz>;
export type Verify = (proposal: ActionProposal, initial_state: ObjectHAgrRKSz) => Promise<ObjectHAgrRKSz>;
export type Simulate = (proposal: ActionProposal, initial_state: ObjectHAgrRKSz) => Promise<ObjectHAgrRKSz>;
export type Equivalent = (a: ActionProposal, b: ActionProposal, test_states: UnorderedSetOfObjectHAgrRKSzAfoBnX12) => Promise<ObjectHAgrRKSz>;
export type Optimize = (proposal: ActionProposal) => Promise<OptimizeResult>;
export type VerifyMonteCarlo = () => Promise<ObjectHAgrRKSz>;
export type PermissionGetTier = () => Promise<TierResult>;
export type PermissionSetTier = (tier: StringDoaGddGA) => Promise<TierResult>;
export type PermissionClassify = (proposal: ActionProposal) => Promise<ClassifyResult>;
export type PermissionEvaluate = (proposal: ActionProposal) => Promise<EvaluateResult>;
export type PermissionPending = (proposal: ActionProposal) => Promise<PendingResult>;
export type PermissionApprove = (fingerprint: StringDoaGddGA, required_tier: StringDoaGddGA, action: AlwaysTrue, reason: StringDoaGddGA, evidence: AlwaysTrue) => Promise<ApprovalRecord>;
export type PermissionReject = (fingerprint: StringDoaGddGA, required_tier: StringDoaGddGA, action: AlwaysTrue, reason: StringDoaGddGA, evidence: AlwaysTrue) => Promise<ApprovalRecord>;
export type SupervisionSubscribe = (filter: SupervisionFilter) => Promise<SupervisionSubscribeResult>;
export type SupervisionUnsubscribe = () => Promise<SubscriptionResult>;
export type SupervisionPending = () => Promise<SupervisionPendingResult>;
export type SupervisionDecide = (intent_id: StringDoaGddGA, decision: SupervisionDecision) => Promise<SupervisionDecideResult>;
export type HostSubscribe = () => Promise<HostSnapshot>;
export type HostUnsubscribe = () => Promise<SubscriptionResult>;
export type HostAgents = () => Promise<UnorderedSetOfHostAgentjRKNklaP>;
export type HostApprovals = () => Promise<HostApprovalsResult>;
export type HostEvents = (limit: Integer2AHOqbcQ) => Promise<HostEventsResult>;
export type HostRegisterAgent = (id: StringDoaGddGA, name: StringDoaGddGA, kind: StringDoaGddGA, capabilities: UnorderedSetOfStringDoaGddGADvj0XlFa, project: StringDoaGddGA, pid: Integer2AHOqbcQ, display: ObjectHAgrRKSz, metadata: ObjectHAgrRKSz) => Promise<HostAgent>;
export type HostUnregisterAgent = (agent_id: StringDoaGddGA) => Promise<OKResult>;
export type HostSetStatus = (agent_id: StringDoaGddGA, status: StringDoaGddGA, current_task: StringDoaGddGA, message: StringDoaGddGA, payload: ObjectHAgrRKSz) => Promise<HostAgent>;
export type HostNotify = (kind: StringDoaGddGA, agent_id: StringDoaGddGA, message: StringDoaGddGA, payload: ObjectHAgrRKSz) => Promise<HostEventEntry>;
export type HostRequestApproval = (agent_id: StringDoaGddGA, title: StringDoaGddGA, description: StringDoaGddGA, context: ObjectHAgrRKSz, required_approvals: Integer2AHOqbcQ) => Promise<HostApproval>;
export type HostResolveApproval = (approval_id: StringDoaGddGA, approved: BooleanVyG3AETh, notes: StringDoaGddGA) => Promise<HostApproval>;
export type EventsCount = () => Promise<Integer2AHOqbcQ>;
export type EventsQuery = (kinds: UnorderedSetOfStringDoaGddGADvj0XlFa, action_id: StringDoaGddGA, proposal_id: StringDoaGddGA, since: StringV0UwQeVu, until: StringV0UwQeVu, data_matches: ObjectBd6DQSjJ, limit: Integer2AHOqbcQ, after_cursor: Integer2AHOqbcQ) => Promise<EventsQueryResult>;
export type EventsChainEnable = () => Promise<OKResult>;
export type EventsChainVerify = () => Promise<ChainVerifyResult>;
export type EventsRetention = (policy: RetentionPolicy) => Promise<RetentionResult>;
export type EventsSubscribe = (kinds: UnorderedSetOfStringDoaGddGADvj0XlFa, proposal_id: StringDoaGddGA) => Promise<EventsSubscribeResult>;
export type EventsUnsubscribe = () => Promise<EventsUnsubscribeResult>;
export type MetricsSummary = () => Promise<ObjectHAgrRKSz>;
export type ToolsExecute = (params: ToolExecuteParams) => Promise<AnyKd7WMlqb>;
export type ToolsCancel = (params: ToolCancelParams) => Promise<NullQu0Arl1F>;
export type MultiRunAgent = (params: RunAgentParams) => Promise<AgentOutput>;
export type SupervisionIntent = (params: IntentNotice) => Promise<NullQu0Arl1F>;
export type EventsEvent = (params: EventNotice) => Promise<NullQu0Arl1F>;
export type HostEvent = (params: HostEventNotice) => Promise<NullQu0Arl1F>;