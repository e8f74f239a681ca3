package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

// These tests run the real binary as a separate process.

var binary string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests builds the daemon, runs the tests, and then fails the package
// when a test left a goroutine running.
func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "car-server-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "make a directory for the test binary: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "car-server")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build car-server: %v\n%s", err, out)
		return 1
	}
	// Every daemon a test starts serves MCP on a free port, read from its
	// log (mcp_addr): several run at once, and 9102 is one port.
	os.Setenv("CAR_MCP_BIND", "127.0.0.1:0")
	code := m.Run()
	pgtest.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// waitLimit bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const waitLimit = 20 * time.Second

// ctxT is a context that ends with the test, bounded by waitLimit.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// daemon is a running car-server process.
type daemon struct {
	cmd     *exec.Cmd
	addr    string
	mcpAddr string // host:port of the MCP endpoint
	token   string
	home    string
	logPath string        // everything the daemon wrote to stderr
	logs    *lineWatch    // the same lines, parsed, for waitLog
	cursor  int           // lines before this one were already waited for
	exited  chan struct{} // closed once the process has been reaped
	exitErr error         // cmd.Wait's error; read after exited is closed
	crashed bool          // the test killed it on purpose
	termed  bool          // SIGTERM was sent: a second one could land after the daemon stops catching it
}

// startDaemon is the one way these tests start the daemon: the binary on a
// state root, waited for until it logs "listening". The test's cleanup
// stops it with SIGTERM within waitLimit (a daemon that does not stop
// fails the test) and fails the test when its log holds a race report.
func startDaemon(t *testing.T, home string, extraEnv ...string) *daemon {
	t.Helper()
	cmd := exec.Command(binary, "--port", "0")
	cmd.Env = append(os.Environ(), append([]string{"CAR_HOME=" + home}, extraEnv...)...)
	logFile, err := os.CreateTemp(t.TempDir(), "car-server-*.log")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, home: home, logPath: logFile.Name(), logs: newLineWatch(), exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(logFile, d.logs)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		defer close(d.exited)
		d.exitErr = cmd.Wait() // returns once stderr is copied out in full
		d.logs.close()
		logFile.Close()
	}()
	t.Cleanup(func() {
		if err := d.signal(syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		if err := d.wait(); err != nil && !d.crashed {
			t.Errorf("daemon exit: %v", err)
		}
		if data, err := os.ReadFile(d.logPath); err != nil {
			t.Error(err)
		} else if bytes.Contains(data, []byte("WARNING: DATA RACE")) {
			t.Errorf("the daemon reported a data race:\n%s", data)
		}
	})
	line := d.waitLog(t, "car-server listening")
	d.addr = line["addr"].(string)
	d.mcpAddr, _ = line["mcp_addr"].(string)
	if tf, _ := line["token_file"].(string); tf != "" {
		b, err := os.ReadFile(tf)
		if err != nil {
			t.Fatalf("read token file: %v", err)
		}
		d.token = string(b)
	}
	return d
}

// signal sends sig unless the process has already exited; SIGTERM is sent
// once, since the shutdown it starts is what the tests wait for.
func (d *daemon) signal(sig os.Signal) error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	if sig == syscall.SIGTERM {
		if d.termed {
			return nil
		}
		d.termed = true
	}
	if err := d.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v to the daemon: %w", sig, err)
	}
	return nil
}

// wait waits up to waitLimit for the process to exit and returns its exit
// error; a process still running then is killed and reported.
func (d *daemon) wait() error {
	select {
	case <-d.exited:
		return d.exitErr
	case <-time.After(waitLimit):
		_ = d.cmd.Process.Kill() // it is reported below; Kill's own error adds nothing
		<-d.exited
		return fmt.Errorf("the daemon did not exit within %s and was killed", waitLimit)
	}
}

// stop sends SIGTERM and fails the test unless the daemon exits cleanly.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
}

// kill ends the daemon with SIGKILL, as a crash would, and reaps it.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	if err := d.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.crashed = true
	err := d.wait()
	if ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the daemon was to end by SIGKILL: %v", err)
	}
}

// dial connects an authenticated, negotiated client; the caller closes it.
func (d *daemon) dial(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitLog waits for the next log line, after those already waited for,
// whose msg is msg.
func (d *daemon) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	line, next, err := d.logs.wait(ctxT(t), d.cursor, msg)
	if err != nil {
		t.Fatalf("no %q log line: %v", msg, err)
	}
	d.cursor = next
	return line
}

func TestTokenFileLifecycleAndGracefulShutdown(t *testing.T) {
	home := t.TempDir()
	// At debug level, so that a token leaking into any log line shows.
	d := startDaemon(t, home, "CAR_LOG_LEVEL=debug")
	tokenPath := filepath.Join(home, "ai.parslee.car", "auth-token")
	st, err := os.Stat(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	dirSt, err := os.Stat(filepath.Dir(tokenPath))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || dirSt.Mode().Perm() != 0o700 || len(d.token) != 43 {
		t.Fatalf("token file %v in dir %v, token length %d", st.Mode(), dirSt.Mode(), len(d.token))
	}
	hostTokenPath := filepath.Join(home, "ai.parslee.car", "host-token")
	hostToken, err := os.ReadFile(hostTokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if hst, err := os.Stat(hostTokenPath); err != nil || hst.Mode().Perm() != 0o600 || len(hostToken) != 43 || string(hostToken) == d.token {
		t.Fatalf("host token file %v (%v), length %d, distinct from the auth token: %v", hst.Mode(), err, len(hostToken), string(hostToken) != d.token)
	}

	ctx := ctxT(t)
	c := d.dial(t)
	defer c.Close()
	// The same daemon answers on its Unix socket.
	u, err := client.Dial(ctx, "ws://car-server/", &client.Options{Token: d.token, SocketPath: filepath.Join(home, "run", "car-server.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Call(ctx, "state.set", map[string]any{"key": "via", "value": "socket"}, nil); err != nil {
		t.Fatal(err)
	}
	var via string
	if err := c.Call(ctx, "state.get", map[string]any{"key": "via"}, &via); err != nil || via != "socket" {
		t.Fatalf("state across transports: %q %v", via, err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}

	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "operator policies reloaded")

	d.stop(t)
	select {
	case <-c.Done():
	case <-time.After(waitLimit):
		t.Fatal("client not disconnected on shutdown")
	}
	if _, err := os.Stat(tokenPath); !os.IsNotExist(err) {
		t.Fatalf("token file not removed on shutdown: %v", err)
	}
	if _, err := os.Stat(hostTokenPath); !os.IsNotExist(err) {
		t.Fatalf("host token file not removed on shutdown: %v", err)
	}
	// The whole of stderr, read once the process has exited: nothing a log
	// reader skipped or dropped escapes the check.
	logs, err := os.ReadFile(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"car-server listening", "operator policies reloaded", `"level":"debug"`} {
		if !bytes.Contains(logs, []byte(want)) {
			t.Fatalf("the captured log lacks %q, so it cannot show a leak:\n%s", want, logs)
		}
	}
	for _, tok := range []string{d.token, string(hostToken)} {
		if i := bytes.Index(logs, []byte(tok)); i >= 0 {
			t.Fatalf("a token appears in the log at byte %d:\n%s", i, logs)
		}
	}
}

func TestShutdownClosesWithGoingAway(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "CAR_NO_AUTH=1")
	ctx := ctxT(t)
	ws, _, err := websocket.Dial(ctx, "ws://"+d.addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _, err = ws.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("want close 1001, got %v", err)
	}
	d.stop(t)
}

func TestSecondDaemonOnSameRootNamesTheHolder(t *testing.T) {
	home := t.TempDir()
	first := startDaemon(t, home)
	out, code := runBinary(t, "--port", "0", "--home", home)
	if code != 1 {
		t.Fatalf("second daemon: want exit 1, got %d: %s", code, out)
	}
	want := fmt.Sprintf("pid %d", first.cmd.Process.Pid)
	if !strings.Contains(out, want) || !strings.Contains(out, "daemon.lock") {
		t.Fatalf("message should name %s and the lock: %s", want, out)
	}
}

func TestCommandLine(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      []string
		code     int
		contains string
	}{
		{"relative home", nil, []string{"CAR_HOME=relative/dir"}, 2, `CAR_HOME must be an absolute path, got "relative/dir"`},
		{"help", []string{"--help"}, nil, 0, "CAR_HANDLER_TIMEOUT"},
		{"help lists the subcommands", []string{"--help"}, nil, 0, "policy check [DIR]"},
		{"version", []string{"--version"}, nil, 0, "car-server "},
		{"unknown flag", []string{"--frobnicate"}, nil, 2, "unknown flag"},
		{"bad duration", []string{"--handler-timeout", "soon"}, []string{"CAR_HOME=/tmp"}, 2, "handler_timeout"},
		{"no auth beyond loopback", []string{"--no-auth", "--bind", "0.0.0.0", "--port", "0", "--socket", "off"}, nil, 2, "without auth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := execBinary(tc.args...)
			cmd.Env = append(os.Environ(), "CAR_HOME="+t.TempDir())
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			code := exitCode(t, err)
			if code != tc.code || !strings.Contains(string(out), tc.contains) {
				t.Fatalf("exit %d (want %d), output:\n%s\nwant it to contain %q", code, tc.code, out, tc.contains)
			}
		})
	}
}

func TestOperatorPoliciesLoadAndReload(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "policies")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("10-base.toml", `deny_tool = ["deploy"]`)
	d := startDaemon(t, home)
	ctx := ctxT(t)
	c := d.dial(t)
	defer c.Close()
	names := func() string {
		var list struct {
			Policies []struct{ Name, Layer string } `json:"policies"`
		}
		if err := c.Call(ctx, "policy.list", nil, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list.Policies {
			out = append(out, p.Layer+":"+p.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "operator:deny_tool:deploy" {
		t.Fatalf("at start: %s", got)
	}

	write("20-more.toml", "deny_keyword = [\"DROP TABLE\"]")
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "operator policies reloaded")
	if got := names(); got != "operator:deny_tool:deploy,operator:deny_keyword:DROP TABLE" {
		t.Fatalf("after a good reload: %s", got)
	}

	write("30-bad.toml", "deny_tools = [\"x\"]")
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := d.waitLog(t, "policy reload failed; the previous rules stay in force")
	if !strings.Contains(fmt.Sprint(line["error"]), "30-bad.toml") {
		t.Fatalf("the reload error should name the file: %v", line)
	}
	if got := names(); got != "operator:deny_tool:deploy,operator:deny_keyword:DROP TABLE" {
		t.Fatalf("a bad reload changed the rules: %s", got)
	}

	// The same directory refuses a start, naming the file.
	d.stop(t)
	if out, code := runBinary(t, "--home", home, "--port", "0"); code != 1 || !strings.Contains(out, "30-bad.toml") || !strings.Contains(out, "unknown key deny_tools") {
		t.Fatalf("start with a bad policy file: exit %d\n%s", code, out)
	}
}

func TestPolicyCheckCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.toml"), []byte(`deny_tool = ["rm", "deploy"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinary(t, "policy", "check", dir); code != 0 || !strings.Contains(out, "ok: 2 rules from 1 files") || !strings.Contains(out, "deny_tool:rm") {
		t.Fatalf("good dir: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.toml"), []byte("[[trace_rule]]\nx = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinary(t, "policy", "check", dir); code != 1 || !strings.Contains(out, "b.toml") {
		t.Fatalf("bad dir: exit %d\n%s", code, out)
	}
	// A home without policies/ starts the daemon fine, so the check of the
	// default directory passes; a directory named that does not exist is a
	// typo, and fails naming it.
	cmd := execBinary("policy", "check")
	cmd.Env = append(os.Environ(), "CAR_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 0 || !strings.Contains(string(out), "no policy files") {
		t.Fatalf("missing default dir: exit %d\n%s", code, out)
	}
	missing := filepath.Join(t.TempDir(), "polcies")
	if out, code := runBinary(t, "policy", "check", missing); code != 1 || !strings.Contains(out, missing+" does not exist") {
		t.Fatalf("missing dir: exit %d\n%s", code, out)
	}
	if out, code := runBinary(t, "policy", "check", filepath.Join(dir, "a.toml")); code != 1 || !strings.Contains(out, "is not a directory") {
		t.Fatalf("a file for a dir: exit %d\n%s", code, out)
	}
	if out, code := runBinary(t, "policy"); code != 2 || !strings.Contains(out, "usage") {
		t.Fatalf("usage: exit %d\n%s", code, out)
	}
}
