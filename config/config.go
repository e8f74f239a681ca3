package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/netaddr"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/tracing"
)

// Config is every setting of the daemon, resolved.
type Config struct {
	Home                    string                  // state root; absolute
	Bind                    string                  // TCP listen host
	Port                    int                     // TCP listen port; 0 picks a free one
	Socket                  string                  // Unix socket path; empty disables it
	NoAuth                  bool                    // turn token auth off
	RequireHandshake        bool                    // server.handshake before any method but session.auth and rpc.discover
	TrajectoryRetentionDays int                     // days of trajectories kept; tools.feedback's largest window
	AuthToken               string                  // use this token instead of a fresh one
	HostToken               string                  // use this host token instead of a fresh one
	ApproverRole            string                  // who may approve: "any" or "host"
	ApprovalTimeout         time.Duration           // how long parked actions wait for a person
	RunIncompleteGrace      time.Duration           // how long an orphaned run waits for runs.complete before it is marked incomplete
	AllowedOrigins          []string                // Origin host patterns allowed besides same-host
	AllowedHosts            []string                // Host names (or name:port) the TCP listeners answer besides loopback and the listen address
	MaxFrameBytes           int64                   // largest frame accepted
	MaxConnections          int                     // concurrent connections
	AuthTimeout             time.Duration           // an unauthenticated connection is closed after this
	MaxUnauthenticated      int                     // unauthenticated connections before the oldest is closed
	MaxInFlight             int                     // concurrent requests per connection
	MCPBind                 string                  // host:port of the MCP endpoint; "" when disabled
	MCPMaxBodyBytes         int64                   // largest MCP request body
	MCPMaxSessions          int                     // MCP sessions per principal
	MCPMaxCalls             int                     // MCP calls in flight per principal
	HandlerTimeout          time.Duration           // deadline of one request
	ToolTimeout             time.Duration           // default budget of one tool callback
	ShutdownGrace           time.Duration           // how long in-flight requests may finish on shutdown
	SupervisionTimeout      time.Duration           // how long a parked proposal waits for a supervisor
	MaxActions              int                     // actions per proposal
	MaxTools                int                     // tools a connection may register
	MaxPlanCandidates       int                     // candidates of one proposal.plan or proposal.score
	MaxPlanActions          int                     // their actions together
	MCPMaxConnectors        int                     // MCP connectors at once
	MCPMaxTools             int                     // tools one MCP server may list
	MCPMaxResultBytes       int64                   // largest MCP message and tools/call result
	MCPConnectTimeout       time.Duration           // initialize and tools/list of an MCP server
	MaxResolvedAction       int64                   // one action's resolved parameters and effects, in bytes
	MaxSchemaBytes          int                     // one tool JSON Schema's size
	MaxSchemaKeywords       int                     // object members in one tool JSON Schema
	MaxSchemaRefDepth       int                     // $refs in a row one value passes through
	MaxSchemaExpansion      int64                   // subschemas one value is checked against in place
	MaxSchemaEvaluations    int64                   // subschema checks one validation may make
	MaxResolvedTotal        int64                   // a proposal's resolved actions together, in bytes
	MaxConcurrency          int                     // actions of one proposal running at once
	MaxStarting             int                     // proposals in their first 100 ms at once; 0: 16 per CPU
	StreamIdleTimeout       time.Duration           // a silent stream handle fails after this
	MaxStreamHandles        int                     // stream handles per connection
	MaxStreamChunk          int                     // largest stream chunk accepted, in bytes
	MaxCheckpoints          int                     // checkpoints kept
	MaxCheckpointBytes      int64                   // largest checkpoint file
	LogFormat               string                  // json or console
	LogLevel                string                  // debug, info, warn, error
	Pprof                   string                  // loopback host:port serving /debug/pprof/; empty: off
	MaxApprovalsPerProposal int                     // distinct operations one proposal may put to a person
	MaxRunsPerAgent         int                     // runs one agent has in progress on this daemon
	MaxRunsInProgress       int                     // runs in progress on this daemon
	MaxRunIntentBytes       int                     // largest runs.start intent, agent_name, outcome_description
	LeaseDefaultTTL         time.Duration           // lease.acquire/renew without ttl_ms
	LeaseMinTTL             time.Duration           // the shortest ttl_ms accepted
	LeaseMaxTTL             time.Duration           // the longest ttl_ms accepted
	MaxLeaseAgentIDBytes    int                     // the longest agent_id lease.* accept
	MaxGoalConditions       int                     // conditions of one goal condition (goals.evaluate, goals.record)
	MaxGoalTextBytes        int                     // goals.record and turns.record_completed texts
	MaxScopeClaimsBytes     int                     // proposal.submit scope.claims, as JSON
	MaxRunOutcomeBytes      int                     // largest runs.complete outcome
	MaxOpenRunJournals      int                     // run journals open at once (store file)
	MaxStreamBuffered       int64                   // undrained stream bytes of all handles together
	MaxActionIDBytes        int                     // longest proposal or action id
	StrictFields            bool                    // reject proposals with fields the IR does not know
	MaxNotifyBytes          int                     // host.notify and host.set_status params
	MaxContextBytes         int                     // host.request_approval and host.register_agent params
	MaxStateValueBytes      int64                   // one state value as JSON
	EventLogBytes           int64                   // bytes of the in-memory event log
	HostEventRingBytes      int64                   // bytes of the host event ring
	FeedQueueBytes          int64                   // undelivered bytes of one feed per subscriber
	Integrity               engine.IntegrityOptions // the intent gate, the taint ledger, the transaction check, receipts

	Store                    string        // StoreFile or StorePostgres
	JournalSync              string        // when idempotent results are flushed (the file store's journal, the database's commits): file.SyncFull or file.SyncProposal
	PostgresURL              string        // libpq URL of the shared store; log it only through postgres.Redact
	PostgresMaxConns         int           // pool size
	PostgresStatementTimeout time.Duration // deadline of one statement
	ClaimLease               time.Duration // an idempotency claim's lease
	EventsSpoolMaxBytes      int64         // bound of the events spool
	EventsRetention          time.Duration // the durable event log's age bound (store file)
	EventsMaxBytes           int64         // its byte bound
	AuditHeadEvery           int           // events between two signed heads
	AuditHeadInterval        time.Duration // the longest wait for a signed head
	Heartbeat                time.Duration // how often the member row is stamped

	Tracing  tracing.Settings // OpenTelemetry traces; off without an endpoint
	TraceURL string           // the dashboard's link template to a trace, naming {trace_id}; "" for none
	// TraceToolArguments puts each tool call's redacted parameters on its
	// span (otel_capture_tool_arguments).
	TraceToolArguments bool

	ConfigFile      string // the config file that was read, if any
	TokenPath       string // where the auth token is written
	HostTokenPath   string // where the host token is written: beside the auth token
	LockPath        string // the advisory lock of the state root
	PoliciesDir     string // the operator's policy files
	IdempotencyPath string // the idempotency journal
	ApprovalsPath   string // the approval ledger
	MessagesPath    string // delivered messaging.send idempotency keys
	LeasesPath      string // the agents' leases (lease.*)
	RunsDir         string // run traces, one directory per agent
	AgentTokensPath string // hashes of the agents' own tokens
	PeoplePath      string // hashes of the people's host-role tokens
	PosturesPath    string // per-agent postures (agent_permissions.*)
	TrajectoriesDir string // day files of dispatched attempts (store file)
	HarnessPath     string // the harness config (store file)
	CheckpointsDir  string // saved copies of state
	ToolLabelsPath  string // the information-flow gate's tool labels
	IntentPath      string // the operator's intent (intent.json)
	TaintPath       string // the intent gate's taint ledger
	NodeIDPath      string // this state root's member id, generated once
	EventsSpoolPath string // events waiting for the database (store postgres)
	// InterruptedApprovalsPath holds the approval requests pending at the
	// last shutdown, shown as expired at the next start.
	InterruptedApprovalsPath string
	EventsDir                string // the durable event log's segments (store file)
	AuditKeyPath             string // the key that signs the event log's heads
	ShowVersion              bool   // --version was given
}

// DefaultMCPBind is where the MCP endpoint listens unless mcp_bind says
// otherwise: upstream's address.
const DefaultMCPBind = "127.0.0.1:9102"

// Stores (Config.Store).
const (
	StoreFile     = "file"
	StorePostgres = "postgres"
)

// ErrHelp is returned by Load when --help was asked for; the usage has been
// written.
var ErrHelp = pflag.ErrHelp

// UsageError is a bad setting: the daemon exits 2 with its message.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Load resolves the configuration from args (without the program name), the
// CAR_* environment and the user's home directory. Usage goes to out.
func Load(args []string, userHome string, out io.Writer) (*Config, error) {
	fs := pflag.NewFlagSet("car-server", pflag.ContinueOnError)
	fs.SetOutput(out)
	v, err := bind(fs)
	if err != nil {
		return nil, err
	}
	configFile := fs.String("config", "", "config file (default $CAR_HOME/config.yaml when it exists)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { writeUsage(out) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, &UsageError{Msg: fmt.Sprintf("unexpected argument %q; run car-server --help", fs.Arg(0))}
	}

	// The state root decides where the config file is, so it is resolved
	// before the file is read: from the flag, the environment or the default.
	home := v.GetString("home")
	if home == "~/.car" {
		home = filepath.Join(userHome, ".car")
	}
	if !filepath.IsAbs(home) {
		return nil, &UsageError{Msg: fmt.Sprintf("CAR_HOME must be an absolute path, got %q", home)}
	}
	home = filepath.Clean(home)

	cfg := &Config{Home: home, ShowVersion: *version}
	path := *configFile
	if path == "" {
		if p := filepath.Join(home, "config.yaml"); fileExists(p) {
			path = p
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return nil, &UsageError{Msg: fmt.Sprintf("read config file %s: %v", path, err)}
		}
		if err := checkFileKeys(v, path); err != nil {
			return nil, err
		}
		cfg.ConfigFile = path
	}
	r := &reader{v: v, fs: fs, file: path}
	if err := cfg.resolve(r); err != nil {
		return nil, err
	}
	cfg.TokenPath = tokenPath(home, r.origin("home") != originDefault, userHome)
	cfg.HostTokenPath = filepath.Join(filepath.Dir(cfg.TokenPath), "host-token")
	cfg.LockPath = filepath.Join(home, "run", "daemon.lock")
	cfg.PoliciesDir = filepath.Join(home, "policies")
	cfg.IdempotencyPath = filepath.Join(home, "idempotency.jsonl")
	cfg.ApprovalsPath = filepath.Join(home, "approvals.jsonl")
	cfg.InterruptedApprovalsPath = filepath.Join(home, "approvals-interrupted.json")
	cfg.MessagesPath = filepath.Join(home, "messages.jsonl")
	cfg.LeasesPath = filepath.Join(home, "leases.jsonl")
	cfg.RunsDir = filepath.Join(home, "runs")
	cfg.AgentTokensPath = filepath.Join(home, "agent-tokens.json")
	cfg.PeoplePath = filepath.Join(home, "people-tokens.json")
	cfg.PosturesPath = filepath.Join(home, "agent-permissions.json")
	cfg.TrajectoriesDir = filepath.Join(home, "trajectories")
	cfg.HarnessPath = filepath.Join(home, "harness.json")
	cfg.CheckpointsDir = filepath.Join(home, "checkpoints")
	cfg.ToolLabelsPath = filepath.Join(home, "tool-labels.json")
	cfg.IntentPath = filepath.Join(home, engine.IntentFile)
	cfg.TaintPath = filepath.Join(home, "taint.jsonl")
	cfg.NodeIDPath = filepath.Join(home, "node-id")
	cfg.EventsSpoolPath = filepath.Join(home, "events-spool.jsonl")
	cfg.EventsDir = filepath.Join(home, "events")
	cfg.AuditKeyPath = filepath.Join(home, "audit-key")
	return cfg, nil
}

// bind defines a flag for every setting and gives viper each key's default,
// environment variable and flag, so that viper decides which one wins:
// a flag given on the command line, else the environment, else the config
// file, else the default.
func bind(fs *pflag.FlagSet) (*viper.Viper, error) {
	v := viper.New()
	// A variable set to "" is set, as it was before viper read the
	// environment: CAR_SERVER_SOCKET= turns the socket off.
	v.AllowEmptyEnv(true)
	for _, s := range settings {
		switch d := s.defaultValue().(type) {
		case bool:
			fs.Bool(s.flag(), d, s.help)
		case int:
			fs.Int(s.flag(), d, s.help)
		default:
			fs.String(s.flag(), fmt.Sprint(d), s.help)
		}
		v.SetDefault(s.key, s.defaultValue())
		// The names are bound one by one because the list has them: the flag
		// is the key with dashes (BindPFlags would key it by the flag name),
		// and CAR_SERVER_SOCKET is not the prefix plus the key.
		if err := v.BindEnv(s.key, s.env); err != nil {
			return nil, fmt.Errorf("bind %s to %s: %w", s.key, s.env, err)
		}
		if err := v.BindPFlag(s.key, fs.Lookup(s.flag())); err != nil {
			return nil, fmt.Errorf("bind %s to --%s: %w", s.key, s.flag(), err)
		}
	}
	return v, nil
}

// checkFileKeys refuses keys of the config file that no setting reads, so a
// misspelt key is not silently ignored, and the state root, which the file
// cannot move since it is found through it.
func checkFileKeys(v *viper.Viper, path string) error {
	var unknown []string
	for _, k := range v.AllKeys() {
		if _, ok := lookup(k); !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return &UsageError{Msg: fmt.Sprintf("config file %s: unknown key %s; the keys are the flag names with _ for - (see car-server --help)",
			path, strings.Join(unknown, ", "))}
	}
	if v.InConfig("home") {
		return &UsageError{Msg: fmt.Sprintf("config file %s sets home, but the state root cannot come from a file found in it; set CAR_HOME or --home instead", path)}
	}
	return nil
}

// resolve reads every setting with its type and checks it; all faults are
// reported together.
func (c *Config) resolve(r *reader) error {
	c.Bind = r.str("bind")
	c.Port = r.integer("port")
	c.Socket = r.str("socket")
	switch c.Socket {
	case "$CAR_HOME/run/car-server.sock":
		c.Socket = filepath.Join(c.Home, "run", "car-server.sock")
	case "off", "disabled", "none":
		c.Socket = ""
	}
	c.NoAuth = r.boolean("no_auth")
	c.RequireHandshake = r.boolean("require_handshake")
	c.AuthToken = strings.TrimSpace(r.str("auth_token"))
	c.HostToken = strings.TrimSpace(r.str("host_token"))
	c.ApproverRole = r.str("approver_role")
	if c.ApproverRole != rpc.ApproverAny && c.ApproverRole != rpc.ApproverHost {
		r.fail("approver_role", "approver_role must be any or host, got %q", c.ApproverRole)
	}
	c.ApprovalTimeout = r.duration("approval_timeout")
	c.MaxApprovalsPerProposal = r.integer("max_approvals_per_proposal")
	c.Integrity = engine.IntegrityOptions{
		MaxIntentPatterns: r.integer("max_intent_patterns"), MaxIntentTextBytes: r.integer("max_intent_text_bytes"),
		MaxTaintedKeys: r.integer("max_tainted_keys"), MaxAssumptions: r.integer("max_assumptions"), MaxReceiptClaims: r.integer("max_receipt_claims"),
	}
	if mode, err := engine.ParseTransactionCheck(r.str("transaction_check")); err != nil {
		r.fail("transaction_check", "transaction_check must be off, warn or strict, got %q", r.str("transaction_check"))
	} else {
		c.Integrity.TransactionCheck = mode
	}
	for _, k := range []struct {
		name string
		n    int
	}{{"max_intent_patterns", c.Integrity.MaxIntentPatterns}, {"max_intent_text_bytes", c.Integrity.MaxIntentTextBytes}, {"max_tainted_keys", c.Integrity.MaxTaintedKeys}, {"max_assumptions", c.Integrity.MaxAssumptions}, {"max_receipt_claims", c.Integrity.MaxReceiptClaims}} {
		if k.n < 1 && !r.bad[k.name] {
			r.fail(k.name, "%s must be at least 1", k.name)
		}
	}
	c.RunIncompleteGrace = r.duration("run_incomplete_grace")
	c.MaxRunsPerAgent = r.integer("max_runs_per_agent")
	c.MaxRunsInProgress = r.integer("max_runs_in_progress")
	c.MaxRunIntentBytes = r.integer("max_run_intent_bytes")
	c.MaxRunOutcomeBytes = r.integer("max_run_outcome_bytes")
	c.LeaseDefaultTTL = r.duration("lease_default_ttl")
	c.LeaseMinTTL = r.duration("lease_min_ttl")
	c.LeaseMaxTTL = r.duration("lease_max_ttl")
	c.MaxLeaseAgentIDBytes = r.integer("max_lease_agent_id_bytes")
	c.MaxGoalConditions = r.integer("max_goal_conditions")
	c.MaxGoalTextBytes = r.integer("max_goal_text_bytes")
	c.MaxScopeClaimsBytes = r.integer("max_scope_claims_bytes")
	for _, k := range []struct {
		name string
		d    time.Duration
	}{{"lease_default_ttl", c.LeaseDefaultTTL}, {"lease_min_ttl", c.LeaseMinTTL}, {"lease_max_ttl", c.LeaseMaxTTL}} {
		if k.d < time.Millisecond && !r.bad[k.name] {
			r.fail(k.name, "%s must be at least 1ms, got %s", k.name, k.d)
		}
	}
	if c.LeaseMinTTL > c.LeaseMaxTTL && !r.bad["lease_min_ttl"] && !r.bad["lease_max_ttl"] {
		r.fail("lease_min_ttl", "lease_min_ttl (%s) must not exceed lease_max_ttl (%s)", c.LeaseMinTTL, c.LeaseMaxTTL)
	}
	c.MaxOpenRunJournals = r.integer("max_open_run_journals")
	c.AllowedOrigins = r.list("allowed_origins")
	c.AllowedHosts = r.list("allowed_hosts")
	c.MaxFrameBytes = int64(r.integer("max_frame_bytes"))
	c.MaxConnections = r.integer("max_connections")
	c.AuthTimeout = r.duration("auth_timeout")
	c.MaxUnauthenticated = r.integer("max_unauthenticated")
	c.MaxInFlight = r.integer("max_in_flight")
	c.MCPBind = strings.TrimSpace(r.str("mcp_bind"))
	switch c.MCPBind {
	case "disabled", "off", "none":
		c.MCPBind = ""
	default:
		if _, port, err := net.SplitHostPort(c.MCPBind); err != nil || port == "" {
			r.fail("mcp_bind", "mcp_bind must be host:port (%s) or disabled, got %q", DefaultMCPBind, c.MCPBind)
		}
	}
	c.MCPMaxBodyBytes = int64(r.integer("mcp_max_body_bytes"))
	c.MCPMaxSessions = r.integer("mcp_max_sessions_per_principal")
	c.MCPMaxCalls = r.integer("mcp_max_calls_per_principal")
	c.HandlerTimeout = r.duration("handler_timeout")
	c.ToolTimeout = r.duration("tool_timeout")
	c.ShutdownGrace = r.duration("shutdown_grace")
	c.SupervisionTimeout = r.duration("supervision_timeout")
	c.MaxActions = r.integer("max_actions")
	c.MaxTools = r.integer("max_tools")
	c.MaxPlanCandidates = r.integer("max_plan_candidates")
	c.MaxPlanActions = r.integer("max_plan_actions")
	c.MCPMaxConnectors = r.integer("mcp_max_connectors")
	c.MCPMaxTools = r.integer("mcp_max_tools")
	c.MCPMaxResultBytes = int64(r.integer("mcp_max_result_bytes"))
	c.MCPConnectTimeout = r.duration("mcp_connect_timeout")
	c.MaxResolvedAction = int64(r.integer("max_resolved_action_bytes"))
	c.MaxResolvedTotal = int64(r.integer("max_resolved_proposal_bytes"))
	c.MaxSchemaBytes = r.integer("max_schema_bytes")
	c.MaxSchemaKeywords = r.integer("max_schema_keywords")
	c.MaxSchemaRefDepth = r.integer("max_schema_ref_depth")
	c.MaxSchemaExpansion = int64(r.integer("max_schema_expansion"))
	c.MaxSchemaEvaluations = int64(r.integer("max_schema_evaluations"))
	c.MaxConcurrency = r.integer("max_concurrency")
	c.MaxStarting = r.integer("max_starting_proposals")
	c.StreamIdleTimeout = r.duration("stream_idle_timeout")
	c.MaxStreamHandles = r.integer("max_stream_handles")
	c.MaxStreamChunk = r.integer("max_stream_chunk_bytes")
	c.MaxStreamBuffered = int64(r.integer("max_stream_buffered_bytes"))
	c.MaxActionIDBytes = r.integer("max_action_id_bytes")
	c.StrictFields = r.boolean("strict_fields")
	c.MaxNotifyBytes = r.integer("max_notify_bytes")
	c.MaxContextBytes = r.integer("max_context_bytes")
	c.MaxStateValueBytes = int64(r.integer("max_state_value_bytes"))
	c.EventLogBytes = int64(r.integer("event_log_bytes"))
	c.HostEventRingBytes = int64(r.integer("host_event_ring_bytes"))
	c.FeedQueueBytes = int64(r.integer("feed_queue_bytes"))
	c.MaxCheckpoints = r.integer("max_checkpoints")
	c.TrajectoryRetentionDays = r.integer("trajectory_retention_days")
	c.MaxCheckpointBytes = int64(r.integer("max_checkpoint_bytes"))
	c.LogFormat = r.str("log_format")
	c.LogLevel = r.str("log_level")
	c.Store = strings.TrimSpace(r.str("store"))
	c.JournalSync = strings.TrimSpace(r.str("journal_sync"))
	c.PostgresURL = r.secret("postgres_url")
	c.PostgresMaxConns = r.integer("postgres_max_conns")
	c.PostgresStatementTimeout = r.duration("postgres_statement_timeout")
	c.ClaimLease = r.duration("claim_lease")
	c.EventsSpoolMaxBytes = int64(r.integer("events_spool_max_bytes"))
	c.Heartbeat = r.duration("heartbeat")
	c.EventsRetention = r.duration("events_retention")
	c.EventsMaxBytes = int64(r.integer("events_max_bytes"))
	c.AuditHeadEvery = r.integer("audit_head_every")
	c.AuditHeadInterval = r.duration("audit_head_interval")
	if c.EventsMaxBytes > 0 && c.EventsMaxBytes < file.MinEventsMaxBytes && !r.bad["events_max_bytes"] {
		r.fail("events_max_bytes", "events_max_bytes must be at least %d (16 segments of 16 KiB), got %d", file.MinEventsMaxBytes, c.EventsMaxBytes)
	}
	switch c.Store {
	case StoreFile:
	case StorePostgres:
		if c.PostgresURL == "" && !r.bad["postgres_url"] {
			r.fail("store", "store is postgres but postgres_url is empty: set CAR_POSTGRES_URL (or --postgres-url) to a libpq URL such as postgres://car@db.example:5432/car, or use store file")
		}
	default:
		r.fail("store", "store must be file or postgres, got %q", c.Store)
	}
	switch file.Sync(c.JournalSync) {
	case file.SyncFull:
	case file.SyncProposal:
	default:
		r.fail("journal_sync", "journal_sync must be full (every idempotent result flushed to disk before the next step and before any reply) or proposal (a proposal's results flushed once, before its reply), got %q", c.JournalSync)
	}
	if c.PostgresMaxConns > math.MaxInt32 {
		r.fail("postgres_max_conns", "postgres_max_conns must be at most %d, got %d", math.MaxInt32, c.PostgresMaxConns)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		r.fail("log_format", "log_format must be json or console, got %q", c.LogFormat)
	}
	c.Pprof = strings.TrimSpace(r.str("pprof"))
	if c.Pprof != "" {
		if err := loopbackHostPort(c.Pprof); err != nil {
			r.fail("pprof", "pprof %v", err)
		}
	}
	c.Tracing = tracing.Settings{
		Endpoint:           strings.TrimSpace(r.str("otel_exporter_otlp_endpoint")),
		TracesEndpoint:     strings.TrimSpace(r.str("otel_exporter_otlp_traces_endpoint")),
		Protocol:           strings.TrimSpace(r.str("otel_exporter_otlp_protocol")),
		Headers:            r.secret("otel_exporter_otlp_headers"),
		ServiceName:        strings.TrimSpace(r.str("otel_service_name")),
		ResourceAttributes: r.str("otel_resource_attributes"),
		Sampler:            strings.TrimSpace(r.str("otel_traces_sampler")),
		SamplerArg:         strings.TrimSpace(r.str("otel_traces_sampler_arg")),
		QueueSpans:         r.integer("otel_trace_queue_spans"),
	}
	var bad *tracing.SettingError
	if err := c.Tracing.Check(); errors.As(err, &bad) {
		r.fail(bad.Key, "%s", bad.Msg)
	}
	c.TraceToolArguments = r.boolean("otel_capture_tool_arguments")
	c.TraceURL = strings.TrimSpace(r.str("otel_trace_url"))
	if err := tracing.CheckTraceURL(c.TraceURL); errors.As(err, &bad) {
		r.fail(bad.Key, "%s", bad.Msg)
	}
	if c.Port > 65535 {
		r.fail("port", "port must be at most 65535, got %d", c.Port)
	}
	for _, k := range []struct {
		name string
		n    int64
	}{{"max_frame_bytes", c.MaxFrameBytes}, {"max_connections", int64(c.MaxConnections)}, {"max_unauthenticated", int64(c.MaxUnauthenticated)}, {"max_in_flight", int64(c.MaxInFlight)}, {"max_actions", int64(c.MaxActions)}, {"max_approvals_per_proposal", int64(c.MaxApprovalsPerProposal)}, {"max_tools", int64(c.MaxTools)}, {"max_plan_candidates", int64(c.MaxPlanCandidates)}, {"max_plan_actions", int64(c.MaxPlanActions)}, {"max_concurrency", int64(c.MaxConcurrency)}, {"max_resolved_action_bytes", c.MaxResolvedAction}, {"max_resolved_proposal_bytes", c.MaxResolvedTotal}, {"max_stream_handles", int64(c.MaxStreamHandles)}, {"max_stream_chunk_bytes", int64(c.MaxStreamChunk)}, {"max_checkpoints", int64(c.MaxCheckpoints)}, {"trajectory_retention_days", int64(c.TrajectoryRetentionDays)}, {"max_checkpoint_bytes", c.MaxCheckpointBytes}, {"postgres_max_conns", int64(c.PostgresMaxConns)}, {"events_spool_max_bytes", c.EventsSpoolMaxBytes}, {"max_schema_bytes", int64(c.MaxSchemaBytes)}, {"max_schema_keywords", int64(c.MaxSchemaKeywords)}, {"max_schema_ref_depth", int64(c.MaxSchemaRefDepth)}, {"max_schema_expansion", c.MaxSchemaExpansion}, {"max_schema_evaluations", c.MaxSchemaEvaluations}, {"max_stream_buffered_bytes", c.MaxStreamBuffered}, {"max_action_id_bytes", int64(c.MaxActionIDBytes)}, {"max_notify_bytes", int64(c.MaxNotifyBytes)}, {"max_context_bytes", int64(c.MaxContextBytes)}, {"max_state_value_bytes", c.MaxStateValueBytes}, {"event_log_bytes", c.EventLogBytes}, {"host_event_ring_bytes", c.HostEventRingBytes}, {"feed_queue_bytes", c.FeedQueueBytes}, {"mcp_max_body_bytes", c.MCPMaxBodyBytes}, {"mcp_max_sessions_per_principal", int64(c.MCPMaxSessions)}, {"mcp_max_calls_per_principal", int64(c.MCPMaxCalls)}, {"mcp_max_connectors", int64(c.MCPMaxConnectors)}, {"mcp_max_tools", int64(c.MCPMaxTools)}, {"mcp_max_result_bytes", c.MCPMaxResultBytes}, {"events_max_bytes", c.EventsMaxBytes}, {"audit_head_every", int64(c.AuditHeadEvery)}, {"max_lease_agent_id_bytes", int64(c.MaxLeaseAgentIDBytes)}, {"max_goal_conditions", int64(c.MaxGoalConditions)}, {"max_goal_text_bytes", int64(c.MaxGoalTextBytes)}, {"max_scope_claims_bytes", int64(c.MaxScopeClaimsBytes)}} {
		if k.n == 0 && !r.bad[k.name] {
			r.fail(k.name, "%s must be at least 1", k.name)
		}
	}
	if len(r.errs) > 0 {
		return &UsageError{Msg: "invalid configuration: " + strings.Join(r.errs, "; ")}
	}
	return nil
}

// tokenPath follows the upstream rules: under the state root when CAR_HOME
// was given, else the per-user runtime or config directory.
func tokenPath(home string, homeGiven bool, userHome string) string {
	const dir, file = "ai.parslee.car", "auth-token"
	if homeGiven {
		return filepath.Join(home, dir, file)
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(userHome, "Library", "Application Support", dir, file)
	}
	if xdg, ok := os.LookupEnv("XDG_RUNTIME_DIR"); ok && filepath.IsAbs(xdg) {
		return filepath.Join(xdg, dir, file)
	}
	return filepath.Join(userHome, ".config", dir, file)
}

// loopbackHostPort checks a host:port that only this machine may reach.
func loopbackHostPort(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port on loopback (127.0.0.1:6060), got %q: %w", addr, err)
	}
	if !netaddr.IsLoopbackHost(host) {
		return fmt.Errorf("must be on loopback (127.0.0.1, ::1 or localhost), got %q: the profiler shows the daemon's memory", addr)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
