package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// isolate clears every variable Load reads and sets those given, so that the
// environment of whoever runs the tests cannot decide their outcome.
func isolate(t *testing.T, set map[string]string) {
	t.Helper()
	for _, name := range append(envNames(), "XDG_RUNTIME_DIR") {
		t.Setenv(name, "") // restores the old value when the test ends
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range set {
		t.Setenv(k, v)
	}
}

func envNames() []string {
	var names []string
	for _, s := range settings {
		names = append(names, s.env)
	}
	return names
}

// writeConfig writes body as $home/config.yaml.
func writeConfig(t *testing.T, home, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDefaults(t *testing.T) {
	isolate(t, nil)
	cfg, err := Load(nil, "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Home != "/home/u/.car" || cfg.Port != 9100 || cfg.Bind != "127.0.0.1" ||
		cfg.Socket != "/home/u/.car/run/car-server.sock" || cfg.HandlerTimeout != 30*time.Minute ||
		cfg.ToolTimeout != 300*time.Second || cfg.ShutdownGrace != 10*time.Second ||
		cfg.SupervisionTimeout != 30*time.Second || cfg.MaxFrameBytes != 16<<20 || cfg.NoAuth ||
		cfg.MaxConnections != 16384 || cfg.MaxInFlight != 64 || cfg.MaxActions != 10000 ||
		cfg.MaxConcurrency != 16 || cfg.MaxStarting != 0 || cfg.LogFormat != "json" || cfg.LogLevel != "info" ||
		cfg.AuthToken != "" || cfg.AllowedOrigins != nil || cfg.ConfigFile != "" ||
		cfg.LockPath != "/home/u/.car/run/daemon.lock" || cfg.Pprof != "" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

// TestPrecedence gives each layer a different value and checks which one
// wins: defaults < file < environment < flags given on the command line.
func TestPrecedence(t *testing.T) {
	type got struct {
		Port    int
		NoAuth  bool
		Handler time.Duration
		Origins string
		Socket  string
	}
	const file = "port: 7000\nno_auth: true\nhandler_timeout: 45s\nallowed_origins: [a.example, b.example]\nsocket: /f.sock\n"
	cases := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want got
	}{
		{"default only", "", nil, nil,
			got{9100, false, 30 * time.Minute, "", "$HOME/run/car-server.sock"}},
		{"file over default", file, nil, nil,
			got{7000, true, 45 * time.Second, "a.example,b.example", "/f.sock"}},
		{"env over file", file, map[string]string{"CAR_PORT": "7100", "CAR_NO_AUTH": "0", "CAR_HANDLER_TIMEOUT": "90", "CAR_ALLOWED_ORIGINS": "c.example", "CAR_SERVER_SOCKET": "/e.sock"}, nil,
			got{7100, false, 90 * time.Second, "c.example", "/e.sock"}},
		{"env over default", "", map[string]string{"CAR_PORT": "7100", "CAR_NO_AUTH": "true"}, nil,
			got{7100, true, 30 * time.Minute, "", "$HOME/run/car-server.sock"}},
		{"an empty variable is set", file, map[string]string{"CAR_SERVER_SOCKET": "", "CAR_ALLOWED_ORIGINS": ""}, nil,
			got{7000, true, 45 * time.Second, "", ""}},
		{"flag over env", file, map[string]string{"CAR_PORT": "7100", "CAR_NO_AUTH": "1", "CAR_HANDLER_TIMEOUT": "90"},
			[]string{"--port", "7200", "--no-auth=false", "--handler-timeout", "2m", "--allowed-origins", "d.example", "--socket", "off"},
			got{7200, false, 2 * time.Minute, "d.example", ""}},
		{"flag over file", file, nil, []string{"--port=7200"},
			got{7200, true, 45 * time.Second, "a.example,b.example", "/f.sock"}},
		{"unset flags do not override env", "", map[string]string{"CAR_PORT": "7100", "CAR_NO_AUTH": "1"}, []string{"--bind", "127.0.0.2"},
			got{7100, true, 30 * time.Minute, "", "$HOME/run/car-server.sock"}},
		{"unset flags do not override file", file, nil, []string{"--bind", "127.0.0.2"},
			got{7000, true, 45 * time.Second, "a.example,b.example", "/f.sock"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"CAR_HOME": home}
			for k, v := range tc.env {
				env[k] = v
			}
			isolate(t, env)
			if tc.file != "" {
				writeConfig(t, home, tc.file)
			}
			cfg, err := Load(tc.args, "/home/u", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Socket = strings.Replace(want.Socket, "$HOME", home, 1)
			g := got{cfg.Port, cfg.NoAuth, cfg.HandlerTimeout, strings.Join(cfg.AllowedOrigins, ","), cfg.Socket}
			if g != want {
				t.Fatalf("got %+v, want %+v", g, want)
			}
			if wantFile := filepath.Join(home, "config.yaml"); (tc.file != "") != (cfg.ConfigFile == wantFile) {
				t.Fatalf("config file %q", cfg.ConfigFile)
			}
		})
	}
}

// TestEveryNameIsBound sets each setting in turn through its environment
// variable, its flag and its file key, the names --help prints from the same
// list, and reads it back from the Config.
func TestEveryNameIsBound(t *testing.T) {
	cases := map[string]struct {
		in, want string
		get      func(*Config) any
		env      map[string]string // what the setting needs besides
	}{
		"home":                               {"/seven", "/seven", func(c *Config) any { return c.Home }, nil},
		"bind":                               {"127.0.0.7", "127.0.0.7", func(c *Config) any { return c.Bind }, nil},
		"port":                               {"7", "7", func(c *Config) any { return c.Port }, nil},
		"socket":                             {"/seven.sock", "/seven.sock", func(c *Config) any { return c.Socket }, nil},
		"no_auth":                            {"true", "true", func(c *Config) any { return c.NoAuth }, nil},
		"auth_token":                         {"seven", "seven", func(c *Config) any { return c.AuthToken }, nil},
		"host_token":                         {"eight", "eight", func(c *Config) any { return c.HostToken }, nil},
		"approver_role":                      {"host", "host", func(c *Config) any { return c.ApproverRole }, nil},
		"approval_timeout":                   {"7", "7s", func(c *Config) any { return c.ApprovalTimeout }, nil},
		"max_approvals_per_proposal":         {"7", "7", func(c *Config) any { return c.MaxApprovalsPerProposal }, nil},
		"allowed_origins":                    {"seven.example", "[seven.example]", func(c *Config) any { return c.AllowedOrigins }, nil},
		"allowed_hosts":                      {"car.example:7", "[car.example:7]", func(c *Config) any { return c.AllowedHosts }, nil},
		"max_frame_bytes":                    {"7", "7", func(c *Config) any { return c.MaxFrameBytes }, nil},
		"max_connections":                    {"7", "7", func(c *Config) any { return c.MaxConnections }, nil},
		"max_in_flight":                      {"7", "7", func(c *Config) any { return c.MaxInFlight }, nil},
		"auth_timeout":                       {"7", "7s", func(c *Config) any { return c.AuthTimeout }, nil},
		"max_unauthenticated":                {"7", "7", func(c *Config) any { return c.MaxUnauthenticated }, nil},
		"handler_timeout":                    {"7", "7s", func(c *Config) any { return c.HandlerTimeout }, nil},
		"tool_timeout":                       {"7", "7s", func(c *Config) any { return c.ToolTimeout }, nil},
		"shutdown_grace":                     {"7", "7s", func(c *Config) any { return c.ShutdownGrace }, nil},
		"max_actions":                        {"7", "7", func(c *Config) any { return c.MaxActions }, nil},
		"max_tools":                          {"9", "9", func(c *Config) any { return c.MaxTools }, nil},
		"max_plan_candidates":                {"5", "5", func(c *Config) any { return c.MaxPlanCandidates }, nil},
		"max_plan_actions":                   {"50", "50", func(c *Config) any { return c.MaxPlanActions }, nil},
		"supervision_timeout":                {"7", "7s", func(c *Config) any { return c.SupervisionTimeout }, nil},
		"max_concurrency":                    {"7", "7", func(c *Config) any { return c.MaxConcurrency }, nil},
		"max_resolved_action_bytes":          {"7", "7", func(c *Config) any { return c.MaxResolvedAction }, nil},
		"max_resolved_proposal_bytes":        {"7", "7", func(c *Config) any { return c.MaxResolvedTotal }, nil},
		"max_schema_bytes":                   {"7", "7", func(c *Config) any { return c.MaxSchemaBytes }, nil},
		"max_schema_keywords":                {"7", "7", func(c *Config) any { return c.MaxSchemaKeywords }, nil},
		"max_schema_ref_depth":               {"7", "7", func(c *Config) any { return c.MaxSchemaRefDepth }, nil},
		"max_schema_expansion":               {"7", "7", func(c *Config) any { return c.MaxSchemaExpansion }, nil},
		"max_schema_evaluations":             {"7", "7", func(c *Config) any { return c.MaxSchemaEvaluations }, nil},
		"log_format":                         {"console", "console", func(c *Config) any { return c.LogFormat }, nil},
		"log_level":                          {"debug", "debug", func(c *Config) any { return c.LogLevel }, nil},
		"stream_idle_timeout":                {"7", "7s", func(c *Config) any { return c.StreamIdleTimeout }, nil},
		"max_stream_handles":                 {"7", "7", func(c *Config) any { return c.MaxStreamHandles }, nil},
		"max_stream_chunk_bytes":             {"7", "7", func(c *Config) any { return c.MaxStreamChunk }, nil},
		"run_incomplete_grace":               {"7", "7s", func(c *Config) any { return c.RunIncompleteGrace }, nil},
		"max_runs_per_agent":                 {"7", "7", func(c *Config) any { return c.MaxRunsPerAgent }, nil},
		"max_runs_in_progress":               {"7", "7", func(c *Config) any { return c.MaxRunsInProgress }, nil},
		"max_run_intent_bytes":               {"7", "7", func(c *Config) any { return c.MaxRunIntentBytes }, nil},
		"max_run_outcome_bytes":              {"7", "7", func(c *Config) any { return c.MaxRunOutcomeBytes }, nil},
		"max_open_run_journals":              {"7", "7", func(c *Config) any { return c.MaxOpenRunJournals }, nil},
		"max_checkpoints":                    {"7", "7", func(c *Config) any { return c.MaxCheckpoints }, nil},
		"max_stream_buffered_bytes":          {"7", "7", func(c *Config) any { return c.MaxStreamBuffered }, nil},
		"max_action_id_bytes":                {"7", "7", func(c *Config) any { return c.MaxActionIDBytes }, nil},
		"strict_fields":                      {"true", "true", func(c *Config) any { return c.StrictFields }, nil},
		"max_notify_bytes":                   {"7", "7", func(c *Config) any { return c.MaxNotifyBytes }, nil},
		"max_context_bytes":                  {"7", "7", func(c *Config) any { return c.MaxContextBytes }, nil},
		"max_state_value_bytes":              {"7", "7", func(c *Config) any { return c.MaxStateValueBytes }, nil},
		"event_log_bytes":                    {"7", "7", func(c *Config) any { return c.EventLogBytes }, nil},
		"host_event_ring_bytes":              {"7", "7", func(c *Config) any { return c.HostEventRingBytes }, nil},
		"feed_queue_bytes":                   {"7", "7", func(c *Config) any { return c.FeedQueueBytes }, nil},
		"max_checkpoint_bytes":               {"7", "7", func(c *Config) any { return c.MaxCheckpointBytes }, nil},
		"store":                              {"postgres", "postgres", func(c *Config) any { return c.Store }, map[string]string{"CAR_POSTGRES_URL": "postgres://car@db.example/car"}},
		"journal_sync":                       {"proposal", "proposal", func(c *Config) any { return c.JournalSync }, nil},
		"postgres_url":                       {"postgres://car@db.example/car", "postgres://car@db.example/car", func(c *Config) any { return c.PostgresURL }, nil},
		"postgres_max_conns":                 {"7", "7", func(c *Config) any { return c.PostgresMaxConns }, nil},
		"postgres_statement_timeout":         {"7", "7s", func(c *Config) any { return c.PostgresStatementTimeout }, nil},
		"claim_lease":                        {"7", "7s", func(c *Config) any { return c.ClaimLease }, nil},
		"events_spool_max_bytes":             {"7", "7", func(c *Config) any { return c.EventsSpoolMaxBytes }, nil},
		"heartbeat":                          {"7", "7s", func(c *Config) any { return c.Heartbeat }, nil},
		"max_starting_proposals":             {"7", "7", func(c *Config) any { return c.MaxStarting }, nil},
		"mcp_max_connectors":                 {"7", "7", func(c *Config) any { return c.MCPMaxConnectors }, nil},
		"mcp_max_tools":                      {"7", "7", func(c *Config) any { return c.MCPMaxTools }, nil},
		"mcp_max_result_bytes":               {"7", "7", func(c *Config) any { return c.MCPMaxResultBytes }, nil},
		"mcp_connect_timeout":                {"7", "7s", func(c *Config) any { return c.MCPConnectTimeout }, nil},
		"pprof":                              {"127.0.0.1:7", "127.0.0.1:7", func(c *Config) any { return c.Pprof }, nil},
		"mcp_bind":                           {"127.0.0.1:7", "127.0.0.1:7", func(c *Config) any { return c.MCPBind }, nil},
		"mcp_max_body_bytes":                 {"7", "7", func(c *Config) any { return c.MCPMaxBodyBytes }, nil},
		"mcp_max_sessions_per_principal":     {"7", "7", func(c *Config) any { return c.MCPMaxSessions }, nil},
		"mcp_max_calls_per_principal":        {"7", "7", func(c *Config) any { return c.MCPMaxCalls }, nil},
		"events_retention":                   {"7", "7s", func(c *Config) any { return c.EventsRetention }, nil},
		"events_max_bytes":                   {"262144", "262144", func(c *Config) any { return c.EventsMaxBytes }, nil},
		"audit_head_every":                   {"7", "7", func(c *Config) any { return c.AuditHeadEvery }, nil},
		"audit_head_interval":                {"7", "7s", func(c *Config) any { return c.AuditHeadInterval }, nil},
		"otel_exporter_otlp_endpoint":        {"http://127.0.0.1:7", "http://127.0.0.1:7", func(c *Config) any { return c.Tracing.Endpoint }, nil},
		"otel_exporter_otlp_traces_endpoint": {"http://127.0.0.1:7/t", "http://127.0.0.1:7/t", func(c *Config) any { return c.Tracing.TracesEndpoint }, nil},
		"otel_exporter_otlp_protocol":        {"grpc", "grpc", func(c *Config) any { return c.Tracing.Protocol }, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:7"}},
		"otel_exporter_otlp_headers":         {"k=seven", "k=seven", func(c *Config) any { return c.Tracing.Headers }, nil},
		"otel_service_name":                  {"seven", "seven", func(c *Config) any { return c.Tracing.ServiceName }, nil},
		"otel_resource_attributes":           {"a=7", "a=7", func(c *Config) any { return c.Tracing.ResourceAttributes }, nil},
		"otel_traces_sampler":                {"traceidratio", "traceidratio", func(c *Config) any { return c.Tracing.Sampler }, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:7"}},
		"otel_traces_sampler_arg":            {"0.7", "0.7", func(c *Config) any { return c.Tracing.SamplerArg }, nil},
		"otel_trace_queue_spans":             {"7", "7", func(c *Config) any { return c.Tracing.QueueSpans }, nil},
		"otel_capture_tool_arguments":        {"true", "true", func(c *Config) any { return c.TraceToolArguments }, nil},
		"otel_trace_url":                     {"http://127.0.0.1:7/t/{trace_id}", "http://127.0.0.1:7/t/{trace_id}", func(c *Config) any { return c.TraceURL }, nil},
		"trajectory_retention_days":          {"7", "7", func(c *Config) any { return c.TrajectoryRetentionDays }, nil},
		"require_handshake":                  {"false", "false", func(c *Config) any { return c.RequireHandshake }, nil},
		"lease_default_ttl":                  {"7", "7s", func(c *Config) any { return c.LeaseDefaultTTL }, nil},
		"lease_min_ttl":                      {"7", "7s", func(c *Config) any { return c.LeaseMinTTL }, nil},
		"lease_max_ttl":                      {"7", "7s", func(c *Config) any { return c.LeaseMaxTTL }, nil},
		"max_lease_agent_id_bytes":           {"7", "7", func(c *Config) any { return c.MaxLeaseAgentIDBytes }, nil},
		"max_goal_conditions":                {"7", "7", func(c *Config) any { return c.MaxGoalConditions }, nil},
		"max_goal_text_bytes":                {"7", "7", func(c *Config) any { return c.MaxGoalTextBytes }, nil},
		"max_scope_claims_bytes":             {"7", "7", func(c *Config) any { return c.MaxScopeClaimsBytes }, nil},
		"transaction_check":                  {"strict", "strict", func(c *Config) any { return c.Integrity.TransactionCheck }, nil},
		"max_intent_patterns":                {"7", "7", func(c *Config) any { return c.Integrity.MaxIntentPatterns }, nil},
		"max_intent_text_bytes":              {"7", "7", func(c *Config) any { return c.Integrity.MaxIntentTextBytes }, nil},
		"max_tainted_keys":                   {"7", "7", func(c *Config) any { return c.Integrity.MaxTaintedKeys }, nil},
		"max_assumptions":                    {"7", "7", func(c *Config) any { return c.Integrity.MaxAssumptions }, nil},
		"max_receipt_claims":                 {"7", "7", func(c *Config) any { return c.Integrity.MaxReceiptClaims }, nil},
	}
	if len(cases) != len(settings) {
		t.Fatalf("%d cases for %d settings", len(cases), len(settings))
	}
	for _, s := range settings {
		tc, ok := cases[s.key]
		if !ok {
			t.Fatalf("no case for %s", s.key)
		}
		for _, layer := range []string{"env", "flag", "file"} {
			if layer == "file" && s.key == "home" {
				continue // the state root cannot come from the file; TestBadSettings
			}
			t.Run(s.key+" by "+layer, func(t *testing.T) {
				isolate(t, tc.env)
				var args []string
				switch layer {
				case "env":
					t.Setenv(s.env, tc.in)
				case "flag":
					args = []string{"--" + s.flag() + "=" + tc.in}
				case "file":
					path := filepath.Join(t.TempDir(), "c.yaml")
					if err := os.WriteFile(path, []byte(s.key+": "+tc.in+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					args = []string{"--config", path}
				}
				cfg, err := Load(args, "/home/u", io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(tc.get(cfg)); got != tc.want {
					t.Fatalf("got %s, want %s", got, tc.want)
				}
			})
		}
	}
}

func TestBadSettings(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		file     string
		contains string
	}{
		{"relative home", nil, map[string]string{"CAR_HOME": "rel"}, "", `CAR_HOME must be an absolute path, got "rel"`},
		{"empty home", nil, map[string]string{"CAR_HOME": ""}, "", `CAR_HOME must be an absolute path, got ""`},
		{"relative home flag", []string{"--home", "rel"}, nil, "", `CAR_HOME must be an absolute path, got "rel"`},
		{"int flag", []string{"--port", "x"}, nil, "", `invalid argument "x" for "--port" flag`},
		{"negative int flag", []string{"--port=-1"}, nil, "", `port must be a non-negative integer, got "-1" (from --port)`},
		{"int env", nil, map[string]string{"CAR_PORT": "x"}, "", `port must be a non-negative integer, got "x" (from CAR_PORT)`},
		{"int file", nil, nil, "max_in_flight: 2.5\n", `max_in_flight must be a non-negative integer, got "2.5" (from config file `},
		{"list for an int in file", nil, nil, "port: [1, 2]\n", `port must be a single value, got [1 2] (from config file `},
		{"port range", nil, map[string]string{"CAR_PORT": "70000"}, "", `port must be at most 65535, got 70000 (from CAR_PORT)`},
		{"bool env", nil, map[string]string{"CAR_NO_AUTH": "perhaps"}, "", `no_auth must be true or false (or 1/0), got "perhaps" (from CAR_NO_AUTH)`},
		{"bool file", nil, nil, "no_auth: perhaps\n", `no_auth must be true or false (or 1/0), got "perhaps" (from config file `},
		{"bool flag", []string{"--no-auth=perhaps"}, nil, "", `invalid argument "perhaps" for "--no-auth" flag`},
		{"duration env", nil, map[string]string{"CAR_TOOL_TIMEOUT": "-3"}, "", `tool_timeout: must be positive, got "-3" (from CAR_TOOL_TIMEOUT)`},
		{"duration flag", []string{"--handler-timeout", "soon"}, nil, "", `handler_timeout: want seconds or a duration like 30s or 5m, got "soon" (from --handler-timeout)`},
		{"duration file", nil, nil, "shutdown_grace: soon\n", `shutdown_grace: want seconds or a duration like 30s or 5m, got "soon" (from config file `},
		{"flag fault over a good env", []string{"--port=-1"}, map[string]string{"CAR_PORT": "7100"}, "", `port must be a non-negative integer, got "-1" (from --port)`},
		{"env fault over a good file", nil, map[string]string{"CAR_PORT": "x"}, "port: 7000\n", `(from CAR_PORT)`},
		{"zero", []string{"--max-in-flight", "0"}, nil, "", "max_in_flight must be at least 1 (from --max-in-flight)"},
		{"log format", []string{"--log-format", "xml"}, nil, "", `log_format must be json or console, got "xml" (from --log-format)`},
		{"approver role", nil, map[string]string{"CAR_APPROVER_ROLE": "admin"}, "", `approver_role must be any or host, got "admin" (from CAR_APPROVER_ROLE)`},
		{"pprof beyond loopback", []string{"--pprof", "0.0.0.0:6060"}, nil, "", `pprof must be on loopback (127.0.0.1, ::1 or localhost), got "0.0.0.0:6060"`},
		{"pprof without a port", nil, map[string]string{"CAR_PPROF": "localhost"}, "", `pprof must be host:port on loopback (127.0.0.1:6060), got "localhost"`},
		{"mcp bind without a port", []string{"--mcp-bind", "127.0.0.1"}, nil, "", `mcp_bind must be host:port (127.0.0.1:9102) or disabled, got "127.0.0.1" (from --mcp-bind)`},
		{"mcp sessions zero", nil, map[string]string{"CAR_MCP_MAX_SESSIONS_PER_PRINCIPAL": "0"}, "", "mcp_max_sessions_per_principal must be at least 1"},
		{"trace protocol", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "", `OTEL_EXPORTER_OTLP_PROTOCOL http/json is not supported: use http/protobuf or grpc (from OTEL_EXPORTER_OTLP_PROTOCOL)`},
		{"trace endpoint", []string{"--otel-exporter-otlp-endpoint", "127.0.0.1:4318"}, nil, "", `OTEL_EXPORTER_OTLP_ENDPOINT is "127.0.0.1:4318": give a URL such as http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc) (from --otel-exporter-otlp-endpoint)`},
		{"trace sampler", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER": "sometimes"}, "", `OTEL_TRACES_SAMPLER is "sometimes": use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (from OTEL_TRACES_SAMPLER)`},
		{"trace sampler ratio", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER_ARG": "2"}, "", `OTEL_TRACES_SAMPLER_ARG is "2": give a ratio from 0 to 1 (from OTEL_TRACES_SAMPLER_ARG)`},
		{"trace headers", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "", `OTEL_EXPORTER_OTLP_HEADERS has an item that is not key=value (not shown: it may hold a secret): give key=value pairs separated by commas, URL-encoded (from OTEL_EXPORTER_OTLP_HEADERS)`},
		{"trace link", []string{"--otel-trace-url", "http://127.0.0.1:16686/trace/"}, nil, "", `otel_trace_url is "http://127.0.0.1:16686/trace/": it must name the trace id as {trace_id}, as in http://127.0.0.1:16686/trace/{trace_id} (from --otel-trace-url)`},
		{"extra argument", []string{"extra"}, nil, "", "unexpected argument"},
		{"missing config file", []string{"--config", "/nonexistent/c.yaml"}, nil, "", "read config file /nonexistent/c.yaml"},
		{"broken config file", nil, nil, "port: [\n", "read config file "},
		{"unknown key", nil, nil, "prot: 7000\nlimits:\n  frames: 1\n", `unknown key limits.frames, prot;`},
		{"home in file", nil, nil, "home: /elsewhere\n", "sets home"},
		{"postgres without a url", nil, map[string]string{"CAR_STORE": "postgres"}, "", "store is postgres but postgres_url is empty: set CAR_POSTGRES_URL (or --postgres-url) to a libpq URL such as postgres://car@db.example:5432/car, or use store file (from CAR_STORE)"},
		{"unknown store", []string{"--store", "mysql"}, nil, "", `store must be file or postgres, got "mysql" (from --store)`},
		{"unknown journal_sync", []string{"--journal-sync", "normal"}, nil, "", `journal_sync must be full (every idempotent result flushed to disk before the next step and before any reply) or proposal (a proposal's results flushed once, before its reply), got "normal" (from --journal-sync)`},
		{"url not shown", nil, nil, "postgres_url: [\"postgres://car:s3cret@db/car\"]\n", "postgres_url must be a single value (not shown: it may hold a password)"},
		{"zero pool", nil, map[string]string{"CAR_POSTGRES_MAX_CONNS": "0"}, "", "postgres_max_conns must be at least 1 (from CAR_POSTGRES_MAX_CONNS)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if _, ok := env["CAR_HOME"]; !ok {
				env = map[string]string{"CAR_HOME": t.TempDir()}
				for k, v := range tc.env {
					env[k] = v
				}
			}
			isolate(t, env)
			if tc.file != "" {
				writeConfig(t, env["CAR_HOME"], tc.file)
			}
			_, err := Load(tc.args, "/home/u", io.Discard)
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("want a usage error containing %q, got %v", tc.contains, err)
			}
		})
	}
}

// TestFaultsReportedOnce: a value that cannot be read is one fault, not also
// a later "must be at least 1".
func TestFaultsReportedOnce(t *testing.T) {
	isolate(t, map[string]string{"CAR_MAX_IN_FLIGHT": "many", "CAR_MAX_ACTIONS": "0"})
	_, err := Load(nil, "/home/u", io.Discard)
	if err == nil {
		t.Fatal("want an error")
	}
	want := `invalid configuration: max_in_flight must be a non-negative integer, got "many" (from CAR_MAX_IN_FLIGHT); max_actions must be at least 1 (from CAR_MAX_ACTIONS)`
	if err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestConfigFileFormats(t *testing.T) {
	for name, body := range map[string]string{
		"c.json": `{"port": 7000, "max_frame_bytes": 16777217, "allowed_origins": ["a.example"], "no_auth": true}`,
		"c.toml": "port = 7000\nmax_frame_bytes = 16777217\nallowed_origins = [\"a.example\"]\nno_auth = true\n",
		"c.yaml": "port: 7000\nmax_frame_bytes: 16777217\nallowed_origins: a.example\nno_auth: 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			isolate(t, nil)
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load([]string{"--config", path}, "/home/u", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Port != 7000 || cfg.MaxFrameBytes != 16777217 || strings.Join(cfg.AllowedOrigins, ",") != "a.example" || !cfg.NoAuth || cfg.ConfigFile != path {
				t.Fatalf("%+v", cfg)
			}
		})
	}
}

func TestTokenPathRules(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"CAR_HOME", map[string]string{"CAR_HOME": "/srv/car", "XDG_RUNTIME_DIR": "/run/user/1"}, nil, "/srv/car/ai.parslee.car/auth-token"},
		{"--home", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"}, []string{"--home", "/srv/car"}, "/srv/car/ai.parslee.car/auth-token"},
		{"XDG_RUNTIME_DIR", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"}, nil, "/run/user/1/ai.parslee.car/auth-token"},
		{"fallback", nil, nil, "/home/u/.config/ai.parslee.car/auth-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t, tc.env)
			cfg, err := Load(tc.args, "/home/u", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.TokenPath != tc.want {
				t.Fatalf("got %s, want %s", cfg.TokenPath, tc.want)
			}
		})
	}
}

func TestNoAuthAndSocketOff(t *testing.T) {
	isolate(t, map[string]string{"CAR_NO_AUTH": "1"})
	cfg, err := Load([]string{"--socket", "off"}, "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.NoAuth || cfg.Socket != "" {
		t.Fatalf("%+v", cfg)
	}
}

// TestJournalSyncProposalOnPostgres: journal_sync proposal applies to the
// database's commits too, so it is taken with store postgres.
func TestJournalSyncProposalOnPostgres(t *testing.T) {
	isolate(t, map[string]string{"CAR_STORE": "postgres", "CAR_POSTGRES_URL": "postgres://car@db.example/car", "CAR_JOURNAL_SYNC": "proposal"})
	cfg, err := Load(nil, "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != StorePostgres || cfg.JournalSync != "proposal" {
		t.Fatalf("store %q, journal_sync %q; want postgres, proposal", cfg.Store, cfg.JournalSync)
	}
}

// TestHelpTable: --help lists every setting with its flag, variable and
// default, and so does docs/operations.md's configuration table.
func TestHelpTable(t *testing.T) {
	isolate(t, nil)
	var out bytes.Buffer
	if _, err := Load([]string{"--help"}, "/home/u", &out); !errors.Is(err, ErrHelp) {
		t.Fatalf("want ErrHelp, got %v", err)
	}
	readme, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		line := ""
		for l := range strings.Lines(out.String()) {
			if strings.HasPrefix(strings.TrimSpace(l), "--"+s.flag()+" ") {
				line = l
			}
		}
		if !strings.Contains(line, " "+s.env+" ") || !strings.Contains(line, s.help) {
			t.Errorf("help line of %s: %q", s.key, line)
		}
		if !strings.Contains(string(readme), "| `--"+s.flag()+"` | `"+s.env+"` |") {
			t.Errorf("docs/operations.md has no row for --%s / %s", s.flag(), s.env)
		}
	}
	// Every description starts in the same column, and no default is blank.
	col := -1
	for l := range strings.Lines(out.String()) {
		if !strings.HasPrefix(l, "  --") {
			continue
		}
		if strings.Contains(l, "(default )") {
			t.Errorf("blank default: %q", l)
		}
		fields := strings.Fields(l)
		last := fields[1]
		if fields[0] == "--config" || len(fields) < 3 || !strings.HasPrefix(last, "CAR_") {
			continue
		}
		rest := l[strings.Index(l, " "+last+" ")+1+len(last):]
		at := len(l) - len(strings.TrimLeft(rest, " "))
		if col == -1 {
			col = at
		}
		if at != col {
			t.Errorf("description of %s starts at column %d, the others at %d", fields[0], at, col)
		}
	}
	if col == -1 {
		t.Fatalf("no settings in the help:\n%s", out.String())
	}
}

func TestParseDurationSaturatesOrRefuses(t *testing.T) {
	if d, err := ParseDuration("1e300"); err != nil || d != math.MaxInt64 {
		t.Fatalf("1e300 seconds: %s %v, want the longest duration", d, err)
	}
	for _, bad := range []string{"NaN", "-1", "0", "-Inf"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Fatalf("%q was accepted", bad)
		}
	}
	if d, err := ParseDuration("1.5"); err != nil || d != 1500*time.Millisecond {
		t.Fatalf("1.5: %s %v", d, err)
	}
}

// TestPostgresURLNeverInAMessage: a postgres_url the daemon cannot use is
// refused without quoting it, since it may hold a password.
func TestPostgresURLNeverInAMessage(t *testing.T) {
	home := t.TempDir()
	isolate(t, map[string]string{"CAR_HOME": home, "CAR_STORE": "postgres"})
	writeConfig(t, home, "postgres_url:\n  host: db\n  password: s3cret\n")
	_, err := Load(nil, "/home/u", io.Discard)
	var ue *UsageError
	if !errors.As(err, &ue) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "postgres_url must be a single value") {
		t.Fatalf("want a usage error that does not quote the value, got %v", err)
	}
}

// TestDurationDefaults: a duration default is shown and given to viper as a
// person writes it, and still reads back as the same duration.
func TestDurationDefaults(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{300 * time.Second, "5m"},
		{30 * time.Minute, "30m"},
		{2 * time.Hour, "2h"},
		{90 * time.Second, "1m30s"},
		{10 * time.Second, "10s"},
		{1500 * time.Millisecond, "1.5s"},
	} {
		got := setting{def: c.d}.defaultValue()
		if got != c.want {
			t.Errorf("%s shown as %v, want %s", c.d, got, c.want)
		}
		if back, err := ParseDuration(c.want); err != nil || back != c.d {
			t.Errorf("%s reads back as %s, %v", c.want, back, err)
		}
	}
	if got := (setting{def: 64}).defaultValue(); got != 64 {
		t.Errorf("a number default changed to %v", got)
	}
}

func TestMCPEndpointDefaultAndDisabled(t *testing.T) {
	isolate(t, nil)
	cfg, err := Load(nil, "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPBind != "127.0.0.1:9102" {
		t.Fatalf("default mcp_bind = %q, want 127.0.0.1:9102", cfg.MCPBind)
	}
	isolate(t, map[string]string{"CAR_MCP_BIND": "disabled"})
	if cfg, err = Load(nil, "/home/u", io.Discard); err != nil || cfg.MCPBind != "" {
		t.Fatalf("mcp_bind disabled = %q %v, want off", cfg.MCPBind, err)
	}
}
