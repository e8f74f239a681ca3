package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func TestApprovalsSurviveARestart(t *testing.T) {
	home := t.TempDir()
	action := map[string]any{"id": "d", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}}
	plan := map[string]any{"proposal": map[string]any{"actions": []any{action}}}
	decision := func(d *daemon) string {
		t.Helper()
		ctx := ctxT(t)
		c := d.dial(t)
		defer c.Close()
		var res struct {
			Decisions []struct {
				Decision string `json:"decision"`
			} `json:"decisions"`
		}
		if err := c.Call(ctx, protocol.MethodPermissionEvaluate, plan, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Decisions) != 1 {
			t.Fatalf("want one decision, got %+v", res.Decisions)
		}
		return res.Decisions[0].Decision
	}

	d := startDaemon(t, home)
	if got := decision(d); got != "needs_approval" {
		t.Fatalf("before approval: %s", got)
	}
	approver := d.dial(t)
	if err := approver.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"action": action, "reason": "change 42"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := approver.Close(); err != nil {
		t.Fatal(err)
	}
	d.kill(t) // no graceful path: the fsync must have happened

	st, err := os.Stat(filepath.Join(home, "approvals.jsonl"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ledger file: %v %v", st, err)
	}
	d = startDaemon(t, home)
	if got := decision(d); got != "allow" {
		t.Fatalf("after a restart the approval was lost: %s", got)
	}
}
