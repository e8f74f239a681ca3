package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// The examples in examples/ run here, each with its interpreter, against a
// daemon started for the test. Locally a missing interpreter skips the test
// and names the package to install; under CI=true it fails.

// needTool finds an interpreter (or checks it with probe), else skips or,
// in CI, fails.
func needTool(t *testing.T, install string, name string, probe ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && len(probe) > 0 {
		if perr := exec.Command(path, probe...).Run(); perr != nil {
			err = &exec.Error{Name: name + " " + strings.Join(probe, " "), Err: perr}
		}
	}
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v: CI runs every example; install %s", err, install)
	}
	t.Skipf("%v: install %s to run this example", err, install)
	return ""
}

// python is the interpreter the Python examples use: the distribution's,
// which python3-websockets serves.
func python(t *testing.T) string {
	t.Helper()
	name := "python3"
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		name = "/usr/bin/python3"
	}
	return needTool(t, "python3-websockets (apt-get install python3-websockets)", name, "-c", "import websockets")
}

// example runs an example program with the daemon's address and home.
func example(d *daemon, prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(prog, args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CAR_HOME="+d.home, "CAR_URL=ws://"+d.addr+"/", "CAR_SERVER="+binary)
	return cmd
}

// wantLines fails unless out holds every line of want.
func wantLines(t *testing.T, out []byte, want ...string) {
	t.Helper()
	for _, w := range want {
		if !bytes.Contains(out, []byte(w+"\n")) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestShellExample(t *testing.T) {
	needTool(t, "bash", "bash")
	needTool(t, "jq (apt-get install jq)", "jq")
	d := startDaemon(t, t.TempDir())
	out, err := example(d, "bash", "examples/shell/demo.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	wantLines(t, out, "state.get greeting: hello from bash", "verify valid: true", `verify levels: [["mark"],["check"]]`)
}

func TestPythonAgentExample(t *testing.T) {
	py := python(t)
	d := startDaemon(t, t.TempDir())
	out, err := example(d, py, "examples/python/agent.py").CombinedOutput()
	if err != nil {
		t.Fatalf("agent.py: %v\n%s", err, out)
	}
	wantLines(t, out,
		"registered 2 tools",
		`a1 succeeded {"price": 42.5, "symbol": "CAR"}`,
		`a2 succeeded "CAR at 42.50"`,
		`a3 succeeded "CAR at 42.50"`,
		`state quote = "CAR at 42.50"`)
}

// TestPythonSubtaskExample: multi.subtask over the real daemon; the main
// agent spawns two sub-agents by a proposal on its own connection, each
// with a subset of its tools, and one asking for more is rejected.
func TestPythonSubtaskExample(t *testing.T) {
	py := python(t)
	d := startDaemon(t, t.TempDir())
	out, err := example(d, py, "examples/python/subtask.py").CombinedOutput()
	if err != nil {
		t.Fatalf("subtask.py: %v\n%s", err, out)
	}
	wantLines(t, out,
		"main agent lead has tools read_file, search, spawn_subtask",
		"sub-agent doc-reader has tools read_file",
		"sub-agent code-searcher has tools search, read_file",
		"spawn with shell: rejected",
		"final answer: doc-reader is done / code-searcher is done",
		"subtask code-searcher (code): code-searcher is done",
		"subtask doc-reader (docs): doc-reader is done",
		"agents spawned: 2")
}

// TestPythonLedgerExample: the fenced ledger refuses the older of two
// identical idempotent calls in flight (epoch 1, after epoch 2 posted); the
// daemon stores the newer call's result, and the ledger holds one entry.
func TestPythonLedgerExample(t *testing.T) {
	py := python(t)
	d := startDaemon(t, t.TempDir())
	out, err := example(d, py, "examples/python/ledger.py").CombinedOutput()
	if err != nil {
		t.Fatalf("ledger.py: %v\n%s", err, out)
	}
	wantLines(t, out,
		`newer succeeded {"account": "acme", "amount": 5, "epoch": 2}`,
		"older failed: stale epoch 1: the ledger has seen epoch 2 for this key",
		`again succeeded cache_hit=idempotency {"account": "acme", "amount": 5, "epoch": 2}`,
		"ledger acme: 1 entry, 5")
}

// TestPythonApproverExample: a proposal that needs full_access parks while
// the approver is subscribed, the approver approves it, and it runs.
func TestPythonApproverExample(t *testing.T) {
	py := python(t)
	d := startDaemon(t, t.TempDir())
	cmd := example(d, py, "examples/python/approver.py", "--once")
	lines := newLineWatch()
	cmd.Stdout, cmd.Stderr = lines, lines
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		defer close(exited)
		exitErr = cmd.Wait()
		lines.close()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // fails harmlessly once it has exited
		<-exited
	})
	text := func(want string) func(map[string]any) bool {
		return func(line map[string]any) bool { s, _ := line["text"].(string); return strings.Contains(s, want) }
	}
	if _, _, err := lines.waitFor(ctxT(t), 0, text("waiting for approval requests")); err != nil {
		t.Fatalf("the approver never subscribed: %v", err)
	}

	c := d.dial(t)
	defer c.Close()
	c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return "deployed", nil
	})
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "deploy_service"}}, nil); err != nil {
		t.Fatal(err)
	}
	var res protocol.ProposalResult
	err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}},
	}}}, &res)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the approved proposal did not run: %+v", res.Results)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("approver.py: %v", exitErr)
		}
	case <-ctxT(t).Done():
		t.Fatal("approver.py --once did not exit after its decision")
	}
	if _, _, err := lines.waitFor(ctxT(t), 0, text("approved approval-")); err != nil {
		t.Fatalf("the approver printed no decision: %v", err)
	}
}

// TestCallCommand: one request, its result as JSON on stdout; errors on
// stderr with the operator commands' exit codes.
func TestCallCommand(t *testing.T) {
	home := t.TempDir()
	run := func(stdin string, extraEnv []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := execBinary(append([]string{"call"}, args...)...)
		cmd.Env = append(append(os.Environ(), "CAR_HOME="+home), extraEnv...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(t, cmd.Run())
		return stdout.String(), stderr.String(), code
	}
	if _, errOut, code := run("", nil, "state.get", `{"key":"k"}`); code != exitUnreachable || !strings.Contains(errOut, "no daemon answers") {
		t.Fatalf("call without a daemon: %d %s", code, errOut)
	}
	startDaemon(t, home)
	if out, errOut, code := run("", nil, "state.set", `{"key":"k","value":[1,2]}`); code != exitOK || out != "\"ok\"\n" {
		t.Fatalf("state.set: %d %q %s", code, out, errOut)
	}
	if out, errOut, code := run(`{"key":"k"}`, nil, "state.get", "-"); code != exitOK || out != "[1,2]\n" {
		t.Fatalf("state.get from stdin: %d %q %s", code, out, errOut)
	}
	if out, errOut, code := run("", nil, "rpc.discover"); code != exitOK || !strings.Contains(out, `"openrpc":"1.3.2"`) {
		t.Fatalf("rpc.discover: %d %.200s %s", code, out, errOut)
	}
	if out, errOut, code := run("", nil, "no.such.method"); code != exitFailed || out != "" || !strings.Contains(errOut, "error -32601: method not found: 'no.such.method'") {
		t.Fatalf("unknown method: %d %q %s", code, out, errOut)
	}
	if _, errOut, code := run("", nil, "state.get", `{key}`); code != exitUsage || !strings.Contains(errOut, "not valid JSON") {
		t.Fatalf("bad params: %d %s", code, errOut)
	}
	if _, errOut, code := run("", nil, "state.get", `5`); code != exitUsage || !strings.Contains(errOut, "must be a JSON object or array") {
		t.Fatalf("scalar params: %d %q", code, errOut)
	}
	if _, errOut, code := run("", nil); code != exitUsage || !strings.Contains(errOut, "usage: car-server call METHOD") {
		t.Fatalf("no method: %d %s", code, errOut)
	}
	if _, errOut, code := run("", []string{"CAR_AUTH_TOKEN=not-the-token"}, "state.keys"); code != exitAuth || !strings.Contains(errOut, "refused the token") {
		t.Fatalf("wrong token: %d %s", code, errOut)
	}
}

func TestTypeScriptExample(t *testing.T) {
	needTool(t, "nodejs and npm (apt-get install nodejs npm)", "node")
	npm := needTool(t, "nodejs and npm (apt-get install nodejs npm)", "npm")
	dir := filepath.Join("..", "..", "examples", "typescript")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "tsx")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the TypeScript example's packages are not installed (cd examples/typescript && npm ci): %v", err)
		}
		t.Skipf("run cd examples/typescript && npm ci to run this example: %v", err)
	}
	check := exec.Command(npm, "run", "--silent", "check")
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the example does not type-check against the generated types: %v\n%s", err, out)
	}
	d := startDaemon(t, t.TempDir())
	cmd := example(d, filepath.Join("node_modules", ".bin", "tsx"), "agent.ts")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent.ts: %v\n%s", err, out)
	}
	wantLines(t, out,
		"registered 2 tools",
		`a1 succeeded {"price":42.5,"symbol":"CAR"}`,
		`a2 succeeded "CAR at 42.50"`,
		`a3 succeeded "CAR at 42.50"`,
		`state quote = "CAR at 42.50"`)
}
