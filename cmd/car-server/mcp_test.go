package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// The MCP endpoint, end to end: the real daemon with the filesystem server
// as a connector (connectors.toml), driven by the official TypeScript SDK's
// client (examples/mcp/client.mjs) over Streamable HTTP and through
// car-server mcp over stdio.

// mcpExampleDir is examples/mcp with its npm packages installed (npm ci in
// examples/mcp: @modelcontextprotocol/sdk, @modelcontextprotocol/server-filesystem).
func mcpExampleDir(t *testing.T) string {
	t.Helper()
	needTool(t, "nodejs (apt-get install nodejs npm)", "node")
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "mcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/server-filesystem"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the npm package %s is not installed (npm ci in examples/mcp): %v", pkg, err)
			}
			t.Skipf("needs the npm package %s (npm ci in examples/mcp)", pkg)
		}
	}
	return dir
}

// mcpGateway is a daemon in front of the filesystem server on a temporary
// directory (read_text_file, write_file and list_directory enabled), with
// an agent scout whose posture denies full_access, and a person watching
// the desk on a host-role connection of its own.
type mcpGateway struct {
	d          *daemon
	dir        string // examples/mcp
	root       string // the filesystem server's directory
	scoutToken string
}

func startMCPGateway(t *testing.T) *mcpGateway {
	t.Helper()
	dir := mcpExampleDir(t)
	home, root := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello through the gateway"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	toml := fmt.Sprintf("[[connector]]\nname = \"files\"\ncommand = \"node\"\nargs = [%q, %q]\nenable = [\"read_text_file\", \"write_file\", \"list_directory\"]\n", server, root)
	if err := os.WriteFile(filepath.Join(home, "connectors.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	postures := `{"default": {"read_only": "always_allow", "sandbox_edit": "require_approval", "full_access": "require_approval"}, "agents": {"scout": {"full_access": "deny"}}}`
	if err := os.WriteFile(filepath.Join(home, "agent-permissions.json"), []byte(postures), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := agentsCommand(t, []string{"CAR_HOME=" + home}, "issue-token", "scout")
	if code != exitOK {
		t.Fatalf("issue-token: %d %s", code, errOut)
	}
	d := startDaemon(t, home)
	d.waitLog(t, "connector connected")
	if d.mcpAddr == "" {
		t.Fatal("the daemon logged no mcp_addr")
	}
	return &mcpGateway{d: d, dir: dir, root: root, scoutToken: strings.TrimSpace(out)}
}

// client runs examples/mcp/client.mjs with args, over HTTP with token, or
// over stdio (car-server mcp) when stdio is set; its stdout lines come on
// the channel, decoded, and the process is waited for at cleanup.
func (g *mcpGateway) client(t *testing.T, token string, stdio bool, agent string, args ...string) <-chan map[string]any {
	t.Helper()
	cmd := exec.Command("node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "CAR_HOME="+g.d.home, "CAR_MCP_URL=http://"+g.d.mcpAddr+"/mcp", "CAR_MCP_TOKEN="+token, "CAR_SERVER="+binary, "CAR_MCP_BIND="+g.d.mcpAddr)
	if stdio {
		cmd.Env = append(cmd.Env, "CAR_MCP_STDIO=1")
		if agent != "" {
			cmd.Env = append(cmd.Env, "CAR_MCP_AGENT="+agent, "CAR_AGENT_TOKEN="+token)
		}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan map[string]any, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				v = map[string]any{"line": sc.Text()}
			}
			lines <- v
		}
	}()
	t.Cleanup(func() {
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("client.mjs %v stderr:\n%s", args, stderr.String())
		}
	})
	return lines
}

// next is the client's next line, within waitLimit.
func next(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case v, ok := <-lines:
		if !ok {
			t.Fatal("the client ended without another line")
		}
		return v
	case <-time.After(waitLimit):
		t.Fatal("no line from the client")
	}
	return nil
}

func toolNames(t *testing.T, v map[string]any) []string {
	t.Helper()
	tools, ok := v["tools"].([]any)
	if !ok {
		t.Fatalf("no tools in %v", v)
	}
	var out []string
	for _, x := range tools {
		out = append(out, x.(map[string]any)["name"].(string))
	}
	return out
}

// result is the "result" of a call line.
func result(t *testing.T, v map[string]any) (isError bool, text string) {
	t.Helper()
	r, ok := v["result"].(map[string]any)
	if !ok {
		t.Fatalf("not a result: %v", v)
	}
	return r["isError"] == true, fmt.Sprint(r["text"])
}

func TestMCPEndpointWithTheTypeScriptClient(t *testing.T) {
	g := startMCPGateway(t)
	person := hostOf(t, g.d)
	if err := person.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("tools/list by principal", func(t *testing.T) {
		listed := next(t, g.client(t, g.d.token, false, "", "list"))
		plain := toolNames(t, listed)
		if !slices.Equal(plain, []string{"mcp_files_list_directory", "mcp_files_read_text_file", "mcp_files_write_file"}) {
			t.Fatalf("plain client's tools = %v", plain)
		}
		// The server's annotations pass through; the daemon's tier beside.
		read := listed["tools"].([]any)[1].(map[string]any)
		if ann, _ := read["annotations"].(map[string]any); read["tier"] != "read_only" || ann["readOnlyHint"] != true {
			t.Fatalf("read_text_file listed as %v, want tier read_only and the server's readOnlyHint", read)
		}
		if write := listed["tools"].([]any)[2].(map[string]any); write["tier"] != "full_access" {
			t.Fatalf("write_file listed as %v, want tier full_access", write)
		}
		scout := toolNames(t, next(t, g.client(t, g.scoutToken, false, "", "list")))
		if !slices.Equal(scout, []string{"mcp_files_list_directory", "mcp_files_read_text_file"}) {
			t.Fatalf("agent scout's tools = %v, want no write_file (its posture denies full_access)", scout)
		}
	})

	t.Run("a governed call end to end", func(t *testing.T) {
		path := filepath.Join(g.root, "hello.txt")
		isErr, text := result(t, next(t, g.client(t, g.scoutToken, false, "", "call", "mcp_files_read_text_file", fmt.Sprintf(`{"path":%q}`, path))))
		if isErr || text != "hello through the gateway" {
			t.Fatalf("read_text_file = %v %q", isErr, text)
		}
		var events protocol.EventsQueryResult
		if err := person.Call(ctxT(t), protocol.MethodEventsQuery, protocol.EventsQueryParams{Kinds: []protocol.EventKind{"proposal_received"}, DataMatches: map[string]string{"source": "mcp", "agent": "scout"}}, &events); err != nil {
			t.Fatal(err)
		}
		if events.Count == 0 || !strings.HasPrefix(events.Events[0].Connection, "mcp-") {
			t.Fatalf("events.query has no MCP proposal of scout's: %+v", events)
		}
	})

	t.Run("an agent's call is a turn of its current run", func(t *testing.T) {
		ws, err := client.Dial(ctxT(t), "ws://"+g.d.addr+"/", &client.Options{Token: g.scoutToken, AgentID: "scout"})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		var run protocol.RunsStartResult
		if err := ws.Call(ctxT(t), protocol.MethodRunsStart, protocol.RunsStartParams{Intent: "read through MCP"}, &run); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(g.root, "hello.txt")
		if isErr, text := result(t, next(t, g.client(t, g.scoutToken, false, "", "call", "mcp_files_read_text_file", fmt.Sprintf(`{"path":%q}`, path)))); isErr {
			t.Fatalf("read_text_file = %q", text)
		}
		var trace protocol.RunsGetTraceResult
		if err := ws.Call(ctxT(t), protocol.MethodRunsGetTrace, protocol.RunsGetTraceParams{RunID: run.RunID}, &trace); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range trace.Records {
			found = found || r.Tool == "mcp_files_read_text_file"
		}
		if !found {
			t.Fatalf("run %s has no turn of the MCP call: %+v", run.RunID, trace.Records)
		}
	})

	t.Run("a call waits for a person on another connection", func(t *testing.T) {
		target := filepath.Join(g.root, "approved.txt")
		lines := g.client(t, g.d.token, false, "", "call", "mcp_files_write_file", fmt.Sprintf(`{"path":%q,"content":"written once approved"}`, target))
		waiting := next(t, lines)
		id, _ := waiting["waiting"].(string)
		if id == "" || !strings.Contains(fmt.Sprint(waiting["message"]), "waiting for a person to approve") {
			t.Fatalf("first line = %v, want a progress notification naming the approval", waiting)
		}
		if _, err := os.Stat(target); err == nil {
			t.Fatal("the file was written before the approval")
		}
		if err := person.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": true}, nil); err != nil {
			t.Fatal(err)
		}
		if isErr, text := result(t, next(t, lines)); isErr {
			t.Fatalf("after the approval: %q", text)
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "written once approved" {
			t.Fatalf("the file after the approval: %q %v", b, err)
		}
	})

	t.Run("a denial is read as isError", func(t *testing.T) {
		isErr, text := result(t, next(t, g.client(t, g.scoutToken, false, "", "call", "mcp_files_write_file", fmt.Sprintf(`{"path":%q,"content":"no"}`, filepath.Join(g.root, "denied.txt")))))
		if !isErr || !strings.Contains(text, "agent 'scout' may not take full_access actions") {
			t.Fatalf("scout's write = %v %q, want isError naming the posture", isErr, text)
		}
		if _, err := os.Stat(filepath.Join(g.root, "denied.txt")); err == nil {
			t.Fatal("a denied write was made")
		}
	})

	t.Run("a wrong token gets 401", func(t *testing.T) {
		v := next(t, g.client(t, "not-a-token", false, "", "list"))
		if code, _ := v["code"].(float64); code != 401 || !strings.Contains(fmt.Sprint(v["error"]), "auth-token") {
			t.Fatalf("a wrong token: %v, want HTTP 401 saying where the token is", v)
		}
	})
}

func TestMCPOverStdioWithTheTypeScriptClient(t *testing.T) {
	g := startMCPGateway(t)
	// As the agent scout, its token from CAR_AGENT_TOKEN.
	scout := toolNames(t, next(t, g.client(t, g.scoutToken, true, "scout", "list")))
	if !slices.Equal(scout, []string{"mcp_files_list_directory", "mcp_files_read_text_file"}) {
		t.Fatalf("agent scout's tools over stdio = %v", scout)
	}
	isErr, text := result(t, next(t, g.client(t, g.scoutToken, true, "scout", "call", "mcp_files_read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(g.root, "hello.txt")))))
	if isErr || text != "hello through the gateway" {
		t.Fatalf("read over stdio = %v %q", isErr, text)
	}
	isErr, text = result(t, next(t, g.client(t, g.scoutToken, true, "scout", "call", "mcp_files_write_file", fmt.Sprintf(`{"path":%q,"content":"no"}`, filepath.Join(g.root, "x.txt")))))
	if !isErr || !strings.Contains(text, "may not take full_access actions") {
		t.Fatalf("denied write over stdio = %v %q", isErr, text)
	}
	// As a plain client, with the daemon's token file.
	plain := toolNames(t, next(t, g.client(t, "", true, "", "list")))
	if len(plain) != 3 {
		t.Fatalf("plain client's tools over stdio = %v", plain)
	}
	// A wait for a person, its progress forwarded, released on another
	// connection.
	person := hostOf(t, g.d)
	if err := person.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(g.root, "stdio.txt")
	lines := g.client(t, "", true, "", "call", "mcp_files_write_file", fmt.Sprintf(`{"path":%q,"content":"over stdio"}`, target))
	id, _ := next(t, lines)["waiting"].(string)
	if id == "" {
		t.Fatal("no progress naming the approval came through car-server mcp")
	}
	if err := person.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": true}, nil); err != nil {
		t.Fatal(err)
	}
	if isErr, text := result(t, next(t, lines)); isErr {
		t.Fatalf("after the approval over stdio: %q", text)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "over stdio" {
		t.Fatalf("the file after the approval: %q %v", b, err)
	}
}

// The example of examples/mcp/README.md, as CI runs it.
func TestMCPExample(t *testing.T) {
	g := startMCPGateway(t)
	cmd := exec.Command("node", "client.mjs", "demo")
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "CAR_MCP_URL=http://"+g.d.mcpAddr+"/mcp", "CAR_MCP_TOKEN="+g.scoutToken, "CAR_DEMO_FILE="+filepath.Join(g.root, "hello.txt"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client.mjs demo: %v\n%s", err, out)
	}
	wantLines(t, out, "tool mcp_files_read_text_file (read_only)", "read "+filepath.Join(g.root, "hello.txt")+": hello through the gateway")
}

// car-server mcp says the daemon is down, and exits non-zero.
func TestMCPCommandWhenTheDaemonIsDown(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), "CAR_HOME="+home, "CAR_MCP_BIND=127.0.0.1:1", "CAR_NO_AUTH=1")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != exitFailed || !strings.Contains(string(out), "not reachable") || !strings.Contains(string(out), "is the daemon running") {
		t.Fatalf("car-server mcp with no daemon: %d %s", code, out)
	}
}

// car-server mcp exits 0 when its client closes stdin.
func TestMCPCommandExitsWhenStdinCloses(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), "CAR_HOME="+d.home, "CAR_MCP_BIND="+d.mcpAddr)
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); exitCode(t, err) != exitOK {
		t.Fatalf("car-server mcp after stdin closed: %v %s", err, out)
	}
}

func TestIssueTokenPrintsAnMCPClientConfiguration(t *testing.T) {
	home := t.TempDir()
	out, errOut, code := agentsCommand(t, []string{"CAR_HOME=" + home, "CAR_MCP_BIND=127.0.0.1:9102"}, "issue-token", "claude", "--mcp-config")
	if code != exitOK {
		t.Fatalf("issue-token --mcp-config: %d %s", code, errOut)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	s := cfg.MCPServers["car-server"]
	token, ok := strings.CutPrefix(s.Headers["Authorization"], "Bearer ")
	if s.Type != "http" || s.URL != "http://127.0.0.1:9102/mcp" || !ok || len(token) != 43 {
		t.Fatalf("configuration = %+v", cfg)
	}
	// The token printed is the agent's current token.
	list, _, _ := agentsCommand(t, []string{"CAR_HOME=" + home}, "list")
	if !strings.Contains(list, "claude") {
		t.Fatalf("agents list after issue-token --mcp-config: %s", list)
	}
	if _, errOut, code := agentsCommand(t, []string{"CAR_HOME=" + home, "CAR_MCP_BIND=disabled"}, "issue-token", "claude", "--mcp-config"); code != exitUsage || !strings.Contains(errOut, "disabled") {
		t.Fatalf("--mcp-config with the endpoint disabled: %d %s", code, errOut)
	}
}

// mcp_bind disabled opens no MCP listener; beyond loopback it needs auth.
func TestMCPBindDisabledAndBeyondLoopbackWithoutAuth(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "CAR_MCP_BIND=disabled")
	if d.mcpAddr != "" {
		t.Fatalf("mcp_bind disabled, yet the daemon serves MCP on %s", d.mcpAddr)
	}
	out, code := runBinary(t, "--home", t.TempDir(), "--port", "0", "--socket", "off", "--no-auth", "--mcp-bind", "0.0.0.0:0")
	if code != 2 || !strings.Contains(out, "refusing to serve MCP on 0.0.0.0:0 without auth") {
		t.Fatalf("MCP beyond loopback without auth: %d %s", code, out)
	}
}
