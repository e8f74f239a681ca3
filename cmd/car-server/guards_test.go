package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// stateOf reads one unscoped key.
func stateOf(t *testing.T, c *client.Client, key string) any {
	t.Helper()
	var v any
	if err := c.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": key}, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestACheckpointOutlivesARestart(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	c := d.dial(t)
	set := func(c *client.Client, v string) {
		t.Helper()
		if err := c.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "plan", "value": v}, nil); err != nil {
			t.Fatal(err)
		}
	}
	set(c, "v1")
	var saved protocol.CheckpointSaveResult
	if err := c.Call(ctxT(t), protocol.MethodCheckpointSave, map[string]any{"name": "v1"}, &saved); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, "checkpoints", saved.CheckpointID+".json")
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("checkpoint file: %v %v", st, err)
	}
	set(c, "v2")
	restore := func(c *client.Client) error {
		return c.Call(ctxT(t), protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": saved.CheckpointID}, nil)
	}
	err := restore(c)
	m := regexp.MustCompile(`approve fingerprint ([0-9a-f]{32})`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("an unapproved restore: %v", err)
	}
	if err := c.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"fingerprint": m[1], "required_tier": "full_access"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := restore(c); err != nil {
		t.Fatal(err)
	}
	if v := stateOf(t, c, "plan"); v != "v1" {
		t.Fatalf("after the restore: %v", v)
	}
	c.Close()
	d.stop(t)

	// A new daemon starts with empty state; the checkpoint and the
	// approval to restore it are on disk.
	d = startDaemon(t, home)
	c = d.dial(t)
	defer c.Close()
	if v := stateOf(t, c, "plan"); v != nil {
		t.Fatalf("state survived a restart without a restore: %v", v)
	}
	if err := restore(c); err != nil {
		t.Fatal(err)
	}
	if v := stateOf(t, c, "plan"); v != "v1" {
		t.Fatalf("after the restart and restore: %v", v)
	}

	// A corrupt file is refused, naming it.
	if err := os.WriteFile(path, []byte(`{"checkpoint_id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := restore(c); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("restoring a corrupt file: %v", err)
	}
}

func TestToolLabelsLoadReloadAndRefuseAStart(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "tool-labels.json")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"tools": {"read_notes": {"source": true, "labels": ["secret"]}}, "orderings": [{"first": "a", "then": "b"}]}`)
	d := startDaemon(t, home)
	// The start's log line came before "listening", which startDaemon waited for.
	if logs, err := os.ReadFile(d.logPath); err != nil || !regexp.MustCompile(`"tool labels loaded".*"orderings":1`).Match(logs) {
		t.Fatalf("no start log of the labels file: %v\n%s", err, logs)
	}

	write(`{"tools": {}, "orderings": []}`)
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := d.waitLog(t, "tool labels reloaded"); line["orderings"] != float64(0) {
		t.Fatalf("reload log %v", line)
	}
	write(`{"tools": {}, "sinks": ["x"]}`)
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := d.waitLog(t, "tool labels reload failed; the previous labels stay in force"); !strings.Contains(fmt.Sprint(line["error"]), path) {
		t.Fatalf("the reload error should name the file: %v", line)
	}

	d.stop(t)
	if out, code := runBinary(t, "--home", home, "--port", "0"); code != 1 || !strings.Contains(out, path) || !strings.Contains(out, `unknown field "sinks"`) {
		t.Fatalf("start with a malformed labels file: exit %d\n%s", code, out)
	}
}
