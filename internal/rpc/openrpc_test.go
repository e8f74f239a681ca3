package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/connectors"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/openrpc"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// openrpcDoc is the generated document: method names to their index, and
// the schema compiler that resolves pointers into it.
type openrpcDoc struct {
	raw      []byte
	methods  map[string]int // client → server
	toClient map[string]int // x-server-to-client
	compiler *jsonschema.Compiler
	mu       sync.Mutex
}

func loadOpenRPC(t *testing.T) *openrpcDoc {
	t.Helper()
	raw, err := openrpc.Document()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Methods  []struct{ Name string } `json:"methods"`
		ToClient []struct{ Name string } `json:"x-server-to-client"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	d := &openrpcDoc{raw: raw, methods: map[string]int{}, toClient: map[string]int{}, compiler: jsonschema.NewCompiler()}
	for i, m := range doc.Methods {
		d.methods[m.Name] = i
	}
	for i, m := range doc.ToClient {
		d.toClient[m.Name] = i
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.compiler.AddResource("openrpc.json", v); err != nil {
		t.Fatal(err)
	}
	return d
}

// check validates value against the schema at pointer in the document.
func (d *openrpcDoc) check(pointer string, value []byte) error {
	d.mu.Lock()
	sch, err := d.compiler.Compile("openrpc.json#" + pointer)
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("compile %s: %w", pointer, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// result validates a reply of a client → server method.
func (d *openrpcDoc) result(method string, value []byte) error {
	i, ok := d.methods[method]
	if !ok {
		return fmt.Errorf("%s is not in openrpc.json", method)
	}
	return d.check(fmt.Sprintf("/methods/%d/result/schema", i), value)
}

// toClientParams validates the params of a server → client method by name.
func (d *openrpcDoc) toClientParams(method string, params []byte) error {
	i, ok := d.toClient[method]
	if !ok {
		return fmt.Errorf("%s is not in x-server-to-client", method)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(params, &members); err != nil {
		return err
	}
	var doc struct {
		ToClient []struct {
			Params []struct {
				Name     string `json:"name"`
				Required bool   `json:"required"`
			} `json:"params"`
		} `json:"x-server-to-client"`
	}
	if err := json.Unmarshal(d.raw, &doc); err != nil {
		return err
	}
	known := map[string]bool{}
	for j, p := range doc.ToClient[i].Params {
		known[p.Name] = true
		v, ok := members[p.Name]
		if !ok {
			if p.Required {
				return fmt.Errorf("%s: required param %s is missing", method, p.Name)
			}
			continue
		}
		if err := d.check(fmt.Sprintf("/x-server-to-client/%d/params/%d/schema", i, j), v); err != nil {
			return fmt.Errorf("%s: param %s: %w", method, p.Name, err)
		}
	}
	for name := range members {
		if !known[name] {
			return fmt.Errorf("%s: param %s is not in the document", method, name)
		}
	}
	return nil
}

// TestMethodTableMatchesOpenRPC fails when the daemon serves a method the
// document lacks, or the document lists one the daemon does not serve.
func TestMethodTableMatchesOpenRPC(t *testing.T) {
	d := loadOpenRPC(t)
	var undocumented, unserved []string
	for name := range methods {
		if strings.HasPrefix(name, "test.") { // this package's test methods
			continue
		}
		if _, ok := d.methods[name]; !ok {
			undocumented = append(undocumented, name)
		}
	}
	for name := range d.methods {
		// session.auth is decided on the read loop, tools.stream.chunk (a
		// notification) in handleNotification.
		if _, ok := methods[name]; !ok && name != protocol.MethodSessionAuth && name != protocol.MethodToolsStreamChunk {
			unserved = append(unserved, name)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unserved)
	if len(undocumented) > 0 {
		t.Errorf("served but not in protocol.Methods (add an entry, then make openrpc): %v", undocumented)
	}
	if len(unserved) > 0 {
		t.Errorf("in protocol.Methods but not served by the method table: %v", unserved)
	}
}

// TestRPCDiscoverServesTheDocument: rpc.discover answers the generated
// document over a real connection.
func TestRPCDiscoverServesTheDocument(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	var got json.RawMessage
	if err := c.Call(ctxT(t), protocol.MethodRPCDiscover, nil, &got); err != nil {
		t.Fatal(err)
	}
	want, err := openrpc.Document()
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, compact.Bytes()) {
		t.Fatalf("rpc.discover answered %d bytes that differ from the generated document (%d bytes)", len(got), compact.Len())
	}
}

// TestRepliesMatchTheDocument sends each method a valid request over a real
// connection and validates the reply against the method's result schema in
// openrpc.json, and the callbacks and notifications the daemon sends
// against x-server-to-client. A method must be exercised here or named in
// notExercised. The daemon has every optional store (run traces, postures,
// checkpoints, an approval ledger); c has the host role, and agent is a
// connection bound to an agent.
func TestRepliesMatchTheDocument(t *testing.T) {
	d := loadOpenRPC(t)
	home := t.TempDir()
	ledger, _, err := file.OpenApprovals(filepath.Join(home, "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(filepath.Join(home, "checkpoints"), 8, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	runStore, _, err := file.OpenRunStore(filepath.Join(home, "runs"), runs.Options{Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	postures, err := file.OpenPostures(filepath.Join(home, "agent-permissions.json"))
	if err != nil {
		t.Fatal(err)
	}
	leases, _, err := file.OpenLeases(filepath.Join(home, "leases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(home, "agent-tokens.json")
	traj, err := file.OpenTrajectories(filepath.Join(home, "trajectories"))
	if err != nil {
		t.Fatal(err)
	}
	// An MCP server in process, for the connectors.* round trips.
	mcpServer := mcp.NewServer(&mcp.Implementation{Name: "doc", Version: "1"}, nil)
	mcp.AddTool(mcpServer, &mcp.Tool{Name: "ping", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	mcpHTTP := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil))
	defer mcpHTTP.Close()
	daemonTools := engine.NewDaemonTools(engine.SchemaLimits{})
	conns := connectors.New(connectors.Options{Home: home, Tools: daemonTools})
	defer conns.Close()
	rs := &runsServer{home: home, store: runStore, testServer: startServerWith(t, serverSetup{
		opts:       Options{HostToken: runsHostToken, Runs: runStore, AgentTokens: file.TokenFile(tokens), Postures: postures, Connectors: conns, Leases: leases},
		engine:     engine.Options{Approvals: ledger, Checkpoints: store, Postures: postures, DaemonTools: daemonTools, Trajectories: traj},
		closeAfter: func() error { return errors.Join(runStore.Close(), ledger.Close(), traj.Close(), leases.Close()) },
	})}
	c := rs.hostClient(t)
	agent := rs.mustAgent(t, "bot-a")
	rs.issue(t, "bot-b") // revoked below

	var (
		mu      sync.Mutex
		callErr []error
		seen    = map[string]bool{}
		hostEv  = make(chan struct{}, 1)
		chunkEv = make(chan struct{}, 1)
		traceEv = make(chan struct{}, 1)
	)
	sawCallback := func(method string, params json.RawMessage, arrived chan struct{}) {
		mu.Lock()
		seen[method] = true
		if err := d.toClientParams(method, params); err != nil {
			callErr = append(callErr, err)
		}
		mu.Unlock()
		if arrived != nil {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}
	// tail streams one text chunk, then runs until its handle is cancelled.
	tail := func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Text(ctx, "line 1"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, params json.RawMessage) (any, error) {
		sawCallback(protocol.MethodToolsExecute, params, nil)
		var call protocol.ToolExecuteParams
		if err := json.Unmarshal(params, &call); err != nil {
			return nil, err
		}
		switch call.Tool {
		case "tail":
			return c.Stream(call, tail)
		case "flaky":
			return map[string]any{"error": "upstream is down"}, nil
		}
		return map[string]any{"echo": true}, nil
	})
	c.HandleRequest(protocol.MethodReplanPropose, func(_ context.Context, params json.RawMessage) (any, error) {
		sawCallback(protocol.MethodReplanPropose, params, nil)
		return nil, nil // give up
	})
	for method, arrived := range map[string]chan struct{}{
		protocol.MethodHostEvent:        hostEv,
		protocol.MethodEventsEvent:      nil,
		protocol.MethodToolsStreamEvent: chunkEv,
		protocol.MethodToolsCancel:      nil,
	} {
		c.HandleNotification(method, func(params json.RawMessage) { sawCallback(method, params, arrived) })
	}
	agent.HandleNotification(protocol.MethodRunsTraceEvent, func(params json.RawMessage) {
		sawCallback(protocol.MethodRunsTraceEvent, params, traceEv)
	})

	proposal := map[string]any{"actions": []any{
		map[string]any{"id": "a1", "type": "tool_call", "tool": "echo", "parameters": map[string]any{"x": 1}, "reversibility": "reversible"},
		map[string]any{"id": "a2", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "$a1.output"}, "dependencies": []string{"a1"}},
	}}
	streaming := map[string]any{"actions": []any{
		map[string]any{"id": "s1", "type": "tool_call", "tool": "tail", "parameters": map[string]any{}, "invocation_mode": "streaming"},
	}}
	failing := map[string]any{"actions": []any{
		map[string]any{"id": "f1", "type": "tool_call", "tool": "flaky", "parameters": map[string]any{}},
	}}
	var agentID, approvalID, checkpointID, handle, runID string
	steps := []struct {
		method string
		params func() any
		on     *client.Client            // c when nil
		after  func(raw json.RawMessage) // reads what a later step needs
	}{
		{method: protocol.MethodServerHandshake, params: func() any { return map[string]any{"protocol_version": protocol.ProtocolVersion} }},
		{method: protocol.MethodRPCDiscover},
		{method: protocol.MethodSessionInit, params: func() any {
			return map[string]any{"tools": []any{
				map[string]any{"name": "echo", "parameters": map[string]any{"type": "object"}},
				map[string]any{"name": "tail"}, map[string]any{"name": "flaky"},
			}}
		}},
		{method: protocol.MethodServerStatus},
		{method: protocol.MethodServerConnections},
		{method: protocol.MethodApprovalsList},
		{method: protocol.MethodSessionPolicyOpen},
		{method: protocol.MethodSessionPolicyClose, params: func() any { return map[string]any{"session_id": "none"} }},
		{method: protocol.MethodPolicyRegister, params: func() any { return map[string]any{"name": "p", "rule": "deny_tool", "target": "rm"} }},
		{method: protocol.MethodPolicyList},
		{method: protocol.MethodPolicyUnregister, params: func() any { return map[string]any{"name": "p"} }},
		{method: protocol.MethodToolsRegister, params: func() any { return []any{map[string]any{"name": "spare"}} }},
		{method: protocol.MethodToolsList},
		{method: protocol.MethodToolsFeedback, params: func() any { return map[string]any{"tools": []string{"spare"}} }},
		{method: protocol.MethodToolsUnregister, params: func() any { return map[string]any{"name": "spare"} }},
		{method: protocol.MethodHarnessGet},
		{method: protocol.MethodHarnessSet, params: func() any { return map[string]any{"max_retries": 3} }},
		{method: protocol.MethodHarnessUpdate, params: func() any { return map[string]any{"add": map[string]any{"retry_backoff_ms": 0}} }},
		{method: protocol.MethodToolsHandles},
		{method: protocol.MethodStateSet, params: func() any { return map[string]any{"key": "k", "value": map[string]any{"n": 1}} }},
		{method: protocol.MethodStateGet, params: func() any { return map[string]any{"key": "k"} }},
		{method: protocol.MethodStateExists, params: func() any { return map[string]any{"key": "k"} }},
		{method: protocol.MethodStateKeys},
		{method: protocol.MethodStateSnapshot},
		{method: protocol.MethodCheckpointSave, params: func() any { return map[string]any{"name": "before"} },
			after: func(raw json.RawMessage) { checkpointID = field(t, raw, "checkpoint_id") }},
		{method: protocol.MethodCheckpointList},
		{method: protocol.MethodCheckpointRestore, params: func() any {
			approveRestore(t, &toolbox{Client: c}, checkpointID)
			return map[string]any{"checkpoint_id": checkpointID}
		}},
		{method: protocol.MethodCheckpointDelete, params: func() any { return map[string]any{"checkpoint_id": checkpointID} }},
		{method: protocol.MethodSessionCapabilitiesGet},
		{method: protocol.MethodSessionBudgetSet, params: func() any { return map[string]any{"max_tool_calls": 1000, "scope": "session"} }},
		{method: protocol.MethodEventsSubscribe},
		{method: protocol.MethodProposalSubmit, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodProposalCancel, params: func() any { return map[string]any{"proposal_id": "none"} }},
		{method: protocol.MethodProposalScore, params: func() any { return map[string]any{"candidates": []any{proposal}} }},
		{method: protocol.MethodProposalPlan, params: func() any { return map[string]any{"candidates": []any{proposal}} }},
		{method: protocol.MethodToolsStreamSubscribe},
		{method: protocol.MethodProposalSubmit, params: func() any { return map[string]any{"proposal": streaming} },
			after: func(raw json.RawMessage) { handle = streamHandle(t, raw) }},
		{method: protocol.MethodToolsPoll, params: func() any {
			next(t, chunkEv, "tools.stream.event") // the chunk is in the buffer
			return map[string]any{"handle": handle}
		}},
		{method: protocol.MethodToolsCancel, params: func() any { return map[string]any{"handle": handle} }},
		{method: protocol.MethodToolsStreamUnsubscribe},
		{method: protocol.MethodReplanSetConfig, params: func() any { return map[string]any{"max_replans": 1} }},
		{method: protocol.MethodProposalSubmit, params: func() any { return map[string]any{"proposal": failing} }},
		{method: protocol.MethodVerify, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodSimulate, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodEquivalent, params: func() any { return map[string]any{"a": proposal, "b": proposal} }},
		{method: protocol.MethodOptimize, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodVerifyMonteCarlo, params: func() any {
			return map[string]any{"proposal": proposal, "config": map[string]any{"trials": 10, "seed": 1}}
		}},
		{method: protocol.MethodPermissionGetTier},
		{method: protocol.MethodPermissionSetTier, params: func() any { return map[string]any{"tier": "read_only"} }},
		{method: protocol.MethodPermissionClassify, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodPermissionEvaluate, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodPermissionPending, params: func() any { return map[string]any{"proposal": proposal} }},
		{method: protocol.MethodPermissionApprove, params: func() any { return map[string]any{"fingerprint": "f", "required_tier": "sandbox_edit"} }},
		{method: protocol.MethodPermissionReject, params: func() any { return map[string]any{"fingerprint": "g", "required_tier": "sandbox_edit", "reason": "no"} }},
		{method: protocol.MethodSupervisionSubscribe},
		{method: protocol.MethodSupervisionPending},
		{method: protocol.MethodSupervisionUnsubscribe},
		{method: protocol.MethodHostSubscribe},
		{method: protocol.MethodHostRegisterAgent, params: func() any { return map[string]any{"name": "bot", "kind": "test"} },
			after: func(raw json.RawMessage) { agentID = field(t, raw, "id") }},
		{method: protocol.MethodHostAgents},
		{method: protocol.MethodHostSetStatus, params: func() any { return map[string]any{"agent_id": agentID, "status": "running"} }},
		{method: protocol.MethodHostNotify, params: func() any { return map[string]any{"message": "hello"} }},
		{method: protocol.MethodHostRequestApproval, params: func() any { return map[string]any{"title": "ok?"} },
			after: func(raw json.RawMessage) { approvalID = field(t, raw, "id") }},
		{method: protocol.MethodHostApprovals},
		{method: protocol.MethodHostResolveApproval, params: func() any { return map[string]any{"approval_id": approvalID, "approved": true} }},
		{method: protocol.MethodHostEvents},
		{method: protocol.MethodHostUnregisterAgent, params: func() any { return map[string]any{"agent_id": agentID} }},
		{method: protocol.MethodHostUnsubscribe},

		{method: protocol.MethodRunsStart, on: agent, params: func() any { return map[string]any{"intent": "fix the build"} },
			after: func(raw json.RawMessage) { runID = field(t, raw, "run_id") }},
		{method: protocol.MethodRunsSubscribe, on: agent, params: func() any { return map[string]any{"run_id": runID} }},
		{method: protocol.MethodRunsRecordTurns, on: agent, params: func() any {
			return map[string]any{"run_id": runID, "turns": []any{map[string]any{
				"prompt": "why?", "tool": "echo", "output": map[string]any{"ok": true},
				"tokens": map[string]any{"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01},
			}}}
		}},
		{method: protocol.MethodRunsGetTrace, on: agent, params: func() any {
			next(t, traceEv, "runs.trace.event")
			return map[string]any{"run_id": runID}
		}},
		{method: protocol.MethodRunsGetTrace, on: agent, params: func() any { return map[string]any{"run_id": "no-such-run"} }},
		{method: protocol.MethodRunsList, on: agent, params: func() any { return map[string]any{"agent_id": "bot-a"} }},
		{method: protocol.MethodRunsComplete, on: agent, params: func() any {
			return map[string]any{"run_id": runID, "outcome": map[string]any{"status": "success"}}
		}},
		{method: protocol.MethodRunsUnsubscribe, on: agent, params: func() any { return map[string]any{"run_id": runID} }},

		{method: protocol.MethodLeaseStatus, on: agent, params: func() any { return map[string]any{"agent_id": "bot-a"} }},
		{method: protocol.MethodLeaseAcquire, on: agent, params: func() any { return map[string]any{"agent_id": "bot-a", "ttl_ms": 60000} }},
		{method: protocol.MethodLeaseStatus, on: agent, params: func() any { return map[string]any{"agent_id": "bot-a"} }},
		{method: protocol.MethodLeaseRenew, on: agent, params: func() any { return map[string]any{"agent_id": "bot-a", "epoch": 1} }},
		{method: protocol.MethodLeaseRelease, on: agent, params: func() any { return map[string]any{"agent_id": "bot-a", "epoch": 1} }},

		{method: protocol.MethodAgentPermissionsSetDefault, params: func() any { return map[string]any{"preset": "cautious"} }},
		{method: protocol.MethodAgentPermissionsSet, params: func() any {
			return map[string]any{"agent_id": "bot-a", "mode": "deny", "tier": "full_access"}
		}},
		{method: protocol.MethodAgentPermissionsGet},
		{method: protocol.MethodAgentPermissionsEvaluate, params: func() any { return map[string]any{"agent_id": "bot-a", "tier": "full_access"} }},
		{method: protocol.MethodAgentPermissionsReset, params: func() any { return map[string]any{"agent_id": "bot-a"} }},
		{method: protocol.MethodAgentsRevoke, params: func() any { return map[string]any{"agent_id": "bot-b"} }},

		{method: protocol.MethodEventsCount},
		{method: protocol.MethodEventsQuery, params: func() any { return map[string]any{"limit": 5} }},
		{method: protocol.MethodEventsChainEnable},
		{method: protocol.MethodEventsChainVerify},
		{method: protocol.MethodEventsRetention},
		{method: protocol.MethodEventsRetention, params: func() any { return map[string]any{"policy": map[string]any{"max_events": 10000}} }},
		{method: protocol.MethodEventsUnsubscribe},
		{method: protocol.MethodMetricsSummary},
		{method: protocol.MethodMetricsAlerts, params: func() any { return map[string]any{"max_error_rate": 0, "min_actions": 0, "max_cost_usd": 0} }},
		{method: protocol.MethodEventsCostByAgent},
		{method: protocol.MethodSessionIntentSet, params: func() any {
			return map[string]any{"intent": "test", "forbidden_tools": []string{"shell"}, "untrusted_tools": []string{"web_fetch"}}
		}},
		{method: protocol.MethodSessionIntentGet},
		{method: protocol.MethodSessionIntentClear},
		{method: protocol.MethodTaintList},
		{method: protocol.MethodTaintClear, params: func() any { return map[string]any{"keys": []string{"k"}} }},
		{method: protocol.MethodSessionTransactionCheckSet, params: func() any { return map[string]any{"mode": "warn"} }},
		{method: protocol.MethodReceiptsVerify, params: func() any {
			return map[string]any{"claims": []map[string]any{{"tool": "echo", "result_count": 1}, {"tool": "nope", "found_nothing": true}}}
		}},
		{method: protocol.MethodSessionCapabilitiesSet, params: func() any { return map[string]any{"tools": []string{"echo"}, "max_actions": 10} }},

		{method: protocol.MethodConnectorsAdd, params: func() any {
			return map[string]any{"name": "doc", "url": mcpHTTP.URL, "headers": map[string]string{"X-Key": "k"}}
		}},
		{method: protocol.MethodConnectorsList},
		{method: protocol.MethodConnectorsTools, params: func() any { return map[string]any{"slug": "doc"} }},
		{method: protocol.MethodConnectorsEnableTools, params: func() any { return map[string]any{"slug": "doc", "tools": []string{"ping"}} }},
		{method: protocol.MethodConnectorsDisableTools, params: func() any { return map[string]any{"slug": "doc", "tools": []string{"ping"}} }},
		{method: protocol.MethodConnectorsRefresh, params: func() any { return map[string]any{"slug": "doc"} }},
		{method: protocol.MethodConnectorsRemove, params: func() any { return map[string]any{"slug": "doc"} }},
	}
	// Not exercised here, each for its reason; every other method must be.
	notExercised := map[string]string{
		protocol.MethodSessionAuth:        "auth is off on this server; auth_test.go covers it",
		protocol.MethodSupervisionDecide:  "needs a parked intent; supervision tests cover it",
		protocol.MethodMultiSwarm:         "needs agents that answer multi.run_agent; multi_doc_test.go validates every multi.* reply",
		protocol.MethodMultiPipeline:      "as multi.swarm",
		protocol.MethodMultiSupervisor:    "as multi.swarm",
		protocol.MethodMultiMapReduce:     "as multi.swarm",
		protocol.MethodMultiVote:          "as multi.swarm",
		protocol.MethodMultiTournament:    "as multi.swarm",
		protocol.MethodMultiSubtask:       "as multi.swarm",
		protocol.MethodConnectorsAddStdio: "runs a program; internal/connectors and cmd/car-server run real servers with it, and its reply is connectors.add's ConnectorStatus, checked here",
	}
	exercised := map[string]bool{protocol.MethodToolsStreamChunk: true} // sent by tail
	for _, s := range steps {
		exercised[s.method] = true
		var params any
		if s.params != nil {
			params = s.params()
		}
		on := s.on
		if on == nil {
			on = c
		}
		var raw json.RawMessage
		if err := on.Call(ctxT(t), s.method, params, &raw); err != nil {
			t.Fatalf("%s: %v", s.method, err)
		}
		if err := d.result(s.method, raw); err != nil {
			t.Errorf("%s: the reply does not match openrpc.json: %v\nreply: %s", s.method, err, raw)
		}
		if s.after != nil {
			s.after(raw)
		}
	}
	for name := range d.methods {
		if !exercised[name] && notExercised[name] == "" {
			t.Errorf("%s has no round trip here: add a step, or a reason to notExercised", name)
		}
	}
	next(t, hostEv, "host.event")
	mu.Lock()
	defer mu.Unlock()
	for _, err := range callErr {
		t.Errorf("a server → client message does not match openrpc.json: %v", err)
	}
	for name := range d.toClient {
		if !seen[name] && name != protocol.MethodMultiRunAgent && name != protocol.MethodSupervisionIntent {
			t.Errorf("the daemon sent no %s here (multi.run_agent and supervision.intent are covered by their own tests)", name)
		}
	}
}

// streamHandle is the handle in a proposal.submit reply's one detached
// action.
func streamHandle(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var res protocol.ProposalResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return handleOf(t, res, res.Results[0].ActionID)
}

// field returns a string member of a JSON object.
func field(t *testing.T, raw json.RawMessage, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("reply has no %s: %s", name, raw)
	}
	return s
}
