package connectors

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// serverModeEnv makes the test binary an MCP server over stdio (TestMain):
// the misbehaving servers the Bad input tests need.
const serverModeEnv = "CONNECTORS_TEST_SERVER"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ReaperCommand {
		os.Exit(RunReaper(os.Args[2:]))
	}
	if mode := os.Getenv(serverModeEnv); mode != "" {
		os.Exit(serveTestServer(mode))
	}
	goleak.VerifyTestMain(m)
}

// npmServer is the entry script of an npm MCP server installed by
// testdata/npm (npm ci). Missing, the test skips locally and fails in CI.
func npmServer(t *testing.T, pkg string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (npm ci in internal/connectors/testdata/npm): %v", pkg, err)
		}
		t.Skipf("needs the npm package %s (npm ci in internal/connectors/testdata/npm)", pkg)
	}
	return path
}

// harness is a Manager over a fresh $CAR_HOME with a Runtime whose
// sessions see its tools.
type harness struct {
	home  string
	tools *engine.DaemonTools
	m     *Manager
	rt    *engine.Runtime
	s     *engine.Session
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	h := &harness{home: t.TempDir()}
	if opts.Home != "" {
		h.home = opts.Home
	}
	h.tools = engine.NewDaemonTools(engine.SchemaLimits{})
	opts.Home, opts.Tools = h.home, h.tools
	if exe, err := os.Executable(); err == nil {
		opts.Reaper = []string{exe, ReaperCommand} // as the daemon runs them
	}
	if opts.BackoffMin == 0 {
		opts.BackoffMin, opts.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	}
	h.m = New(opts)
	t.Cleanup(h.m.Close)
	h.rt = engine.NewRuntime(engine.Options{DaemonTools: h.tools})
	t.Cleanup(h.rt.Close)
	h.s = h.rt.OpenSession("s1", nil)
	h.s.SetTier(policy.FullAccess)
	t.Cleanup(func() { h.rt.CloseSession(h.s) })
	return h
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// submit runs one proposal of actions in the harness's session.
func (h *harness) submit(t *testing.T, actions ...protocol.Action) *protocol.ProposalResult {
	t.Helper()
	res, err := h.rt.Submit(ctxT(t), submission(h, actions...))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func submission(h *harness, actions ...protocol.Action) *engine.Submission {
	for i := range actions {
		if actions[i].Type == "" {
			actions[i].Type = protocol.ActionToolCall
		}
		if actions[i].FailureBehavior == "" {
			actions[i].FailureBehavior = protocol.FailAbort
		}
		if actions[i].Parameters == nil {
			actions[i].Parameters = map[string]any{}
		}
	}
	return &engine.Submission{Proposal: &protocol.ActionProposal{Actions: actions}, Session: h.s}
}

// selfServer is a stdio connector running this test binary as the server
// of mode.
func selfServer(t testing.TB, name, mode string, env map[string]string) protocol.ConnectorsAddStdioParams {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{serverModeEnv: mode}
	for k, v := range env {
		e[k] = v
	}
	return protocol.ConnectorsAddStdioParams{Name: name, Command: exe, Env: e}
}

// serveTestServer answers MCP over stdio, misbehaving as mode says.
func serveTestServer(mode string) int {
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "test server: exiting at once")
		return 3
	case "slow":
		return serveSlow()
	case "grow":
		return serveGrow()
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		switch req.Method {
		case "initialize":
			reply(req.ID, map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "test", "version": "1"}})
		case "tools/list":
			reply(req.ID, map[string]any{"tools": testTools(mode)})
		case "tools/call":
			switch mode {
			case "garbage":
				out.WriteString("{\"jsonrpc\": \"2.0\", \"id\": " + string(req.ID) + ", \"result\": {oops\n")
				out.Flush()
			case "meta":
				// The call's _meta as text, so a test can see what it carried.
				var p struct {
					Meta json.RawMessage `json:"_meta"`
				}
				_ = json.Unmarshal(req.Params, &p)
				reply(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": string(p.Meta)}}})
			case "huge":
				text := strings.Repeat("x", 50<<20)
				reply(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
			default:
				reply(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}})
			}
		default:
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			out.Write(b)
			out.WriteByte('\n')
			out.Flush()
		}
	}
	return 0
}

func testTools(mode string) []any {
	tool := func(name string, schema any) map[string]any {
		return map[string]any{"name": name, "inputSchema": schema, "annotations": map[string]any{"readOnlyHint": true}}
	}
	obj := map[string]any{"type": "object"}
	switch mode {
	case "many":
		out := make([]any, 10000)
		for i := range out {
			out[i] = tool(fmt.Sprintf("t%05d", i), obj)
		}
		return out
	case "badnames":
		return []any{tool("good", obj), tool("bad.name", obj), tool("spa ce", obj)}
	case "bigschema":
		props := map[string]any{}
		for i := range 5000 {
			props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "description": strings.Repeat("d", 40)}
		}
		return []any{tool("good", obj), tool("huge", map[string]any{"type": "object", "properties": props})}
	}
	return []any{tool("call", obj)}
}

// serveSlow is an SDK server whose tool "wait" writes its pid to
// $STARTED_FILE, blocks until the client cancels it, and then writes
// "cancelled" to $CANCEL_FILE.
func serveSlow() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		_ = os.WriteFile(os.Getenv("STARTED_FILE"), []byte(strconv.Itoa(os.Getpid())), 0o600)
		<-ctx.Done()
		_ = os.WriteFile(os.Getenv("CANCEL_FILE"), []byte("cancelled"), 0o600)
		return nil, nil, ctx.Err()
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// serveGrow is an SDK server whose tool "grow" adds a tool "grown", which
// makes the server send notifications/tools/list_changed.
func serveGrow() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "grow", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: "grown", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grew"}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}
