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
  source?: StringDoaGddGA;
  connector?: StringDoaGddGA;
}
export interface PolicyDefinition {
  name: StringDoaGddGA;
  rule: StringDoaGddGA;
  target?: StringDoaGddGA;
  key?: StringDoaGddGA;
  pattern?: StringDoaGddGA;
  value?: AlwaysTrue;
  session_id?: StringDoaGddGA;
}
export interface ToolClaim {
  tool: StringDoaGddGA;
  action_id?: StringDoaGddGA;
  result_count?: Integer2AHOqbcQ;
  found_nothing?: BooleanVyG3AETh;
  output_contains?: StringDoaGddGA;
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
  await?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  reversibility: StringDoaGddGA;
  compensation?: AlwaysTrue;
  idempotent: BooleanVyG3AETh;
  max_retries: Integer2AHOqbcQ;
  failure_behavior: StringDoaGddGA;
  timeout_ms?: Integer2AHOqbcQ;
  metadata?: ObjectHAgrRKSz;
}
export type UnorderedSetOfActionFRKso7V5 = Action[];
export interface ActionProposal {
  id: StringDoaGddGA;
  source: StringDoaGddGA;
  timestamp: StringDoaGddGA;
  actions: UnorderedSetOfActionFRKso7V5;
  context?: ObjectHAgrRKSz;
  strict?: BooleanVyG3AETh;
}
export interface PlanWeights {
  success?: NumberHo1ClIqD;
  cost?: NumberHo1ClIqD;
  actions?: NumberHo1ClIqD;
}
export interface AgentSpec {
  name: StringDoaGddGA;
  system_prompt: StringDoaGddGA;
  tools: UnorderedSetOfStringDoaGddGADvj0XlFa;
  max_turns: Integer2AHOqbcQ;
  metadata: ObjectHAgrRKSz;
  cache_control?: BooleanVyG3AETh;
}
export interface TokenUsage {
  input_tokens: Integer2AHOqbcQ;
  output_tokens: Integer2AHOqbcQ;
  cost_usd?: NumberHo1ClIqD;
}
export interface RunTurn {
  prompt?: AlwaysTrue;
  tool?: StringDoaGddGA;
  parameters?: AlwaysTrue;
  output?: AlwaysTrue;
  cli_outcome?: AlwaysTrue;
  verifier_verdict?: AlwaysTrue;
  policy_rejected?: AlwaysTrue;
  tokens?: TokenUsage;
}
export interface Fence {
  key: StringDoaGddGA;
  epoch: Integer2AHOqbcQ;
}
export interface TraceMeta {
  traceparent?: StringDoaGddGA;
  tracestate?: StringDoaGddGA;
}
export interface ReplanFailure {
  action_id: StringDoaGddGA;
  tool?: StringDoaGddGA;
  status: StringDoaGddGA;
  error: StringDoaGddGA;
}
export type UnorderedSetOfReplanFailurevzbTw0LG = ReplanFailure[];
export type StringV0UwQeVu = string;
export interface RunRecord {
  record: StringDoaGddGA;
  run_id?: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  agent_name?: StringDoaGddGA;
  intent?: StringDoaGddGA;
  outcome_description?: StringDoaGddGA;
  started_at?: StringV0UwQeVu;
  index?: Integer2AHOqbcQ;
  prompt?: AlwaysTrue;
  tool?: StringDoaGddGA;
  parameters?: AlwaysTrue;
  output?: AlwaysTrue;
  cli_outcome?: AlwaysTrue;
  verifier_verdict?: AlwaysTrue;
  policy_rejected?: AlwaysTrue;
  tokens?: TokenUsage;
  status?: StringDoaGddGA;
  outcome?: AlwaysTrue;
  ended_at?: StringV0UwQeVu;
}
export interface ObjectBd6DQSjJ { [key: string]: any; }
export interface IntentAction {
  id: StringDoaGddGA;
  action_type: StringDoaGddGA;
  tool?: StringDoaGddGA;
  reversibility: StringDoaGddGA;
  parameter_keys: UnorderedSetOfStringDoaGddGADvj0XlFa;
  parameters_digest: StringDoaGddGA;
}
export type UnorderedSetOfIntentActionwPU8Pmrk = IntentAction[];
export interface Event {
  seq: Integer2AHOqbcQ;
  node?: StringDoaGddGA;
  kind: StringDoaGddGA;
  timestamp: StringV0UwQeVu;
  proposal_id?: StringDoaGddGA;
  action_id?: StringDoaGddGA;
  connection?: StringDoaGddGA;
  data?: ObjectHAgrRKSz;
  prev_hash?: StringDoaGddGA;
  hash?: StringDoaGddGA;
}
export interface ObjectJNVaTOCK { [key: string]: any; }
export interface EventsMissed {
  count: Integer2AHOqbcQ;
  after_cursor: Integer2AHOqbcQ;
  cursors?: ObjectJNVaTOCK;
}
export interface Member {
  id: StringDoaGddGA;
  version: StringDoaGddGA;
  started_at: StringV0UwQeVu;
  last_heartbeat: StringV0UwQeVu;
  alive: BooleanVyG3AETh;
}
export type UnorderedSetOfMemberIKo60AsA = Member[];
export interface RuntimeStatus {
  uptime_secs: NumberHo1ClIqD;
  sessions: Integer2AHOqbcQ;
  proposals_in_flight: Integer2AHOqbcQ;
  supervisors: Integer2AHOqbcQ;
  parked_intents: Integer2AHOqbcQ;
  operator_policies: Integer2AHOqbcQ;
  events: Integer2AHOqbcQ;
  event_bytes: Integer2AHOqbcQ;
  host_events: Integer2AHOqbcQ;
  host_event_bytes: Integer2AHOqbcQ;
  feed_queue_bytes: Integer2AHOqbcQ;
  stream_buffered_bytes: Integer2AHOqbcQ;
  stream_chunks_dropped: Integer2AHOqbcQ;
}
export interface ApprovalRecord {
  fingerprint: StringDoaGddGA;
  decision: StringDoaGddGA;
  required_tier: StringDoaGddGA;
  reviewer: StringDoaGddGA;
  reason?: StringDoaGddGA;
  evidence?: AlwaysTrue;
  recorded_at: StringV0UwQeVu;
  type?: StringDoaGddGA;
  tool?: StringDoaGddGA;
  params_digest?: StringDoaGddGA;
  granted_tier?: StringDoaGddGA;
  expires_at?: StringV0UwQeVu;
  uses?: Integer2AHOqbcQ;
  used?: Integer2AHOqbcQ;
}
export type UnorderedSetOfApprovalRecordFZCOxcPT = ApprovalRecord[];
export interface ConnectionInfo {
  id: StringDoaGddGA;
  role: StringDoaGddGA;
  tier: StringDoaGddGA;
  remote?: StringDoaGddGA;
  principal?: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  client_name?: StringDoaGddGA;
  memory_namespace?: StringDoaGddGA;
}
export type UnorderedSetOfConnectionInfoPq5V39Vy = ConnectionInfo[];
export type OneOfObjectHAgrRKSzStringDoaGddGAZJNfiyJa = StringDoaGddGA | ObjectHAgrRKSz;
export interface PolicyInfo {
  name: StringDoaGddGA;
  description: StringDoaGddGA;
  layer: StringDoaGddGA;
}
export type UnorderedSetOfPolicyInfoLvPmkecg = PolicyInfo[];
export type UnorderedSetOfToolSchemaJVvvp73K = ToolSchema[];
export type NullQu0Arl1F = null;
export type OneOfNullQu0Arl1FNumberHo1ClIqDKWtQwzS8 = NumberHo1ClIqD | NullQu0Arl1F;
export interface ToolFeedback {
  tool: StringDoaGddGA;
  dispatched: Integer2AHOqbcQ;
  succeeded: Integer2AHOqbcQ;
  failed: Integer2AHOqbcQ;
  success_rate: OneOfNullQu0Arl1FNumberHo1ClIqDKWtQwzS8;
  p50_ms: OneOfNullQu0Arl1FNumberHo1ClIqDKWtQwzS8;
  p99_ms: OneOfNullQu0Arl1FNumberHo1ClIqDKWtQwzS8;
}
export type UnorderedSetOfToolFeedbackNXO2COst = ToolFeedback[];
export interface ToolStreamChunk {
  kind: StringDoaGddGA;
  text?: StringDoaGddGA;
  data?: AlwaysTrue;
  fraction?: NumberHo1ClIqD;
  message?: StringDoaGddGA;
  result?: AlwaysTrue;
}
export interface ToolHandleInfo {
  handle: StringDoaGddGA;
  tool: StringDoaGddGA;
  mode: StringDoaGddGA;
  status: StringDoaGddGA;
  owner_connection: StringDoaGddGA;
  proposal_id?: StringDoaGddGA;
  action_id?: StringDoaGddGA;
  started_at: StringV0UwQeVu;
  last_chunk_at?: StringV0UwQeVu;
  progress?: ToolStreamChunk;
  chunks_buffered: Integer2AHOqbcQ;
  dropped_chunks: Integer2AHOqbcQ;
}
export type UnorderedSetOfToolHandleInfomm8Oxst4 = ToolHandleInfo[];
export interface ToolPollResult {
  handle: StringDoaGddGA;
  tool: StringDoaGddGA;
  action_id: StringDoaGddGA;
  status: StringDoaGddGA;
  chunks: SetOfAnykhpArGaq;
  dropped_chunks?: Integer2AHOqbcQ;
  result?: AlwaysTrue;
  error?: StringDoaGddGA;
}
export interface CheckpointInfo {
  checkpoint_id: StringDoaGddGA;
  name?: StringDoaGddGA;
  tenant_id?: StringDoaGddGA;
  created_at: StringDoaGddGA;
  keys: Integer2AHOqbcQ;
  bytes: Integer2AHOqbcQ;
  corrupt?: StringDoaGddGA;
}
export type UnorderedSetOfCheckpointInfo9UzkAK6R = CheckpointInfo[];
export type OneOfNullQu0Arl1FUnorderedSetOfStringDoaGddGADvj0XlFaI52JUHLq = UnorderedSetOfStringDoaGddGADvj0XlFa | NullQu0Arl1F;
export interface WorkIntent {
  intent: StringDoaGddGA;
  allowed_tools: OneOfNullQu0Arl1FUnorderedSetOfStringDoaGddGADvj0XlFaI52JUHLq;
  forbidden_tools?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  forbidden_capabilities?: UnorderedSetOfStringDoaGddGADvj0XlFa;
  allowed_capabilities: OneOfNullQu0Arl1FUnorderedSetOfStringDoaGddGADvj0XlFaI52JUHLq;
  untrusted_tools?: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export type OneOfWorkIntentNullQu0Arl1FA7QKqVUz = WorkIntent | NullQu0Arl1F;
export interface TaintEntry {
  key: StringDoaGddGA;
  proposal_id: StringDoaGddGA;
  action_id: StringDoaGddGA;
  tool?: StringDoaGddGA;
  origin: StringDoaGddGA;
  at: StringDoaGddGA;
}
export type UnorderedSetOfTaintEntry3C50EyLo = TaintEntry[];
export type StringZEMSoApN = "off" | "warn" | "strict";
export type StringXZn3LC2N = "grounded" | "fabricated_tool_reference" | "misstated_result_count" | "false_negative" | "ungroundable";
export interface ClaimVerdict {
  claim: ToolClaim;
  verdict: StringXZn3LC2N;
  detail: StringDoaGddGA;
}
export type UnorderedSetOfClaimVerdictTECWALzm = ClaimVerdict[];
export type UnorderedSetOfToolClaimhKDgiWQb = ToolClaim[];
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
export interface BudgetLimits {
  max_tool_calls?: Integer2AHOqbcQ;
  max_actions?: Integer2AHOqbcQ;
  max_duration_ms?: Integer2AHOqbcQ;
  max_cost_usd?: NumberHo1ClIqD;
  scope?: StringDoaGddGA;
}
export interface BudgetSpend {
  tool_calls: Integer2AHOqbcQ;
  actions: Integer2AHOqbcQ;
  duration_ms: NumberHo1ClIqD;
  cost_usd: NumberHo1ClIqD;
}
export interface BudgetReport {
  limits: BudgetLimits;
  spent: BudgetSpend;
  exceeded?: StringDoaGddGA;
}
export interface CostSummary {
  tool_calls: Integer2AHOqbcQ;
  actions_executed: Integer2AHOqbcQ;
  actions_rejected: Integer2AHOqbcQ;
  actions_skipped: Integer2AHOqbcQ;
  total_duration_ms: NumberHo1ClIqD;
  retries: Integer2AHOqbcQ;
  budget?: BudgetReport;
}
export interface Replan {
  attempt: Integer2AHOqbcQ;
  proposal_id: StringDoaGddGA;
  outcome: StringDoaGddGA;
  error?: StringDoaGddGA;
}
export type UnorderedSetOfReplanWLd3RHkW = Replan[];
export interface VerifyIssue {
  action_id: StringDoaGddGA;
  severity: StringDoaGddGA;
  message: StringDoaGddGA;
  tier: StringDoaGddGA;
}
export type UnorderedSetOfVerifyIssue90T3UNcN = VerifyIssue[];
export interface CandidateScore {
  index: Integer2AHOqbcQ;
  proposal_id: StringDoaGddGA;
  valid: BooleanVyG3AETh;
  score: NumberHo1ClIqD;
  expected_success: NumberHo1ClIqD;
  estimated_ms: NumberHo1ClIqD;
  actions: Integer2AHOqbcQ;
  reasons: UnorderedSetOfStringDoaGddGADvj0XlFa;
  issues?: UnorderedSetOfVerifyIssue90T3UNcN;
}
export type UnorderedSetOfCandidateScoreANHOVNXA = CandidateScore[];
export type UnorderedSetOfInteger2AHOqbcQarZIQlOy = Integer2AHOqbcQ[];
export interface ProposalResult {
  proposal_id: StringDoaGddGA;
  results: UnorderedSetOfActionResultMQ0LCKpK;
  cost: CostSummary;
  replans?: UnorderedSetOfReplanWLd3RHkW;
  replan_error?: StringDoaGddGA;
  warnings?: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export interface PlanAttempt {
  index: Integer2AHOqbcQ;
  proposal_id: StringDoaGddGA;
  status: StringDoaGddGA;
  error?: StringDoaGddGA;
}
export type UnorderedSetOfPlanAttemptocvgFhps = PlanAttempt[];
export interface AgentOutput {
  name: StringDoaGddGA;
  answer: StringDoaGddGA;
  turns: Integer2AHOqbcQ;
  tool_calls: Integer2AHOqbcQ;
  duration_ms: NumberHo1ClIqD;
  error: OneOfNullQu0Arl1FStringDoaGddGABsU3LTQx;
  tokens?: TokenUsage;
}
export type UnorderedSetOfAgentOutputlX4CNr3L = AgentOutput[];
export type UnorderedSetOfUnorderedSetOfAgentOutputlX4CNr3LraBAfjgY = UnorderedSetOfAgentOutputlX4CNr3L[];
export interface MultiSpend {
  agents: Integer2AHOqbcQ;
  refused: Integer2AHOqbcQ;
  input_tokens: Integer2AHOqbcQ;
  output_tokens: Integer2AHOqbcQ;
  cost_usd: NumberHo1ClIqD;
}
export interface SupervisorRound {
  round: Integer2AHOqbcQ;
  workers: UnorderedSetOfAgentOutputlX4CNr3L;
  review: AgentOutput;
}
export type UnorderedSetOfSupervisorRound2DmUdmZD = SupervisorRound[];
export interface VoteTally {
  answer: StringDoaGddGA;
  count: Integer2AHOqbcQ;
  agents: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export type UnorderedSetOfVoteTally3FkDRSQ8 = VoteTally[];
export interface MatchResult {
  round: Integer2AHOqbcQ;
  a: StringDoaGddGA;
  b?: StringDoaGddGA;
  winner: StringDoaGddGA;
  bye: BooleanVyG3AETh;
  judge?: AgentOutput;
  reason: StringDoaGddGA;
}
export type UnorderedSetOfMatchResultWl5X32Pv = MatchResult[];
export interface SubtaskRecord {
  proposal_id: StringDoaGddGA;
  action_id: StringDoaGddGA;
  name: StringDoaGddGA;
  task: StringDoaGddGA;
  tools: UnorderedSetOfStringDoaGddGADvj0XlFa;
  output: AgentOutput;
}
export type UnorderedSetOfSubtaskRecordiSBEdZRy = SubtaskRecord[];
export type UnorderedSetOfUnorderedSetOfStringDoaGddGADvj0XlFa8UTGvH52 = UnorderedSetOfStringDoaGddGADvj0XlFa[];
export type UnorderedSetOfStringDoaGddGA741Ek67P = StringDoaGddGA[];
export type UnorderedSetOfUnorderedSetOfStringDoaGddGA741Ek67PZm5GVwTX = UnorderedSetOfStringDoaGddGA741Ek67P[];
export interface CheckRecord {
  name: StringDoaGddGA;
  ran: BooleanVyG3AETh;
  verifies: StringDoaGddGA;
  cannot_verify: StringDoaGddGA;
  findings: Integer2AHOqbcQ;
  tier: StringDoaGddGA;
}
export type UnorderedSetOfCheckRecordtsDM2Vwc = CheckRecord[];
export interface Evidence {
  checks: UnorderedSetOfCheckRecordtsDM2Vwc;
  assumptions: UnorderedSetOfStringDoaGddGADvj0XlFa;
  untested_regions: UnorderedSetOfStringDoaGddGADvj0XlFa;
  residual_risks: UnorderedSetOfStringDoaGddGADvj0XlFa;
  confidence: NumberHo1ClIqD;
}
export interface BlockedAction {
  action_id: StringDoaGddGA;
  reason: StringDoaGddGA;
}
export type UnorderedSetOfBlockedActionm7UI0ZV8 = BlockedAction[];
export interface Difference {
  state_index: Integer2AHOqbcQ;
  key: StringDoaGddGA;
  a: AlwaysTrue;
  b: AlwaysTrue;
  present_in_a: BooleanVyG3AETh;
  present_in_b: BooleanVyG3AETh;
}
export type UnorderedSetOfDifferenceytLHBOCK = Difference[];
export interface PrunedDependency {
  action_id: StringDoaGddGA;
  key: StringDoaGddGA;
  reason: StringDoaGddGA;
}
export type UnorderedSetOfPrunedDependencyv0Z77RFr = PrunedDependency[];
export interface Distribution {
  mean: NumberHo1ClIqD;
  min: Integer2AHOqbcQ;
  p50: Integer2AHOqbcQ;
  p95: Integer2AHOqbcQ;
  max: Integer2AHOqbcQ;
}
export interface ValueProbability {
  value: AlwaysTrue;
  probability: NumberHo1ClIqD;
}
export type UnorderedSetOfValueProbabilitya67YVxNO = ValueProbability[];
export interface KeyDistribution {
  key: StringDoaGddGA;
  p_present: NumberHo1ClIqD;
  values: UnorderedSetOfValueProbabilitya67YVxNO;
}
export type UnorderedSetOfKeyDistributionLgxa1LxI = KeyDistribution[];
export interface ActionOutcome {
  action_id: StringDoaGddGA;
  p_rejected: NumberHo1ClIqD;
  p_failed: NumberHo1ClIqD;
  p_effects_landed: NumberHo1ClIqD;
  mean_blast_radius: NumberHo1ClIqD;
}
export type UnorderedSetOfActionOutcomemMtuNu1V = ActionOutcome[];
export type OneOfInteger2AHOqbcQNullQu0Arl1FHsQRyS69 = Integer2AHOqbcQ | NullQu0Arl1F;
export interface ToolRate {
  tool: StringDoaGddGA;
  rate: NumberHo1ClIqD;
  source: StringDoaGddGA;
  succeeded: OneOfInteger2AHOqbcQNullQu0Arl1FHsQRyS69;
  dispatched: OneOfInteger2AHOqbcQNullQu0Arl1FHsQRyS69;
}
export type UnorderedSetOfToolRateyrmnPKQb = ToolRate[];
export interface RateProvenance {
  window_days: Integer2AHOqbcQ;
  trajectories_available: BooleanVyG3AETh;
  overridden_by_caller: UnorderedSetOfStringDoaGddGADvj0XlFa;
  tools: UnorderedSetOfToolRateyrmnPKQb;
}
export interface Classification {
  action_id: StringDoaGddGA;
  tool?: StringDoaGddGA;
  required_tier: StringDoaGddGA;
  reversibility: StringDoaGddGA;
  missing_compensation: BooleanVyG3AETh;
  signals: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export type UnorderedSetOfClassificationJyLVemAq = Classification[];
export interface PermissionDecision {
  action_id: StringDoaGddGA;
  tool?: StringDoaGddGA;
  fingerprint: StringDoaGddGA;
  decision: StringDoaGddGA;
  required: StringDoaGddGA;
  reversibility: StringDoaGddGA;
  granted: StringDoaGddGA;
  reason?: StringDoaGddGA;
  signals?: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export type UnorderedSetOfPermissionDecisionb2K4DvRh = PermissionDecision[];
export type StringXXDQ2IiO = "allowed" | "forbidden" | "influenced" | "drift";
export interface IntentDecision {
  action_id: StringDoaGddGA;
  verdict: StringXXDQ2IiO;
  reason?: StringDoaGddGA;
  fingerprint?: StringDoaGddGA;
}
export type UnorderedSetOfIntentDecisionGsiFkyv9 = IntentDecision[];
export interface Intent {
  id: StringDoaGddGA;
  proposal_id: StringDoaGddGA;
  source: StringDoaGddGA;
  session_id?: StringDoaGddGA;
  scope?: ObjectBd6DQSjJ;
  reversibility: StringDoaGddGA;
  created_at: StringV0UwQeVu;
  actions: UnorderedSetOfIntentActionwPU8Pmrk;
  node?: StringDoaGddGA;
  actions_omitted?: Integer2AHOqbcQ;
}
export type UnorderedSetOfIntentY646S1OC = Intent[];
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
export interface ApprovalRequester {
  principal: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  agent_name?: StringDoaGddGA;
  client_name?: StringDoaGddGA;
  connection: StringDoaGddGA;
}
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
  node?: StringDoaGddGA;
  requested_by?: ApprovalRequester;
}
export type UnorderedSetOfHostApprovalrdhOK3Tp = HostApproval[];
export interface HostEventEntry {
  id: StringDoaGddGA;
  timestamp: StringV0UwQeVu;
  kind: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  message?: StringDoaGddGA;
  payload: ObjectHAgrRKSz;
  node?: StringDoaGddGA;
}
export type UnorderedSetOfHostEventEntrylZgrb47I = HostEventEntry[];
export interface HostIdentity {
  version: StringDoaGddGA;
  pid: Integer2AHOqbcQ;
  home: StringDoaGddGA;
  started_at: StringDoaGddGA;
  role?: StringDoaGddGA;
  approver_role: StringDoaGddGA;
}
export type UnorderedSetOfEventmkobcZjY = Event[];
export interface NodeChain {
  node: StringDoaGddGA;
  verified: Integer2AHOqbcQ;
  tampered?: Integer2AHOqbcQ;
}
export type UnorderedSetOfNodeChainm6CP5MNc = NodeChain[];
export interface RetentionPolicy {
  max_events?: Integer2AHOqbcQ;
  max_age_secs?: Integer2AHOqbcQ;
}
export interface AgentCost {
  agent: StringDoaGddGA;
  calls: Integer2AHOqbcQ;
  tokens_in: Integer2AHOqbcQ;
  tokens_out: Integer2AHOqbcQ;
  cost_usd: NumberHo1ClIqD;
}
export type UnorderedSetOfAgentCostiev788Td = AgentCost[];
export interface Alert {
  kind: StringDoaGddGA;
  message: StringDoaGddGA;
  observed: NumberHo1ClIqD;
  threshold: NumberHo1ClIqD;
}
export type UnorderedSetOfAlertQnA5LTPb = Alert[];
export interface MetricsSummary {
  total_events: Integer2AHOqbcQ;
  proposals_received: Integer2AHOqbcQ;
  actions_succeeded: Integer2AHOqbcQ;
  actions_failed: Integer2AHOqbcQ;
  actions_rejected: Integer2AHOqbcQ;
  actions_skipped: Integer2AHOqbcQ;
  success_rate: NumberHo1ClIqD;
  error_rate: NumberHo1ClIqD;
  avg_latency_ms: NumberHo1ClIqD;
  tool_cancellations: Integer2AHOqbcQ;
  gate_rejections: Integer2AHOqbcQ;
  policy_violations: Integer2AHOqbcQ;
  approvals_recorded: Integer2AHOqbcQ;
  permission_decisions: Integer2AHOqbcQ;
  cost_usd: NumberHo1ClIqD;
  cumulative_cost_usd: NumberHo1ClIqD;
  tokens_in: Integer2AHOqbcQ;
  tokens_out: Integer2AHOqbcQ;
  goal_evaluations: Integer2AHOqbcQ;
  goals_met: Integer2AHOqbcQ;
  goals_ungrounded: Integer2AHOqbcQ;
  cost_by_agent: UnorderedSetOfAgentCostiev788Td;
  callback_p50_ms: NumberHo1ClIqD;
  callback_p99_ms: NumberHo1ClIqD;
  summarized_events?: Integer2AHOqbcQ;
}
export type UnorderedSetOfRunRecordFLq2ETrf = RunRecord[];
export interface RunSummary {
  run_id: StringDoaGddGA;
  agent_id: StringDoaGddGA;
  intent: StringDoaGddGA;
  started_at: StringV0UwQeVu;
  ended_at?: StringV0UwQeVu;
  status: StringDoaGddGA;
  turn_count: Integer2AHOqbcQ;
}
export type UnorderedSetOfRunSummaryjqVe58VF = RunSummary[];
export interface TierPosture {
  read_only?: StringDoaGddGA;
  sandbox_edit?: StringDoaGddGA;
  full_access?: StringDoaGddGA;
}
export interface ObjectFWHLFtsb { [key: string]: any; }
export interface ConnectorStatus {
  slug: StringDoaGddGA;
  name: StringDoaGddGA;
  url?: StringDoaGddGA;
  command?: StringDoaGddGA;
  connected: BooleanVyG3AETh;
  tool_count: Integer2AHOqbcQ;
  enabled_count: Integer2AHOqbcQ;
  last_error?: StringDoaGddGA;
  from_file?: BooleanVyG3AETh;
  protocol?: StringDoaGddGA;
}
export type UnorderedSetOfConnectorStatusbEgSxIh7 = ConnectorStatus[];
export interface ConnectorTool {
  name: StringDoaGddGA;
  canonical: StringDoaGddGA;
  description: StringDoaGddGA;
  enabled: BooleanVyG3AETh;
  tier?: StringDoaGddGA;
  idempotent?: BooleanVyG3AETh;
  error?: StringDoaGddGA;
}
export type UnorderedSetOfPolicyDefinition9KOiK7KH = PolicyDefinition[];
export interface HarnessFields {
  max_retries?: Integer2AHOqbcQ;
  retry_backoff_ms?: Integer2AHOqbcQ;
  planning_max_replans?: Integer2AHOqbcQ;
}
export interface RuntimeScope {
  callerId?: StringDoaGddGA;
  tenantId?: StringDoaGddGA;
  claims?: ObjectHAgrRKSz;
}
export type UnorderedSetOfActionProposaloPLm396O = ActionProposal[];
export interface PlannerConfig {
  weights?: PlanWeights;
  window_days?: Integer2AHOqbcQ;
}
export type UnorderedSetOfAgentSpec7JaMzPsv = AgentSpec[];
export interface MultiBudget {
  max_input_tokens?: Integer2AHOqbcQ;
  max_output_tokens?: Integer2AHOqbcQ;
  max_total_tokens?: Integer2AHOqbcQ;
  max_cost_usd?: NumberHo1ClIqD;
  max_agents?: Integer2AHOqbcQ;
}
export type UnorderedSetOfObjectHAgrRKSzAfoBnX12 = ObjectHAgrRKSz[];
export interface ObjectSASv8Knd { [key: string]: any; }
export interface MonteCarloConfig {
  trials?: Integer2AHOqbcQ;
  seed?: Integer2AHOqbcQ;
  default_success_rate?: NumberHo1ClIqD;
  retry_attempts?: Integer2AHOqbcQ;
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
export type UnorderedSetOfRunTurnq5ZFJZev = RunTurn[];
export interface ToolExecuteParams {
  action_id: StringDoaGddGA;
  tool: StringDoaGddGA;
  parameters: ObjectHAgrRKSz;
  timeout_ms: Integer2AHOqbcQ;
  attempt: Integer2AHOqbcQ;
  request_id: StringDoaGddGA;
  session_id?: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  invocation_mode?: StringDoaGddGA;
  handle?: StringDoaGddGA;
  fence?: Fence;
  _meta?: TraceMeta;
}
export interface ToolCancelParams {
  request_id: StringDoaGddGA;
  action_id: StringDoaGddGA;
  reason: StringDoaGddGA;
  handle?: StringDoaGddGA;
}
export interface ToolStreamEvent {
  handle: StringDoaGddGA;
  chunk: AlwaysTrue;
  dropped?: Integer2AHOqbcQ;
}
export interface ReplanProposeParams {
  proposal_id: StringDoaGddGA;
  attempt: Integer2AHOqbcQ;
  failed: UnorderedSetOfReplanFailurevzbTw0LG;
  succeeded: UnorderedSetOfStringDoaGddGADvj0XlFa;
  state_keys_written: UnorderedSetOfStringDoaGddGADvj0XlFa;
  request_id: StringDoaGddGA;
}
export interface RunTraceEvent {
  run_id: StringDoaGddGA;
  agent_id: StringDoaGddGA;
  record: RunRecord;
  cursor: Integer2AHOqbcQ;
  status: StringDoaGddGA;
}
export interface RunAgentParams {
  spec: AgentSpec;
  task: StringDoaGddGA;
  _meta?: TraceMeta;
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
  node?: StringDoaGddGA;
  actions_omitted?: Integer2AHOqbcQ;
  cursor: Integer2AHOqbcQ;
  dropped: Integer2AHOqbcQ;
}
export interface EventNotice {
  cursor: Integer2AHOqbcQ;
  event: Event;
  missed?: EventsMissed;
}
export interface HostEventNotice {
  id: StringDoaGddGA;
  timestamp: StringV0UwQeVu;
  kind: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
  message?: StringDoaGddGA;
  payload: ObjectHAgrRKSz;
  node?: StringDoaGddGA;
  cursor: Integer2AHOqbcQ;
  dropped: Integer2AHOqbcQ;
}
export interface AuthResult {
  ok: BooleanVyG3AETh;
  auth_enabled: BooleanVyG3AETh;
  role?: StringDoaGddGA;
  agent_id?: StringDoaGddGA;
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
  connections: Integer2AHOqbcQ;
  members: UnorderedSetOfMemberIKo60AsA;
  members_error?: StringDoaGddGA;
  runtime: RuntimeStatus;
  store?: StringDoaGddGA;
  version: StringDoaGddGA;
  listen: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export interface ApprovalsListResult {
  approvals: UnorderedSetOfApprovalRecordFZCOxcPT;
}
export interface ServerConnectionsResult {
  connections: UnorderedSetOfConnectionInfoPq5V39Vy;
  self: StringDoaGddGA;
}
export interface SessionPolicyOpenResult {
  session_id: StringDoaGddGA;
}
export interface SessionPolicyCloseResult {
  closed: BooleanVyG3AETh;
}
export interface PolicyRegisterResult {
  name: StringDoaGddGA;
  registered: StringDoaGddGA;
  scope: OneOfObjectHAgrRKSzStringDoaGddGAZJNfiyJa;
}
export interface PolicyUnregisterResult {
  removed: Integer2AHOqbcQ;
  scope: OneOfObjectHAgrRKSzStringDoaGddGAZJNfiyJa;
  unregistered: StringDoaGddGA;
}
export interface PolicyListResult {
  policies: UnorderedSetOfPolicyInfoLvPmkecg;
  scope: OneOfObjectHAgrRKSzStringDoaGddGAZJNfiyJa;
}
export interface ToolsListResult {
  tools: UnorderedSetOfToolSchemaJVvvp73K;
  count: Integer2AHOqbcQ;
}
export interface HarnessConfig {
  max_retries: Integer2AHOqbcQ;
  retry_backoff_ms: Integer2AHOqbcQ;
  planning_max_replans: Integer2AHOqbcQ;
}
export interface ToolsFeedbackResult {
  tools: UnorderedSetOfToolFeedbackNXO2COst;
  window_days: Integer2AHOqbcQ;
}
export interface ToolsUnregisterResult {
  unregistered: StringDoaGddGA;
  removed: Integer2AHOqbcQ;
}
export interface ToolHandlesResult {
  handles: UnorderedSetOfToolHandleInfomm8Oxst4;
}
export type OneOfToolPollResultNullQu0Arl1FDBNeggWk = ToolPollResult | NullQu0Arl1F;
export interface ToolsCancelResult {
  cancelled: BooleanVyG3AETh;
}
export interface ToolStreamSubscribeResult {
  subscribed: BooleanVyG3AETh;
  was_subscribed?: BooleanVyG3AETh;
}
/**
 *
 * any JSON value
 *
 */
export type AnyKd7WMlqb = any;
export interface CheckpointSaveResult {
  checkpoint_id: StringDoaGddGA;
  keys: Integer2AHOqbcQ;
  bytes: Integer2AHOqbcQ;
  created_at: StringDoaGddGA;
}
export interface CheckpointListResult {
  checkpoints: UnorderedSetOfCheckpointInfo9UzkAK6R;
}
export interface CheckpointRestoreResult {
  restored_keys: Integer2AHOqbcQ;
}
export interface CheckpointDeleteResult {
  deleted: StringDoaGddGA;
}
export interface CapabilitySet {
  tools: OneOfNullQu0Arl1FUnorderedSetOfStringDoaGddGADvj0XlFaI52JUHLq;
  state_keys: OneOfNullQu0Arl1FUnorderedSetOfStringDoaGddGADvj0XlFaI52JUHLq;
  max_actions: Integer2AHOqbcQ;
}
export interface IntentState {
  operator: OneOfWorkIntentNullQu0Arl1FA7QKqVUz;
  session: OneOfWorkIntentNullQu0Arl1FA7QKqVUz;
  capabilities: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export interface TaintListResult {
  tainted: UnorderedSetOfTaintEntry3C50EyLo;
}
export interface TaintClearResult {
  cleared: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export interface TransactionCheckParams {
  mode: StringZEMSoApN;
}
export interface ReceiptReport {
  grounded: BooleanVyG3AETh;
  claims: UnorderedSetOfClaimVerdictTECWALzm;
  ungroundable: UnorderedSetOfToolClaimhKDgiWQb;
}
export interface ProposalCancelResult {
  cancelled: BooleanVyG3AETh;
}
export interface ScoreResult {
  scores: UnorderedSetOfCandidateScoreANHOVNXA;
  ranking: UnorderedSetOfInteger2AHOqbcQarZIQlOy;
  window_days: Integer2AHOqbcQ;
}
export interface PlanResult {
  result: ProposalResult;
  chosen: Integer2AHOqbcQ;
  scores: UnorderedSetOfCandidateScoreANHOVNXA;
  attempts: UnorderedSetOfPlanAttemptocvgFhps;
  window_days: Integer2AHOqbcQ;
}
export interface SwarmResult {
  mode: StringDoaGddGA;
  task: StringDoaGddGA;
  outputs: UnorderedSetOfAgentOutputlX4CNr3L;
  rounds?: UnorderedSetOfUnorderedSetOfAgentOutputlX4CNr3LraBAfjgY;
  synthesizer?: AgentOutput;
  final_answer: StringDoaGddGA;
  fell_back: BooleanVyG3AETh;
  spend: MultiSpend;
}
export interface PipelineResult {
  task: StringDoaGddGA;
  stages: UnorderedSetOfAgentOutputlX4CNr3L;
  final_answer: StringDoaGddGA;
  completed: BooleanVyG3AETh;
  error?: StringDoaGddGA;
  spend: MultiSpend;
}
export interface SupervisorResult {
  task: StringDoaGddGA;
  rounds: UnorderedSetOfSupervisorRound2DmUdmZD;
  approved: BooleanVyG3AETh;
  final_answer: StringDoaGddGA;
  fell_back: BooleanVyG3AETh;
  spend: MultiSpend;
}
export interface MapReduceResult {
  task: StringDoaGddGA;
  mapped: UnorderedSetOfAgentOutputlX4CNr3L;
  reduced: AgentOutput;
  final_answer: StringDoaGddGA;
  fell_back: BooleanVyG3AETh;
  spend: MultiSpend;
}
export interface VoteResult {
  task: StringDoaGddGA;
  outputs: UnorderedSetOfAgentOutputlX4CNr3L;
  votes: UnorderedSetOfVoteTally3FkDRSQ8;
  winner_answer: StringDoaGddGA;
  winner_count: Integer2AHOqbcQ;
  synthesizer?: AgentOutput;
  final_answer: StringDoaGddGA;
  spend: MultiSpend;
}
export interface TournamentResult {
  task: StringDoaGddGA;
  candidates: UnorderedSetOfAgentOutputlX4CNr3L;
  matches: UnorderedSetOfMatchResultWl5X32Pv;
  winner_name: StringDoaGddGA;
  winner_answer: StringDoaGddGA;
  ranking: UnorderedSetOfStringDoaGddGADvj0XlFa;
  spend: MultiSpend;
}
export interface SubtaskResult {
  task: StringDoaGddGA;
  final_answer: StringDoaGddGA;
  main: AgentOutput;
  subtasks: UnorderedSetOfSubtaskRecordiSBEdZRy;
  spend: MultiSpend;
}
export interface VerifyResult {
  valid: BooleanVyG3AETh;
  issues: UnorderedSetOfVerifyIssue90T3UNcN;
  simulated_state: ObjectHAgrRKSz;
  execution_levels: UnorderedSetOfUnorderedSetOfStringDoaGddGADvj0XlFa8UTGvH52;
  conflicts: UnorderedSetOfUnorderedSetOfStringDoaGddGA741Ek67PZm5GVwTX;
  evidence: Evidence;
}
export interface SimulateResult {
  final_state: ObjectHAgrRKSz;
  blocked: UnorderedSetOfBlockedActionm7UI0ZV8;
}
export interface EquivalentResult {
  equivalent: BooleanVyG3AETh;
  differences: UnorderedSetOfDifferenceytLHBOCK;
  states_tested: Integer2AHOqbcQ;
  sampled: BooleanVyG3AETh;
  note: StringDoaGddGA;
}
export interface OptimizeResult {
  proposal: ActionProposal;
  pruned: UnorderedSetOfPrunedDependencyv0Z77RFr;
}
export interface MonteCarloResult {
  trials: Integer2AHOqbcQ;
  seed: Integer2AHOqbcQ;
  p_goal_reached: OneOfNullQu0Arl1FNumberHo1ClIqDKWtQwzS8;
  goal_underivable_conditions: UnorderedSetOfStringDoaGddGADvj0XlFa;
  p_all_effects_landed: NumberHo1ClIqD;
  tool_calls: Distribution;
  actions_executed: Distribution;
  state_distribution: UnorderedSetOfKeyDistributionLgxa1LxI;
  action_outcomes: UnorderedSetOfActionOutcomemMtuNu1V;
  rate_provenance: RateProvenance;
}
export interface TierResult {
  granted_tier: StringDoaGddGA;
}
export interface ClassifyResult {
  classifications: UnorderedSetOfClassificationJyLVemAq;
  declared_rollback_contract: StringDoaGddGA;
}
export interface EvaluateResult {
  decisions: UnorderedSetOfPermissionDecisionb2K4DvRh;
  intent?: UnorderedSetOfIntentDecisionGsiFkyv9;
}
export interface PendingResult {
  pending: UnorderedSetOfPermissionDecisionb2K4DvRh;
}
export interface SupervisionSubscribeResult {
  decision_timeout_ms: Integer2AHOqbcQ;
  subscribed: BooleanVyG3AETh;
  supervisors: Integer2AHOqbcQ;
}
export interface SubscriptionResult {
  subscribed: BooleanVyG3AETh;
  was_subscribed: BooleanVyG3AETh;
}
export interface SupervisionPendingResult {
  intents: UnorderedSetOfIntentY646S1OC;
}
export interface SupervisionDecideResult {
  decided: BooleanVyG3AETh;
}
export interface HostSnapshot {
  subscribed: BooleanVyG3AETh;
  agents: UnorderedSetOfHostAgentjRKNklaP;
  approvals: UnorderedSetOfHostApprovalrdhOK3Tp;
  events: UnorderedSetOfHostEventEntrylZgrb47I;
  devices: SetOfAnykhpArGaq;
  identity: HostIdentity;
}
export interface HostApprovalsResult {
  approvals: UnorderedSetOfHostApprovalrdhOK3Tp;
}
export interface HostEventsResult {
  events: UnorderedSetOfHostEventEntrylZgrb47I;
}
export interface OKResult {
  ok: BooleanVyG3AETh;
}
export interface EventsQueryResult {
  count: Integer2AHOqbcQ;
  events: UnorderedSetOfEventmkobcZjY;
  truncated?: BooleanVyG3AETh;
}
export interface ChainVerifyResult {
  verified?: Integer2AHOqbcQ;
  tampered_at?: Integer2AHOqbcQ;
  nodes?: UnorderedSetOfNodeChainm6CP5MNc;
}
export interface RetentionResult {
  policy: RetentionPolicy;
  removed?: Integer2AHOqbcQ;
}
export interface EventsSubscribeResult {
  subscribed: BooleanVyG3AETh;
  cursor: Integer2AHOqbcQ;
}
export interface MetricsAlertsResult {
  alerts: UnorderedSetOfAlertQnA5LTPb;
  summary: MetricsSummary;
}
export interface RunsStartResult {
  agent_id: StringDoaGddGA;
  run_id: StringDoaGddGA;
}
export interface RunsCompleteResult {
  ok: BooleanVyG3AETh;
  run_id: StringDoaGddGA;
}
export interface RunsRecordTurnsResult {
  base_index: Integer2AHOqbcQ;
  count: Integer2AHOqbcQ;
  dropped?: StringDoaGddGA;
  ok: BooleanVyG3AETh;
  run_id: StringDoaGddGA;
}
export interface RunSnapshot {
  run_id: StringDoaGddGA;
  agent_id: StringDoaGddGA;
  turns_so_far: UnorderedSetOfRunRecordFLq2ETrf;
  cursor: Integer2AHOqbcQ;
  status: StringDoaGddGA;
}
export interface RunsUnsubscribeResult {
  removed: BooleanVyG3AETh;
  run_id: StringDoaGddGA;
}
export interface RunsListResult {
  agent_id: StringDoaGddGA;
  runs: UnorderedSetOfRunSummaryjqVe58VF;
}
export interface RunsGetTraceResult {
  agent_id?: StringDoaGddGA;
  cursor?: Integer2AHOqbcQ;
  not_found?: BooleanVyG3AETh;
  records?: UnorderedSetOfRunRecordFLq2ETrf;
  run_id: StringDoaGddGA;
}
export interface AgentPostures {
  default: TierPosture;
  agents: ObjectFWHLFtsb;
}
export interface AgentPermissionsEvaluateResult {
  agent_id: StringDoaGddGA;
  has_override: BooleanVyG3AETh;
  mode: StringDoaGddGA;
  tier: StringDoaGddGA;
}
export interface AgentsRevokeResult {
  agent_id: StringDoaGddGA;
  revoked: BooleanVyG3AETh;
  connections_closed: Integer2AHOqbcQ;
}
export interface Lease {
  agent_id: StringDoaGddGA;
  holder: OneOfNullQu0Arl1FStringDoaGddGABsU3LTQx;
  epoch: Integer2AHOqbcQ;
  expires_at_ms: OneOfInteger2AHOqbcQNullQu0Arl1FHsQRyS69;
}
export interface ConnectorsListResult {
  connectors: UnorderedSetOfConnectorStatusbEgSxIh7;
}
export type UnorderedSetOfConnectorTooluspi01NI = ConnectorTool[];
export interface ConnectorEnableResult {
  enabled: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export interface ConnectorDisableResult {
  disabled: UnorderedSetOfStringDoaGddGADvj0XlFa;
}
export interface ConnectorRemoveResult {
  removed: StringDoaGddGA;
}
export type OneOfActionProposalNullQu0Arl1FLOK7Hzq5 = ActionProposal | NullQu0Arl1F;
/**
 *
 * Generated! Represents an alias to any of the provided schemas
 *
 */
export type AnyOfStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGAUnorderedSetOfToolSchemaJVvvp73KUnorderedSetOfPolicyDefinition9KOiK7KHStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAUnorderedSetOfToolSchemaJVvvp73KInteger2AHOqbcQInteger2AHOqbcQInteger2AHOqbcQHarnessFieldsHarnessFieldsInteger2AHOqbcQUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGABooleanVyG3AEThStringDoaGddGAAlwaysTrueStringDoaGddGAStringDoaGddGAStringDoaGddGABooleanVyG3AEThStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaUnorderedSetOfStringDoaGddGADvj0XlFaInteger2AHOqbcQStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaUnorderedSetOfStringDoaGddGADvj0XlFaUnorderedSetOfStringDoaGddGADvj0XlFaUnorderedSetOfStringDoaGddGADvj0XlFaUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAStringZEMSoApNUnorderedSetOfToolClaimhKDgiWQbStringDoaGddGAActionProposalStringDoaGddGARuntimeScopeTraceMetaStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAUnorderedSetOfActionProposaloPLm396OPlannerConfigRuntimeScopeUnorderedSetOfActionProposaloPLm396OPlannerConfigStringDoaGddGARuntimeScopeInteger2AHOqbcQInteger2AHOqbcQBooleanVyG3AEThBooleanVyG3AEThInteger2AHOqbcQInteger2AHOqbcQInteger2AHOqbcQNumberHo1ClIqDStringDoaGddGAStringDoaGddGAUnorderedSetOfAgentSpec7JaMzPsvStringDoaGddGAAgentSpecInteger2AHOqbcQMultiBudgetUnorderedSetOfAgentSpec7JaMzPsvStringDoaGddGAMultiBudgetUnorderedSetOfAgentSpec7JaMzPsvAgentSpecStringDoaGddGAInteger2AHOqbcQMultiBudgetAgentSpecAgentSpecUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAMultiBudgetUnorderedSetOfAgentSpec7JaMzPsvStringDoaGddGAAgentSpecMultiBudgetUnorderedSetOfAgentSpec7JaMzPsvAgentSpecStringDoaGddGAMultiBudgetAgentSpecStringDoaGddGAMultiBudgetActionProposalObjectHAgrRKSzActionProposalObjectHAgrRKSzActionProposalActionProposalUnorderedSetOfObjectHAgrRKSzAfoBnX12ActionProposalActionProposalObjectHAgrRKSzObjectSASv8KndAlwaysTrueInteger2AHOqbcQMonteCarloConfigStringDoaGddGAActionProposalActionProposalActionProposalStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAAlwaysTrueInteger2AHOqbcQInteger2AHOqbcQStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAAlwaysTrueInteger2AHOqbcQInteger2AHOqbcQSupervisionFilterStringDoaGddGASupervisionDecisionInteger2AHOqbcQStringDoaGddGAStringDoaGddGAStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAInteger2AHOqbcQObjectHAgrRKSzObjectHAgrRKSzStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectHAgrRKSzStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectHAgrRKSzStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectHAgrRKSzInteger2AHOqbcQStringDoaGddGABooleanVyG3AEThStringDoaGddGAInteger2AHOqbcQInteger2AHOqbcQUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAStringDoaGddGAStringV0UwQeVuStringV0UwQeVuObjectBd6DQSjJInteger2AHOqbcQInteger2AHOqbcQStringDoaGddGARetentionPolicyUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGANumberHo1ClIqDNumberHo1ClIqDNumberHo1ClIqDInteger2AHOqbcQInteger2AHOqbcQStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAAlwaysTrueStringDoaGddGAUnorderedSetOfRunTurnq5ZFJZevStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAInteger2AHOqbcQStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAStringDoaGddGAInteger2AHOqbcQStringDoaGddGAInteger2AHOqbcQInteger2AHOqbcQStringDoaGddGAInteger2AHOqbcQStringDoaGddGAStringDoaGddGAStringDoaGddGAObjectBd6DQSjJStringDoaGddGAStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaObjectBd6DQSjJStringDoaGddGAStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAUnorderedSetOfStringDoaGddGADvj0XlFaStringDoaGddGAStringDoaGddGAToolExecuteParamsToolCancelParamsToolStreamEventReplanProposeParamsRunTraceEventRunAgentParamsIntentNoticeEventNoticeHostEventNoticeAuthResultHandshakeResultObjectHAgrRKSzSessionInitResultServerStatusResultApprovalsListResultServerConnectionsResultSessionPolicyOpenResultSessionPolicyCloseResultPolicyRegisterResultPolicyUnregisterResultPolicyListResultInteger2AHOqbcQToolsListResultHarnessConfigHarnessConfigHarnessConfigToolsFeedbackResultToolsUnregisterResultToolHandlesResultOneOfToolPollResultNullQu0Arl1FDBNeggWkToolsCancelResultToolStreamSubscribeResultToolStreamSubscribeResultAnyKd7WMlqbStringDoaGddGABooleanVyG3AEThUnorderedSetOfStringDoaGddGADvj0XlFaObjectHAgrRKSzCheckpointSaveResultCheckpointListResultCheckpointRestoreResultCheckpointDeleteResultCapabilitySetCapabilitySetIntentStateIntentStateIntentStateTaintListResultTaintClearResultTransactionCheckParamsReceiptReportProposalResultProposalCancelResultScoreResultPlanResultNullQu0Arl1FBudgetReportSwarmResultPipelineResultSupervisorResultMapReduceResultVoteResultTournamentResultSubtaskResultVerifyResultSimulateResultEquivalentResultOptimizeResultMonteCarloResultTierResultTierResultClassifyResultEvaluateResultPendingResultApprovalRecordApprovalRecordSupervisionSubscribeResultSubscriptionResultSupervisionPendingResultSupervisionDecideResultHostSnapshotSubscriptionResultUnorderedSetOfHostAgentjRKNklaPHostApprovalsResultHostEventsResultHostAgentOKResultHostAgentHostEventEntryHostApprovalHostApprovalInteger2AHOqbcQEventsQueryResultOKResultChainVerifyResultRetentionResultEventsSubscribeResultSubscriptionResultMetricsSummaryMetricsAlertsResultUnorderedSetOfAgentCostiev788TdRunsStartResultRunsCompleteResultRunsRecordTurnsResultRunSnapshotRunsUnsubscribeResultRunsListResultRunsGetTraceResultAgentPosturesAgentPosturesAgentPosturesAgentPosturesAgentPermissionsEvaluateResultAgentsRevokeResultLeaseLeaseLeaseLeaseConnectorStatusConnectorStatusConnectorsListResultUnorderedSetOfConnectorTooluspi01NIConnectorEnableResultConnectorDisableResultUnorderedSetOfConnectorTooluspi01NIConnectorRemoveResultAnyKd7WMlqbNullQu0Arl1FNullQu0Arl1FOneOfActionProposalNullQu0Arl1FLOK7Hzq5NullQu0Arl1FAgentOutputNullQu0Arl1FNullQu0Arl1FNullQu0Arl1F = StringDoaGddGA | AlwaysTrue | UnorderedSetOfToolSchemaJVvvp73K | UnorderedSetOfPolicyDefinition9KOiK7KH | Integer2AHOqbcQ | HarnessFields | UnorderedSetOfStringDoaGddGADvj0XlFa | BooleanVyG3AETh | StringZEMSoApN | UnorderedSetOfToolClaimhKDgiWQb | ActionProposal | RuntimeScope | TraceMeta | UnorderedSetOfActionProposaloPLm396O | PlannerConfig | NumberHo1ClIqD | UnorderedSetOfAgentSpec7JaMzPsv | AgentSpec | MultiBudget | ObjectHAgrRKSz | UnorderedSetOfObjectHAgrRKSzAfoBnX12 | ObjectSASv8Knd | MonteCarloConfig | SupervisionFilter | SupervisionDecision | StringV0UwQeVu | ObjectBd6DQSjJ | RetentionPolicy | UnorderedSetOfRunTurnq5ZFJZev | ToolExecuteParams | ToolCancelParams | ToolStreamEvent | ReplanProposeParams | RunTraceEvent | RunAgentParams | IntentNotice | EventNotice | HostEventNotice | AuthResult | HandshakeResult | SessionInitResult | ServerStatusResult | ApprovalsListResult | ServerConnectionsResult | SessionPolicyOpenResult | SessionPolicyCloseResult | PolicyRegisterResult | PolicyUnregisterResult | PolicyListResult | ToolsListResult | HarnessConfig | ToolsFeedbackResult | ToolsUnregisterResult | ToolHandlesResult | OneOfToolPollResultNullQu0Arl1FDBNeggWk | ToolsCancelResult | ToolStreamSubscribeResult | AnyKd7WMlqb | CheckpointSaveResult | CheckpointListResult | CheckpointRestoreResult | CheckpointDeleteResult | CapabilitySet | IntentState | TaintListResult | TaintClearResult | TransactionCheckParams | ReceiptReport | ProposalResult | ProposalCancelResult | ScoreResult | PlanResult | NullQu0Arl1F | BudgetReport | SwarmResult | PipelineResult | SupervisorResult | MapReduceResult | VoteResult | TournamentResult | SubtaskResult | VerifyResult | SimulateResult | EquivalentResult | OptimizeResult | MonteCarloResult | TierResult | ClassifyResult | EvaluateResult | PendingResult | ApprovalRecord | SupervisionSubscribeResult | SubscriptionResult | SupervisionPendingResult | SupervisionDecideResult | HostSnapshot | UnorderedSetOfHostAgentjRKNklaP | HostApprovalsResult | HostEventsResult | HostAgent | OKResult | HostEventEntry | HostApproval | EventsQueryResult | ChainVerifyResult | RetentionResult | EventsSubscribeResult | MetricsSummary | MetricsAlertsResult | UnorderedSetOfAgentCostiev788Td | RunsStartResult | RunsCompleteResult | RunsRecordTurnsResult | RunSnapshot | RunsUnsubscribeResult | RunsListResult | RunsGetTraceResult | AgentPostures | AgentPermissionsEvaluateResult | AgentsRevokeResult | Lease | ConnectorStatus | ConnectorsListResult | UnorderedSetOfConnectorTooluspi01NI | ConnectorEnableResult | ConnectorDisableResult | ConnectorRemoveResult | OneOfActionProposalNullQu0Arl1FLOK7Hzq5 | AgentOutput;
export type SessionAuth = (token: StringDoaGddGA, host_token: StringDoaGddGA, agent_id: StringDoaGddGA, memory_namespace: StringDoaGddGA) => Promise<AuthResult>;
export type ServerHandshake = (protocol_version: AlwaysTrue, client_version: StringDoaGddGA, client_name: StringDoaGddGA) => Promise<HandshakeResult>;
export type RpcDiscover = () => Promise<ObjectHAgrRKSz>;
export type SessionInit = (tools: UnorderedSetOfToolSchemaJVvvp73K, policies: UnorderedSetOfPolicyDefinition9KOiK7KH) => Promise<SessionInitResult>;
export type ServerStatus = () => Promise<ServerStatusResult>;
export type ApprovalsList = () => Promise<ApprovalsListResult>;
export type ServerConnections = () => Promise<ServerConnectionsResult>;
export type SessionPolicyOpen = () => Promise<SessionPolicyOpenResult>;
export type SessionPolicyClose = (session_id: StringDoaGddGA) => Promise<SessionPolicyCloseResult>;
export type PolicyRegister = (name: StringDoaGddGA, rule: StringDoaGddGA, target: StringDoaGddGA, key: StringDoaGddGA, pattern: StringDoaGddGA, value: AlwaysTrue, session_id: StringDoaGddGA) => Promise<PolicyRegisterResult>;
export type PolicyUnregister = (name: StringDoaGddGA, session_id: StringDoaGddGA) => Promise<PolicyUnregisterResult>;
export type PolicyList = (session_id: StringDoaGddGA) => Promise<PolicyListResult>;
export type ToolsRegister = (items: UnorderedSetOfToolSchemaJVvvp73K) => Promise<Integer2AHOqbcQ>;
export type ToolsList = () => Promise<ToolsListResult>;
export type HarnessGet = () => Promise<HarnessConfig>;
export type HarnessSet = (max_retries: Integer2AHOqbcQ, retry_backoff_ms: Integer2AHOqbcQ, planning_max_replans: Integer2AHOqbcQ) => Promise<HarnessConfig>;
export type HarnessUpdate = (set: HarnessFields, add: HarnessFields) => Promise<HarnessConfig>;
export type ToolsFeedback = (window_days: Integer2AHOqbcQ, tools: UnorderedSetOfStringDoaGddGADvj0XlFa) => Promise<ToolsFeedbackResult>;
export type ToolsUnregister = (name: StringDoaGddGA) => Promise<ToolsUnregisterResult>;
export type ToolsHandles = () => Promise<ToolHandlesResult>;
export type ToolsPoll = (handle: StringDoaGddGA) => Promise<OneOfToolPollResultNullQu0Arl1FDBNeggWk>;
export type ToolsCancel = (handle: StringDoaGddGA) => Promise<ToolsCancelResult>;
export type ToolsStreamSubscribe = () => Promise<ToolStreamSubscribeResult>;
export type ToolsStreamUnsubscribe = () => Promise<ToolStreamSubscribeResult>;
export type ToolsStreamChunk = (handle: StringDoaGddGA, chunk: AlwaysTrue) => Promise<void>;
export type StateGet = (key: StringDoaGddGA, tenant_id: StringDoaGddGA, with_version: BooleanVyG3AETh) => Promise<AnyKd7WMlqb>;
export type StateSet = (key: StringDoaGddGA, value: AlwaysTrue, tenant_id: StringDoaGddGA) => Promise<StringDoaGddGA>;
export type StateExists = (key: StringDoaGddGA, tenant_id: StringDoaGddGA, with_version: BooleanVyG3AETh) => Promise<BooleanVyG3AETh>;
export type StateKeys = (tenant_id: StringDoaGddGA) => Promise<UnorderedSetOfStringDoaGddGADvj0XlFa>;
export type StateSnapshot = (tenant_id: StringDoaGddGA) => Promise<ObjectHAgrRKSz>;
export type CheckpointSave = (name: StringDoaGddGA, tenant_id: StringDoaGddGA) => Promise<CheckpointSaveResult>;
export type CheckpointList = () => Promise<CheckpointListResult>;
export type CheckpointRestore = (checkpoint_id: StringDoaGddGA) => Promise<CheckpointRestoreResult>;
export type CheckpointDelete = (checkpoint_id: StringDoaGddGA) => Promise<CheckpointDeleteResult>;
export type SessionCapabilitiesSet = (tools: UnorderedSetOfStringDoaGddGADvj0XlFa, state_keys: UnorderedSetOfStringDoaGddGADvj0XlFa, max_actions: Integer2AHOqbcQ) => Promise<CapabilitySet>;
export type SessionCapabilitiesGet = () => Promise<CapabilitySet>;
export type SessionIntentSet = (intent: StringDoaGddGA, allowed_tools: UnorderedSetOfStringDoaGddGADvj0XlFa, forbidden_tools: UnorderedSetOfStringDoaGddGADvj0XlFa, forbidden_capabilities: UnorderedSetOfStringDoaGddGADvj0XlFa, untrusted_tools: UnorderedSetOfStringDoaGddGADvj0XlFa) => Promise<IntentState>;
export type SessionIntentGet = () => Promise<IntentState>;
export type SessionIntentClear = () => Promise<IntentState>;
export type TaintList = (keys: UnorderedSetOfStringDoaGddGADvj0XlFa, tenant_id: StringDoaGddGA) => Promise<TaintListResult>;
export type TaintClear = (keys: UnorderedSetOfStringDoaGddGADvj0XlFa, tenant_id: StringDoaGddGA) => Promise<TaintClearResult>;
export type SessionTransactionCheckSet = (mode: StringZEMSoApN) => Promise<TransactionCheckParams>;
export type ReceiptsVerify = (claims: UnorderedSetOfToolClaimhKDgiWQb, proposal_id: StringDoaGddGA) => Promise<ReceiptReport>;
export type ProposalSubmit = (proposal: ActionProposal, session_id: StringDoaGddGA, scope: RuntimeScope, _meta: TraceMeta, traceparent: StringDoaGddGA, tracestate: StringDoaGddGA) => Promise<ProposalResult>;
export type ProposalCancel = (proposal_id: StringDoaGddGA, reason: StringDoaGddGA) => Promise<ProposalCancelResult>;
export type ProposalScore = (candidates: UnorderedSetOfActionProposaloPLm396O, planner: PlannerConfig, scope: RuntimeScope) => Promise<ScoreResult>;
export type ProposalPlan = (candidates: UnorderedSetOfActionProposaloPLm396O, planner: PlannerConfig, session_id: StringDoaGddGA, scope: RuntimeScope) => Promise<PlanResult>;
export type ReplanSetConfig = (max_replans: Integer2AHOqbcQ, delay_ms: Integer2AHOqbcQ, verify_before_execute: BooleanVyG3AETh, replan_on_rejected: BooleanVyG3AETh) => Promise<NullQu0Arl1F>;
export type SessionBudgetSet = (max_tool_calls: Integer2AHOqbcQ, max_actions: Integer2AHOqbcQ, max_duration_ms: Integer2AHOqbcQ, max_cost_usd: NumberHo1ClIqD, scope: StringDoaGddGA) => Promise<BudgetReport>;
export type MultiSwarm = (mode: StringDoaGddGA, agents: UnorderedSetOfAgentSpec7JaMzPsv, task: StringDoaGddGA, synthesizer: AgentSpec, rounds: Integer2AHOqbcQ, budget: MultiBudget) => Promise<SwarmResult>;
export type MultiPipeline = (stages: UnorderedSetOfAgentSpec7JaMzPsv, task: StringDoaGddGA, budget: MultiBudget) => Promise<PipelineResult>;
export type MultiSupervisor = (workers: UnorderedSetOfAgentSpec7JaMzPsv, supervisor: AgentSpec, task: StringDoaGddGA, max_rounds: Integer2AHOqbcQ, budget: MultiBudget) => Promise<SupervisorResult>;
export type MultiMapReduce = (mapper: AgentSpec, reducer: AgentSpec, items: UnorderedSetOfStringDoaGddGADvj0XlFa, task: StringDoaGddGA, budget: MultiBudget) => Promise<MapReduceResult>;
export type MultiVote = (agents: UnorderedSetOfAgentSpec7JaMzPsv, task: StringDoaGddGA, synthesizer: AgentSpec, budget: MultiBudget) => Promise<VoteResult>;
export type MultiTournament = (competitors: UnorderedSetOfAgentSpec7JaMzPsv, judge: AgentSpec, task: StringDoaGddGA, budget: MultiBudget) => Promise<TournamentResult>;
export type MultiSubtask = (main: AgentSpec, task: StringDoaGddGA, budget: MultiBudget) => Promise<SubtaskResult>;
export type Verify = (proposal: ActionProposal, initial_state: ObjectHAgrRKSz) => Promise<VerifyResult>;
export type Simulate = (proposal: ActionProposal, initial_state: ObjectHAgrRKSz) => Promise<SimulateResult>;
export type Equivalent = (a: ActionProposal, b: ActionProposal, test_states: UnorderedSetOfObjectHAgrRKSzAfoBnX12) => Promise<EquivalentResult>;
export type Optimize = (proposal: ActionProposal) => Promise<OptimizeResult>;
export type VerifyMonteCarlo = (proposal: ActionProposal, initial_state: ObjectHAgrRKSz, tool_success_rates: ObjectSASv8Knd, goal: AlwaysTrue, rate_window_days: Integer2AHOqbcQ, config: MonteCarloConfig) => Promise<MonteCarloResult>;
export type PermissionGetTier = () => Promise<TierResult>;
export type PermissionSetTier = (tier: StringDoaGddGA) => Promise<TierResult>;
export type PermissionClassify = (proposal: ActionProposal) => Promise<ClassifyResult>;
export type PermissionEvaluate = (proposal: ActionProposal) => Promise<EvaluateResult>;
export type PermissionPending = (proposal: ActionProposal) => Promise<PendingResult>;
export type PermissionApprove = (fingerprint: StringDoaGddGA, required_tier: StringDoaGddGA, action: AlwaysTrue, reason: StringDoaGddGA, evidence: AlwaysTrue, expires_in: Integer2AHOqbcQ, uses: Integer2AHOqbcQ) => Promise<ApprovalRecord>;
export type PermissionReject = (fingerprint: StringDoaGddGA, required_tier: StringDoaGddGA, action: AlwaysTrue, reason: StringDoaGddGA, evidence: AlwaysTrue, expires_in: Integer2AHOqbcQ, uses: Integer2AHOqbcQ) => Promise<ApprovalRecord>;
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
export type HostResolveApproval = (approval_id: StringDoaGddGA, approved: BooleanVyG3AETh, notes: StringDoaGddGA, expires_in: Integer2AHOqbcQ, uses: Integer2AHOqbcQ) => Promise<HostApproval>;
export type EventsCount = () => Promise<Integer2AHOqbcQ>;
export type EventsQuery = (kinds: UnorderedSetOfStringDoaGddGADvj0XlFa, action_id: StringDoaGddGA, proposal_id: StringDoaGddGA, since: StringV0UwQeVu, until: StringV0UwQeVu, data_matches: ObjectBd6DQSjJ, limit: Integer2AHOqbcQ, after_cursor: Integer2AHOqbcQ, node: StringDoaGddGA) => Promise<EventsQueryResult>;
export type EventsChainEnable = () => Promise<OKResult>;
export type EventsChainVerify = () => Promise<ChainVerifyResult>;
export type EventsRetention = (policy: RetentionPolicy) => Promise<RetentionResult>;
export type EventsSubscribe = (kinds: UnorderedSetOfStringDoaGddGADvj0XlFa, proposal_id: StringDoaGddGA) => Promise<EventsSubscribeResult>;
export type EventsUnsubscribe = () => Promise<SubscriptionResult>;
export type MetricsSummary = () => Promise<MetricsSummary>;
export type MetricsAlerts = (max_cost_usd: NumberHo1ClIqD, max_error_rate: NumberHo1ClIqD, max_avg_latency_ms: NumberHo1ClIqD, max_goals_ungrounded: Integer2AHOqbcQ, min_actions: Integer2AHOqbcQ) => Promise<MetricsAlertsResult>;
export type EventsCostByAgent = () => Promise<UnorderedSetOfAgentCostiev788Td>;
export type RunsStart = (intent: StringDoaGddGA, agent_id: StringDoaGddGA, agent_name: StringDoaGddGA, outcome_description: StringDoaGddGA, idempotency_key: StringDoaGddGA) => Promise<RunsStartResult>;
export type RunsComplete = (run_id: StringDoaGddGA, outcome: AlwaysTrue) => Promise<RunsCompleteResult>;
export type RunsRecordTurns = (run_id: StringDoaGddGA, turns: UnorderedSetOfRunTurnq5ZFJZev) => Promise<RunsRecordTurnsResult>;
export type RunsSubscribe = (run_id: StringDoaGddGA) => Promise<RunSnapshot>;
export type RunsUnsubscribe = (run_id: StringDoaGddGA) => Promise<RunsUnsubscribeResult>;
export type RunsList = (agent_id: StringDoaGddGA) => Promise<RunsListResult>;
export type RunsGetTrace = (run_id: StringDoaGddGA, cursor: Integer2AHOqbcQ) => Promise<RunsGetTraceResult>;
export type AgentPermissionsGet = () => Promise<AgentPostures>;
export type AgentPermissionsSet = (agent_id: StringDoaGddGA, mode: StringDoaGddGA, tier: StringDoaGddGA) => Promise<AgentPostures>;
export type AgentPermissionsSetDefault = (preset: StringDoaGddGA, tier: StringDoaGddGA, mode: StringDoaGddGA) => Promise<AgentPostures>;
export type AgentPermissionsReset = (agent_id: StringDoaGddGA) => Promise<AgentPostures>;
export type AgentPermissionsEvaluate = (agent_id: StringDoaGddGA, tier: StringDoaGddGA) => Promise<AgentPermissionsEvaluateResult>;
export type AgentsRevoke = (agent_id: StringDoaGddGA) => Promise<AgentsRevokeResult>;
export type LeaseAcquire = (agent_id: StringDoaGddGA, ttl_ms: Integer2AHOqbcQ) => Promise<Lease>;
export type LeaseRenew = (agent_id: StringDoaGddGA, epoch: Integer2AHOqbcQ, ttl_ms: Integer2AHOqbcQ) => Promise<Lease>;
export type LeaseRelease = (agent_id: StringDoaGddGA, epoch: Integer2AHOqbcQ) => Promise<Lease>;
export type LeaseStatus = (agent_id: StringDoaGddGA) => Promise<Lease>;
export type ConnectorsAdd = (name: StringDoaGddGA, url: StringDoaGddGA, headers: ObjectBd6DQSjJ) => Promise<ConnectorStatus>;
export type ConnectorsAddStdio = (name: StringDoaGddGA, command: StringDoaGddGA, args: UnorderedSetOfStringDoaGddGADvj0XlFa, env: ObjectBd6DQSjJ) => Promise<ConnectorStatus>;
export type ConnectorsList = () => Promise<ConnectorsListResult>;
export type ConnectorsTools = (slug: StringDoaGddGA) => Promise<UnorderedSetOfConnectorTooluspi01NI>;
export type ConnectorsEnableTools = (slug: StringDoaGddGA, tools: UnorderedSetOfStringDoaGddGADvj0XlFa) => Promise<ConnectorEnableResult>;
export type ConnectorsDisableTools = (slug: StringDoaGddGA, tools: UnorderedSetOfStringDoaGddGADvj0XlFa) => Promise<ConnectorDisableResult>;
export type ConnectorsRefresh = (slug: StringDoaGddGA) => Promise<UnorderedSetOfConnectorTooluspi01NI>;
export type ConnectorsRemove = (slug: StringDoaGddGA) => Promise<ConnectorRemoveResult>;
export type ToolsExecute = (params: ToolExecuteParams) => Promise<AnyKd7WMlqb>;
export type ToolsCancelToClient = (params: ToolCancelParams) => Promise<NullQu0Arl1F>;
export type ToolsStreamEvent = (params: ToolStreamEvent) => Promise<NullQu0Arl1F>;
export type ReplanPropose = (params: ReplanProposeParams) => Promise<OneOfActionProposalNullQu0Arl1FLOK7Hzq5>;
export type RunsTraceEvent = (params: RunTraceEvent) => Promise<NullQu0Arl1F>;
export type MultiRunAgent = (params: RunAgentParams) => Promise<AgentOutput>;
export type SupervisionIntent = (params: IntentNotice) => Promise<NullQu0Arl1F>;
export type EventsEvent = (params: EventNotice) => Promise<NullQu0Arl1F>;
export type HostEvent = (params: HostEventNotice) => Promise<NullQu0Arl1F>;