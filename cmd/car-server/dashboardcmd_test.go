package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDashboardPrintsTheLinkWithTheHostTokenInTheFragment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CAR_HOME", home)
	t.Setenv("CAR_HOST_TOKEN", "")
	os.Unsetenv("CAR_HOST_TOKEN")
	if err := os.MkdirAll(filepath.Join(home, "ai.parslee.car"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "ai.parslee.car", "host-token"), []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runDashboardCommand([]string{"--port", "9123", "--bind", "0.0.0.0"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got != "http://127.0.0.1:9123/ui/#host_token=file-token" {
		t.Fatalf("printed %q", got)
	}

	// A pinned token wins over the file.
	t.Setenv("CAR_HOST_TOKEN", "pinned")
	out.Reset()
	if code := runDashboardCommand([]string{"--port", "9123"}, &out, &errb); code != exitOK || !strings.HasSuffix(strings.TrimSpace(out.String()), "#host_token=pinned") {
		t.Fatalf("exit %d, printed %q", code, out.String())
	}
}

func TestDashboardWithoutARunningDaemonSaysSo(t *testing.T) {
	t.Setenv("CAR_HOME", t.TempDir())
	t.Setenv("CAR_HOST_TOKEN", "")
	os.Unsetenv("CAR_HOST_TOKEN")
	var out, errb bytes.Buffer
	if code := runDashboardCommand(nil, &out, &errb); code != exitUnreachable || !strings.Contains(errb.String(), "is the daemon running") || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if code := runDashboardCommand([]string{"--nonsense"}, &out, &errb); code != exitUsage {
		t.Fatalf("a bad flag: exit %d", code)
	}
}

// The link names the port the running daemon listens on, whatever the port
// setting of the shell that asks: the daemon is asked over its socket.
func TestDashboardAsksTheRunningDaemonForItsPort(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home) // on --port 0: a port the settings do not know
	cmd := execBinary("dashboard")
	cmd.Env = append(os.Environ(), "CAR_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(t, cmd.Run()); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	_, port, _ := strings.Cut(d.addr, ":")
	if got := strings.TrimSpace(stdout.String()); !strings.HasPrefix(got, "http://127.0.0.1:"+port+"/ui/#host_token=") {
		t.Fatalf("printed %q, want the daemon's port %s", got, port)
	}
}
