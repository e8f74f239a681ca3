package config

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/connectors"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/mcpserve"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/postgres"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/protocol"
)

// setting is one configuration key with its environment variable, help and
// default; the flag is the key with dashes. Load binds all of them to viper
// and --help prints them, so the two cannot disagree. A default the daemon
// shares with a zero field of a package's Options is that package's
// constant, so the two cannot disagree either.
type setting struct {
	key, env, help string
	def            any
}

// flag is the command-line name of the setting, without the dashes in front.
func (s setting) flag() string { return strings.ReplaceAll(s.key, "_", "-") }

// defaultValue is def as viper and --help are given it: a duration as the
// text a person writes, 5m rather than 5m0s.
func (s setting) defaultValue() any {
	d, ok := s.def.(time.Duration)
	if !ok {
		return s.def
	}
	text := d.String()
	if m, ok := strings.CutSuffix(text, "m0s"); ok {
		text = m + "m"
		if h, ok := strings.CutSuffix(text, "h0m"); ok {
			text = h + "h"
		}
	}
	return text
}

var settings = []setting{
	{"home", "CAR_HOME", "state root (absolute path)", "~/.car"},
	{"bind", "CAR_BIND", "TCP listen address (loopback only unless auth is on)", "127.0.0.1"},
	{"port", "CAR_PORT", "TCP listen port (0 picks a free port)", 9100},
	{"socket", "CAR_SERVER_SOCKET", `Unix socket path ("off" disables it)`, "$CAR_HOME/run/car-server.sock"},
	{"no_auth", "CAR_NO_AUTH", "turn token auth off (trusted single-user machines only)", false},
	{"auth_token", "CAR_AUTH_TOKEN", "use this token instead of a fresh random one", ""},
	{"host_token", "CAR_HOST_TOKEN", "use this host token (session.auth {host_token} grants the host role) instead of a fresh random one", ""},
	{"approver_role", "CAR_APPROVER_ROLE", "who may approve or reject: any (every authenticated connection) or host (host-token connections only)", rpc.ApproverAny},
	{"require_handshake", "CAR_REQUIRE_HANDSHAKE", "refuse every method but session.auth, server.handshake and rpc.discover with -32005 until the connection sends server.handshake; false serves old clients that never send it", true},
	{"approval_timeout", "CAR_APPROVAL_TIMEOUT", "how long a proposal waits for a person to approve its parked actions (seconds or a duration)", engine.DefaultApprovalTimeout},
	{"max_approvals_per_proposal", "CAR_MAX_APPROVALS_PER_PROPOSAL", "distinct operations (fingerprints) one proposal may put to a person; past it the proposal is rejected", engine.DefaultMaxApprovalsPerProposal},
	{"transaction_check", "CAR_TRANSACTION_CHECK", "the transaction check's default mode: off, warn (record conflicts) or strict (refuse a conflicting proposal); a connection may be stricter, only the host role laxer", protocol.TransactionCheckOff},
	{"max_intent_patterns", "CAR_MAX_INTENT_PATTERNS", "tool patterns and capabilities one intent (intent.json or session.intent.set) may list", engine.DefaultMaxIntentPatterns},
	{"max_intent_text_bytes", "CAR_MAX_INTENT_TEXT_BYTES", "longest intent text", engine.DefaultMaxIntentTextBytes},
	{"max_tainted_keys", "CAR_MAX_TAINTED_KEYS", "state keys the taint ledger holds; while full, a proposal that would taint more is refused until taint.clear or trusted writes make room; also the keys of one taint.list or taint.clear", engine.DefaultMaxTaintedKeys},
	{"max_assumptions", "CAR_MAX_ASSUMPTIONS", "assumptions one proposal may carry when the transaction check is on (each is a state read at admission)", engine.DefaultMaxAssumptions},
	{"max_receipt_claims", "CAR_MAX_RECEIPT_CLAIMS", "claims one receipts.verify may check", engine.DefaultMaxReceiptClaims},
	{"run_incomplete_grace", "CAR_RUN_INCOMPLETE_GRACE", "how long a run whose connection went away without runs.complete waits before it is marked incomplete (seconds or a duration)", runs.DefaultGrace},
	{"max_runs_per_agent", "CAR_MAX_RUNS_PER_AGENT", "runs one agent may have in progress on this daemon; runs.start refuses past it", runs.DefaultMaxPerAgent},
	{"max_runs_in_progress", "CAR_MAX_RUNS_IN_PROGRESS", "runs in progress on this daemon, all agents together; runs.start refuses past it", runs.DefaultMaxInProgress},
	{"max_run_intent_bytes", "CAR_MAX_RUN_INTENT_BYTES", "largest intent, agent_name or outcome_description runs.start accepts", runs.DefaultMaxTextBytes},
	{"max_run_outcome_bytes", "CAR_MAX_RUN_OUTCOME_BYTES", "largest outcome runs.complete accepts", runs.DefaultMaxTextBytes},
	{"lease_default_ttl", "CAR_LEASE_DEFAULT_TTL", "how long a lease lasts when lease.acquire or lease.renew gives no ttl_ms (kept within lease_min_ttl and lease_max_ttl)", rpc.DefaultLeaseTTL},
	{"lease_min_ttl", "CAR_LEASE_MIN_TTL", "the shortest ttl_ms lease.acquire and lease.renew accept", rpc.DefaultLeaseMinTTL},
	{"lease_max_ttl", "CAR_LEASE_MAX_TTL", "the longest ttl_ms lease.acquire and lease.renew accept", rpc.DefaultLeaseMaxTTL},
	{"max_goal_conditions", "CAR_MAX_GOAL_CONDITIONS", "conditions one goal condition of goals.evaluate or goals.record may hold, all_of and any_of included", engine.DefaultMaxGoalConditions},
	{"max_goal_text_bytes", "CAR_MAX_GOAL_TEXT_BYTES", "longest text of goals.record (goal, reason, model, model_tier, and its condition as JSON) and turns.record_completed (decision, stop_reason, model)", rpc.DefaultMaxGoalTextBytes},
	{"max_scope_claims_bytes", "CAR_MAX_SCOPE_CLAIMS_BYTES", "largest scope.claims of proposal.submit, as JSON", rpc.DefaultMaxScopeClaimsBytes},
	{"max_lease_agent_id_bytes", "CAR_MAX_LEASE_AGENT_ID_BYTES", "the longest agent_id lease.* accept (each id is a row or a journal key kept for good)", rpc.DefaultMaxLeaseAgentIDBytes},
	{"max_open_run_journals", "CAR_MAX_OPEN_RUN_JOURNALS", "with store file, run journals open at once (each an open file); past it the least recently used idle one is closed, and opened again when its run is next appended to", file.DefaultMaxOpenRunJournals},
	{"allowed_origins", "CAR_ALLOWED_ORIGINS", "comma-separated Origin host patterns allowed to connect besides same-host", ""},
	{"allowed_hosts", "CAR_ALLOWED_HOSTS", "comma-separated Host names (name, or name:port) the TCP listeners and the profiler answer besides loopback names and the listen address; any other Host gets 403", ""},
	{"max_frame_bytes", "CAR_MAX_FRAME_BYTES", "largest WebSocket frame accepted; bigger closes the connection (1009)", rpc.DefaultMaxFrameBytes},
	{"max_connections", "CAR_MAX_CONNECTIONS", "concurrent connections; each is an open file (the daemon raises its soft limit to the hard one and warns when that is short)", rpc.DefaultMaxConnections},
	{"auth_timeout", "CAR_AUTH_TIMEOUT", "an unauthenticated connection is closed (1008) after this (seconds or a duration)", rpc.DefaultAuthTimeout},
	{"max_unauthenticated", "CAR_MAX_UNAUTHENTICATED", "unauthenticated connections; past it the oldest silent one older than 2 s is closed (1008) to admit the newcomer, never one that has sent its session.auth", rpc.DefaultMaxUnauthenticated},
	{"max_in_flight", "CAR_MAX_IN_FLIGHT", "concurrent requests per connection", rpc.DefaultMaxInFlight},
	{"mcp_bind", "CAR_MCP_BIND", `host:port of the MCP endpoint (Streamable HTTP at /mcp, GET /mcp/health); "disabled" turns it off; beyond loopback needs auth on`, DefaultMCPBind},
	{"mcp_max_body_bytes", "CAR_MCP_MAX_BODY_BYTES", "largest request body the MCP endpoint reads; a larger one gets 413", mcpserve.DefaultMaxBodyBytes},
	{"mcp_max_sessions_per_principal", "CAR_MCP_MAX_SESSIONS_PER_PRINCIPAL", "MCP sessions one principal (the plain client, or one agent) may hold open; past it initialize is refused", mcpserve.DefaultMaxSessionsPerPrincipal},
	{"mcp_max_calls_per_principal", "CAR_MCP_MAX_CALLS_PER_PRINCIPAL", "MCP tools/call requests of one principal in flight at once, waits for approval included; past it a call is refused", mcpserve.DefaultMaxCallsPerPrincipal},
	{"handler_timeout", "CAR_HANDLER_TIMEOUT", "deadline of one request (seconds or a duration like 30m)", rpc.DefaultHandlerTimeout},
	{"tool_timeout", "CAR_TOOL_TIMEOUT", "default budget of one tool callback (seconds or a duration)", engine.DefaultToolTimeout},
	{"shutdown_grace", "CAR_SHUTDOWN_GRACE", "time in-flight requests get to finish on shutdown; actions still running after it get as long again", "10s"},
	{"max_actions", "CAR_MAX_ACTIONS", "actions per proposal", engine.DefaultMaxActions},
	{"max_plan_candidates", "CAR_MAX_PLAN_CANDIDATES", "candidate proposals one proposal.plan or proposal.score may send; more are refused before any is read", rpc.DefaultMaxPlanCandidates},
	{"max_plan_actions", "CAR_MAX_PLAN_ACTIONS", "actions of all candidates of one proposal.plan or proposal.score together; past it the call is refused before any is scored", engine.DefaultMaxActions},
	{"max_tools", "CAR_MAX_TOOLS", "tools a connection may register (built-ins not counted)", engine.DefaultMaxTools},
	{"max_resolved_action_bytes", "CAR_MAX_RESOLVED_ACTION_BYTES", "one action's parameters and effects with $references resolved", engine.DefaultMaxResolvedActionBytes},
	{"max_resolved_proposal_bytes", "CAR_MAX_RESOLVED_PROPOSAL_BYTES", "all resolved actions of one proposal together", engine.DefaultMaxResolvedProposalBytes},
	{"max_schema_bytes", "CAR_MAX_SCHEMA_BYTES", "largest JSON Schema a tool may register (parameters or returns)", engine.DefaultSchemaLimits.MaxBytes},
	{"max_schema_keywords", "CAR_MAX_SCHEMA_KEYWORDS", "object members in one tool's JSON Schema", engine.DefaultSchemaLimits.MaxKeywords},
	{"max_schema_ref_depth", "CAR_MAX_SCHEMA_REF_DEPTH", "$refs one value of a tool's schema may pass through in a row", engine.DefaultSchemaLimits.MaxRefDepth},
	{"max_schema_expansion", "CAR_MAX_SCHEMA_EXPANSION", "subschemas one value is checked against in place (allOf, anyOf, oneOf and $ref multiply)", engine.DefaultSchemaLimits.MaxExpansion},
	{"max_schema_evaluations", "CAR_MAX_SCHEMA_EVALUATIONS", "subschema checks one validation of an action's parameters or a tool's output may make, each check of an object or array also counting its members or items, and of an enum its values; past it the action is rejected before it is validated", engine.DefaultSchemaLimits.MaxEvaluations},
	{"supervision_timeout", "CAR_SUPERVISION_TIMEOUT", "how long a proposal waits for a supervisor before it is rejected", engine.DefaultSupervisionTimeout},
	{"max_concurrency", "CAR_MAX_CONCURRENCY", "actions of one proposal running at once", engine.DefaultMaxConcurrency},
	{"max_starting_proposals", "CAR_MAX_STARTING_PROPOSALS", "proposals in their first 100 ms at once, across all connections; more wait their turn, one connection after another, each connection's oldest first (0: 16 per CPU)", 0},
	{"stream_idle_timeout", "CAR_STREAM_IDLE_TIMEOUT", "a streaming tool handle that sends no chunk for this long fails (seconds or a duration)", streams.DefaultIdleTimeout},
	{"max_stream_handles", "CAR_MAX_STREAM_HANDLES", "streaming tool handles a connection may hold, running or not yet polled to the end", streams.DefaultMaxPerOwner},
	{"max_stream_chunk_bytes", "CAR_MAX_STREAM_CHUNK_BYTES", "largest tools.stream.chunk accepted; larger ones are ignored", streams.DefaultMaxChunkBytes},
	{"max_stream_buffered_bytes", "CAR_MAX_STREAM_BUFFERED_BYTES", "undrained stream chunks of all handles together; past it a handle's oldest chunks are dropped (counted in dropped_chunks and server.status)", streams.DefaultMaxBuffered},
	{"max_action_id_bytes", "CAR_MAX_ACTION_ID_BYTES", "longest proposal or action id; a longer one rejects the proposal at decode", protocol.DefaultMaxIDBytes},
	{"strict_fields", "CAR_STRICT_FIELDS", "reject a proposal with a field the IR does not know (a typo like depends_on) instead of running it with a warning", false},
	{"max_notify_bytes", "CAR_MAX_NOTIFY_BYTES", "params of host.notify and host.set_status (the payload the host event ring keeps)", rpc.DefaultMaxNotifyBytes},
	{"max_context_bytes", "CAR_MAX_CONTEXT_BYTES", "params of host.request_approval (its context) and host.register_agent (its metadata)", rpc.DefaultMaxContextBytes},
	{"max_state_value_bytes", "CAR_MAX_STATE_VALUE_BYTES", "one state value as JSON, written by state_write, expected_effects or state.set", engine.DefaultMaxStateValueBytes},
	{"event_log_bytes", "CAR_EVENT_LOG_BYTES", "bytes of the in-memory event log, besides its 100,000 events; the oldest go first", engine.DefaultEventBytes},
	{"host_event_ring_bytes", "CAR_HOST_EVENT_RING_BYTES", "bytes of the host event ring, besides its 1,000 events; the oldest go first", host.DefaultEventRingBytes},
	{"feed_queue_bytes", "CAR_FEED_QUEUE_BYTES", "undelivered notifications of one live feed (host.event, events.event, tools.stream.event, …) per subscriber, besides their 256; the oldest are dropped and the next notice says how many", rpc.DefaultFeedQueueBytes},
	{"max_checkpoints", "CAR_MAX_CHECKPOINTS", "checkpoints kept under $CAR_HOME/checkpoints; checkpoint.save refuses past it", 64},
	{"max_checkpoint_bytes", "CAR_MAX_CHECKPOINT_BYTES", "largest checkpoint file saved or restored", 64 << 20},
	{"store", "CAR_STORE", "where approvals, idempotency results, message receipts, state, run traces, agent tokens and postures live: file (journals under $CAR_HOME, one daemon) or postgres (several daemons share one database)", StoreFile},
	{"journal_sync", "CAR_JOURNAL_SYNC", "when an idempotent result is flushed to disk (store file: its journal; store postgres: its commit): full (before the next step and before any reply) or proposal (written at once, a proposal's results flushed once, before its reply: a power loss, or a database crash, can then repeat steps of a proposal not yet answered)", string(file.SyncFull)},
	{"postgres_url", "CAR_POSTGRES_URL", "the database when store is postgres: a libpq URL or keyword/value string; its password never appears in a log", ""},
	{"postgres_max_conns", "CAR_POSTGRES_MAX_CONNS", "connections in the pool to the database", postgres.DefaultMaxConns},
	{"postgres_statement_timeout", "CAR_POSTGRES_STATEMENT_TIMEOUT", "deadline of one statement on the database (seconds or a duration)", postgres.DefaultStatementTimeout},
	{"claim_lease", "CAR_CLAIM_LEASE", "with store postgres, how long an idempotency claim outlives the daemon holding it before a waiting daemon takes it over (seconds or a duration)", postgres.DefaultClaimLease},
	{"heartbeat", "CAR_HEARTBEAT", "with store postgres, how often this daemon stamps its row in the member list; a member that misses 3 is listed dead, and its supervisors stop counting (seconds or a duration)", postgres.DefaultHeartbeat},
	{"events_retention", "CAR_EVENTS_RETENTION", "with store file, how long the durable event log under $CAR_HOME/events keeps events: whole segments whose newest event is older go (a duration like 720h)", file.DefaultEventsRetention},
	{"events_max_bytes", "CAR_EVENTS_MAX_BYTES", "with store file, the most bytes the durable event log keeps; past it the oldest whole segments go (at least 256 KiB)", file.DefaultEventsMaxBytes},
	{"audit_head_every", "CAR_AUDIT_HEAD_EVERY", "with store file, events between two signed heads of the event log's chain: at most this many events can be cut off the end of the log undetected", file.DefaultAuditHeadEvery},
	{"audit_head_interval", "CAR_AUDIT_HEAD_INTERVAL", "with store file, the longest time events wait for a signed head (seconds or a duration)", file.DefaultAuditHeadPeriod},
	{"events_spool_max_bytes", "CAR_EVENTS_SPOOL_MAX_BYTES", "with store postgres, the largest $CAR_HOME/events-spool.jsonl, where events wait while the database is unreachable", postgres.DefaultSpoolMaxBytes},
	{"trajectory_retention_days", "CAR_TRAJECTORY_RETENTION_DAYS", "days of dispatched-attempt records (trajectories) kept; older whole days are deleted at start and hourly, and tools.feedback's window_days is at most this", store.DefaultTrajectoryRetentionDays},
	{"mcp_max_connectors", "CAR_MCP_MAX_CONNECTORS", "MCP connectors the daemon holds at once ($CAR_HOME/connectors.toml's and the wire's); connectors.add refuses past it", connectors.DefaultMaxConnectors},
	{"mcp_max_tools", "CAR_MCP_MAX_TOOLS", "tools one MCP server may list; a longer tools/list is refused whole, naming the bound", connectors.DefaultMaxTools},
	{"mcp_max_result_bytes", "CAR_MCP_MAX_RESULT_BYTES", "largest message an MCP server may send, and largest tools/call result; past it the call fails and the connection is closed and made again", connectors.DefaultMaxResultBytes},
	{"mcp_connect_timeout", "CAR_MCP_CONNECT_TIMEOUT", "how long an MCP server has to answer initialize and tools/list (seconds or a duration)", connectors.DefaultConnectTimeout},
	{"log_format", "CAR_LOG_FORMAT", "log format: json or console", "json"},
	{"log_level", "CAR_LOG_LEVEL", "log level: debug, info, warn or error", "info"},
	{"pprof", "CAR_PPROF", "serve Go's profiler (/debug/pprof/) on this loopback host:port, for diagnosis; empty: off", ""},
	{"otel_exporter_otlp_endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "send OpenTelemetry traces to this OTLP collector (base URL; /v1/traces is added for http/protobuf); empty, with no traces endpoint either: tracing is off", ""},
	{"otel_exporter_otlp_traces_endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "the collector's traces URL, used as is; wins over otel_exporter_otlp_endpoint", ""},
	{"otel_exporter_otlp_protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", "how traces are sent: http/protobuf or grpc", tracing.DefaultProtocol},
	{"otel_exporter_otlp_headers", "OTEL_EXPORTER_OTLP_HEADERS", "headers of every export, key=value pairs separated by commas, URL-encoded (an API key, say); never logged", ""},
	{"otel_service_name", "OTEL_SERVICE_NAME", "service.name of the daemon's spans", tracing.DefaultServiceName},
	{"otel_resource_attributes", "OTEL_RESOURCE_ATTRIBUTES", "more resource attributes, key=value pairs separated by commas (service.version, car.node.id and car.home are set by the daemon)", ""},
	{"otel_traces_sampler", "OTEL_TRACES_SAMPLER", "which traces are kept: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", tracing.DefaultSampler},
	{"otel_traces_sampler_arg", "OTEL_TRACES_SAMPLER_ARG", "the ratio (0 to 1) of the traceidratio samplers; empty: 1", ""},
	{"otel_capture_tool_arguments", "CAR_OTEL_CAPTURE_TOOL_ARGUMENTS", "put each tool call's parameters on its execute_tool span (gen_ai.tool.call.arguments), redacted and cut as an approval's preview is; false: no parameter value is ever in a span", false},
	{"otel_trace_url", "CAR_OTEL_TRACE_URL", "a link template to a proposal's trace, naming {trace_id} (http://127.0.0.1:16686/trace/{trace_id} for a local Jaeger): the dashboard links each traced proposal to it; empty: the trace id only", ""},
	{"otel_trace_queue_spans", "CAR_OTEL_TRACE_QUEUE_SPANS", "ended spans waiting for export; past it a span is dropped and counted in car_trace_spans_dropped_total, so a slow collector never slows a proposal", tracing.DefaultQueueSpans},
}

// lookup returns the setting of a key; every key Load reads is in settings.
func lookup(key string) (setting, bool) {
	for _, s := range settings {
		if s.key == key {
			return s, true
		}
	}
	return setting{}, false
}

// writeUsage prints the --help table from settings.
func writeUsage(out io.Writer) {
	fmt.Fprint(out, `car-server: the Common Agent Runtime daemon (JSON-RPC 2.0 over WebSocket)

Usage:
  car-server [flags]            run the daemon
  car-server COMMAND [ARGS]     an operator command; without ARGS it prints its usage

Commands:
  call METHOD [PARAMS_JSON]     send one request to the running daemon, print the result as JSON
  status                        the running daemon's version, connections and runtime figures
  policies                      the policies in force
  approvals list|watch|approve|reject   the approval ledger; watch prints requests as they arrive
  policy check [DIR]            validate a policy directory offline
  journal verify|compact FILE   check or compact a state journal
  audit verify|pubkey|export    check the durable event log's signed chain offline, print its key, export its events
  migrate status|up             the database's schema migrations (store postgres)
  agents issue-token|revoke|list  per-agent tokens
  dashboard                     open the dashboard with a host-role login
  mcp [--agent ID]              a stdio MCP server forwarding to the daemon's MCP endpoint

Every setting can come from a flag, a CAR_* environment variable or the
config file ($CAR_HOME/config.yaml); flags win over the environment, which
wins over the file.

Settings:
`)
	// The columns are as wide as the longest flag and variable.
	flagW, envW := len("--config FILE"), 0
	for _, s := range settings {
		flagW, envW = max(flagW, len("--"+s.flag())), max(envW, len(s.env))
	}
	row := func(flag, env, help string) { fmt.Fprintf(out, "  %-*s %-*s %s\n", flagW, flag, envW, env, help) }
	for _, s := range settings {
		help := s.help
		if d := fmt.Sprint(s.defaultValue()); d != "" {
			help += " (default " + d + ")"
		}
		row("--"+s.flag(), s.env, help)
	}
	row("--config FILE", "", "read settings from FILE instead of $CAR_HOME/config.yaml")
	row("--version", "", "print the version and exit")
	row("--help", "", "print this help and exit")
}
