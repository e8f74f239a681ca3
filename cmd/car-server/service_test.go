package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSystemdNotifyProtocol(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	states := make(chan string, 64)
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		defer close(states)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return // the socket was closed below
			}
			select {
			case states <- string(buf[:n]):
			default:
				t.Errorf("more than %d notify messages unread; dropping %q", cap(states), buf[:n])
			}
		}
	}()
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Error(err)
		}
		<-reading
	})
	next := func(want string) {
		t.Helper()
		deadline := time.After(waitLimit)
		for {
			select {
			case s, ok := <-states:
				if !ok {
					t.Fatalf("notify socket closed before %q", want)
				}
				if s == want {
					return
				}
			case <-deadline:
				t.Fatalf("no %q on the notify socket", want)
			}
		}
	}
	d := startDaemon(t, t.TempDir(), "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=200000")
	next("READY=1")
	next("WATCHDOG=1")
	next("WATCHDOG=1")
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next("STOPPING=1")
	d.stop(t)
}

func TestOperatorSubcommands(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "policies"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "policies", "a.toml"), []byte(`deny_tool = ["deploy"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAR_HOME=" + home}
	run := func(extraEnv []string, args ...string) (string, int) {
		t.Helper()
		cmd := execBinary(args...)
		cmd.Env = append(append(os.Environ(), env...), extraEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), exitCode(t, err)
	}

	// No daemon yet: unreachable.
	if out, code := run(nil, "status"); code != exitUnreachable || !strings.Contains(out, "no daemon answers") {
		t.Fatalf("status without a daemon: %d %s", code, out)
	}
	startDaemon(t, home)

	out, code := run(nil, "status")
	if code != 0 || !strings.Contains(out, "version") || !strings.Contains(out, "proposals in flight") || !strings.Contains(out, "operator policies    1") ||
		!regexpLine(out, "host event ring", "events (", "bytes)") || !regexpLine(out, "stream buffers", "chunks dropped") {
		t.Fatalf("status: %d %s", code, out)
	}
	out, code = run(nil, "status", "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["connections"] != float64(1) {
		t.Fatalf("status --json: %d %s", code, out)
	}
	if out, code = run(nil, "policies"); code != 0 || !strings.Contains(out, "operator") || !strings.Contains(out, "deny_tool:deploy") {
		t.Fatalf("policies: %d %s", code, out)
	}
	if out, code = run(nil, "approvals", "list"); code != 0 || !strings.Contains(out, "empty") {
		t.Fatalf("approvals list: %d %s", code, out)
	}
	fp := "0123456789abcdef0123456789abcdef"
	if out, code = run(nil, "approvals", "approve", fp, "--tier", "full_access", "--reason", "change 9"); code != 0 || !strings.Contains(out, fp+" approved at full_access") {
		t.Fatalf("approve: %d %s", code, out)
	}
	if out, code = run(nil, "approvals", "list", "--json"); code != 0 || !strings.Contains(out, `"reason":"change 9"`) || !strings.Contains(out, `"reviewer":"person:operator"`) {
		t.Fatalf("approvals list --json: %d %s", code, out)
	}
	if out, code = run(nil, "approvals", "reject", fp, "--tier", "bogus"); code != exitFailed || !strings.Contains(out, "unknown tier") {
		t.Fatalf("reject with a bad tier: %d %s", code, out)
	}
	if out, code = run(nil, "approvals", "approve", fp); code != exitUsage || !strings.Contains(out, "--tier is required") {
		t.Fatalf("approve without --tier: %d %s", code, out)
	}
	if out, code = run([]string{"CAR_AUTH_TOKEN=not-the-token"}, "status"); code != exitAuth || !strings.Contains(out, "refused the token") {
		t.Fatalf("wrong token: %d %s", code, out)
	}
	if out, code = run(nil, "approvals", "frobnicate"); code != exitUsage || !strings.Contains(out, "usage") {
		t.Fatalf("usage: %d %s", code, out)
	}
}
