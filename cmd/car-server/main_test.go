package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/client"
)

// These tests run the real binary as a separate process.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "car-server-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "car-server")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build car-server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const waitLimit = 20 * time.Second

// daemon is a running car-server process.
type daemon struct {
	cmd   *exec.Cmd
	addr  string
	token string
	home  string
	logs  chan map[string]any
}

// startDaemon runs the binary on a fresh state root and waits for its
// "listening" log line.
func startDaemon(t *testing.T, home string, extraEnv ...string) *daemon {
	t.Helper()
	cmd := exec.Command(binary, "--port", "0")
	cmd.Env = append(os.Environ(), append([]string{"CAR_HOME=" + home}, extraEnv...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, home: home, logs: make(chan map[string]any, 256)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				select {
				case d.logs <- line:
				default:
				}
			}
		}
		close(d.logs)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := d.waitLog(t, "car-server listening")
	d.addr = line["addr"].(string)
	if tf, _ := line["token_file"].(string); tf != "" {
		b, err := os.ReadFile(tf)
		if err != nil {
			t.Fatalf("read token file: %v", err)
		}
		d.token = string(b)
	}
	return d
}

// dial connects an authenticated, negotiated client; the caller closes it.
func (d *daemon) dial(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+d.addr+"/", &client.Options{Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (d *daemon) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-d.logs:
			if !ok {
				t.Fatalf("daemon exited before logging %q", msg)
			}
			if line["msg"] == msg {
				return line
			}
		case <-timer.C:
			t.Fatalf("no %q log line within %s", msg, waitLimit)
		}
	}
}

func TestTokenFileLifecycleAndGracefulShutdown(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	tokenPath := filepath.Join(home, "ai.parslee.car", "auth-token")
	st, err := os.Stat(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	dirSt, _ := os.Stat(filepath.Dir(tokenPath))
	if st.Mode().Perm() != 0o600 || dirSt.Mode().Perm() != 0o700 || len(d.token) != 43 {
		t.Fatalf("token file %v in dir %v, token length %d", st.Mode(), dirSt.Mode(), len(d.token))
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
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
	u.Close()

	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "operator policies reloaded")

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(waitLimit):
		t.Fatal("client not disconnected on shutdown")
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if _, err := os.Stat(tokenPath); !os.IsNotExist(err) {
		t.Fatalf("token file not removed on shutdown: %v", err)
	}
	for line := range d.logs {
		if strings.Contains(fmt.Sprint(line), d.token) {
			t.Fatalf("the token appears in a log line: %v", line)
		}
	}
}

func TestShutdownClosesWithGoingAway(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "CAR_NO_AUTH=1")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+d.addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _, err = ws.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("want close 1001, got %v", err)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
}

func TestSecondDaemonOnSameRootNamesTheHolder(t *testing.T) {
	home := t.TempDir()
	first := startDaemon(t, home)
	out, err := exec.Command(binary, "--port", "0", "--home", home).CombinedOutput()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("second daemon: want exit 1, got %v: %s", err, out)
	}
	want := fmt.Sprintf("pid %d", first.cmd.Process.Pid)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "daemon.lock") {
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
		{"version", []string{"--version"}, nil, 0, "car-server "},
		{"unknown flag", []string{"--frobnicate"}, nil, 2, "unknown flag"},
		{"bad duration", []string{"--handler-timeout", "soon"}, []string{"CAR_HOME=/tmp"}, 2, "handler_timeout"},
		{"no auth beyond loopback", []string{"--no-auth", "--bind", "0.0.0.0", "--port", "0", "--socket", "off"}, nil, 2, "without auth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary, tc.args...)
			cmd.Env = append(os.Environ(), "CAR_HOME="+t.TempDir())
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
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
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
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
	_ = d.cmd.Process.Signal(syscall.SIGHUP)
	d.waitLog(t, "operator policies reloaded")
	if got := names(); got != "operator:deny_tool:deploy,operator:deny_keyword:DROP TABLE" {
		t.Fatalf("after a good reload: %s", got)
	}

	write("30-bad.toml", "deny_tools = [\"x\"]")
	_ = d.cmd.Process.Signal(syscall.SIGHUP)
	line := d.waitLog(t, "policy reload failed; the previous rules stay in force")
	if !strings.Contains(fmt.Sprint(line["error"]), "30-bad.toml") {
		t.Fatalf("the reload error should name the file: %v", line)
	}
	if got := names(); got != "operator:deny_tool:deploy,operator:deny_keyword:DROP TABLE" {
		t.Fatalf("a bad reload changed the rules: %s", got)
	}

	// The same directory refuses a start, naming the file.
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
	out, err := exec.Command(binary, "--home", home, "--port", "0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "30-bad.toml") || !strings.Contains(string(out), "unknown key deny_tools") {
		t.Fatalf("start with a bad policy file: %v\n%s", err, out)
	}
}

func TestPolicyCheckCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.toml"), []byte(`deny_tool = ["rm", "deploy"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "policy", "check", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: 2 rules from 1 files") || !strings.Contains(string(out), "deny_tool:rm") {
		t.Fatalf("good dir: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.toml"), []byte("[[trace_rule]]\nx = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binary, "policy", "check", dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "b.toml") {
		t.Fatalf("bad dir: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "policy").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "usage") {
		t.Fatalf("usage: %v\n%s", err, out)
	}
}
