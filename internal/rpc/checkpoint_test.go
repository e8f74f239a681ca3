package rpc

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// startCheckpointServer is a daemon with an approval ledger and a
// checkpoint directory.
func startCheckpointServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	ledger, _, err := file.OpenApprovals(filepath.Join(dir, "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(filepath.Join(dir, "checkpoints"), 8, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, engine.Options{Approvals: ledger, Checkpoints: store}, ledger.Close)
}

// approveRestore makes the first restore attempt, which must ask for an
// approval naming its fingerprint, and records that approval.
func approveRestore(t *testing.T, tb *toolbox, id string) {
	t.Helper()
	err := tb.Call(ctxT(t), protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": id}, nil)
	code, msg := rpcCode(t, err)
	m := fingerprintRE.FindStringSubmatch(msg)
	if code != protocol.CodeApprovalDenied || m == nil || !strings.Contains(msg, "full_access") {
		t.Fatalf("an unapproved restore: %d %s", code, msg)
	}
	mustCall(t, tb, protocol.MethodPermissionApprove, map[string]any{"fingerprint": m[1], "required_tier": "full_access"}, nil)
}

func TestARestoreIsRefusedWhileAProposalWrites(t *testing.T) {
	ts := startCheckpointServer(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	tb := newToolbox(t, ts, map[string]toolFunc{"hold": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		entered <- struct{}{}
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "k", "value": "saved"}, nil)
	var saved protocol.CheckpointSaveResult
	mustCall(t, tb, protocol.MethodCheckpointSave, map[string]any{"name": "before"}, &saved)
	if saved.CheckpointID == "" || saved.Keys != 1 || saved.Bytes == 0 {
		t.Fatalf("save: %+v", saved)
	}
	approveRestore(t, tb, saved.CheckpointID)

	ch := submitAsync(t, tb.Client, proposal(stateWrite("w", "k", "written"), toolCall("h", "hold", map[string]any{}, "dependencies", []string{"w"})))
	waitCalled(t, entered)
	err := tb.Call(ctxT(t), protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": saved.CheckpointID}, nil)
	if _, msg := rpcCode(t, err); !strings.Contains(msg, "proposals are running") {
		t.Fatalf("a restore while a proposal writes: %s", msg)
	}
	close(release)
	if st := statuses(awaitResult(t, ch, 2)); st["h"] != protocol.StatusSucceeded {
		t.Fatalf("the proposal: %v", st)
	}
	if v, _ := ts.stateValue(t, "", "k"); v != "written" {
		t.Fatalf("the refused restore changed state: %v", v)
	}

	var restored protocol.CheckpointRestoreResult
	mustCall(t, tb, protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": saved.CheckpointID}, &restored)
	if v, _ := ts.stateValue(t, "", "k"); restored.RestoredKeys != 1 || v != "saved" {
		t.Fatalf("after the restore: %+v, k = %v", restored, v)
	}
	ev := eventOf(t, tb.Client, map[string]any{"kinds": []string{string(engine.EventCheckpointRestored)}})
	if ev.Data["checkpoint_id"] != saved.CheckpointID {
		t.Fatalf("checkpoint_restored event %+v", ev)
	}
}

func TestCheckpointListDeleteAndTenants(t *testing.T) {
	ts := startCheckpointServer(t)
	tb := newToolbox(t, ts, map[string]toolFunc{})
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "a", "value": 1, "tenant_id": "t1"}, nil)
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "b", "value": 2}, nil)
	var one protocol.CheckpointSaveResult
	mustCall(t, tb, protocol.MethodCheckpointSave, map[string]any{"tenant_id": "t1"}, &one)
	if one.Keys != 1 {
		t.Fatalf("one tenant's checkpoint holds %d keys", one.Keys)
	}
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "a", "value": 9, "tenant_id": "t1"}, nil)
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "b", "value": 9}, nil)
	approveRestore(t, tb, one.CheckpointID)
	mustCall(t, tb, protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": one.CheckpointID}, nil)
	a, _ := ts.stateValue(t, "t1", "a")
	b, _ := ts.stateValue(t, "", "b")
	if a != json.Number("1") || b != json.Number("9") {
		t.Fatalf("a tenant restore must touch only its tenant: a=%v b=%v", a, b)
	}
	var list struct {
		Checkpoints []checkpoint.Meta `json:"checkpoints"`
	}
	mustCall(t, tb, protocol.MethodCheckpointList, nil, &list)
	if len(list.Checkpoints) != 1 || list.Checkpoints[0].ID != one.CheckpointID || list.Checkpoints[0].Tenant == nil || *list.Checkpoints[0].Tenant != "t1" {
		t.Fatalf("list %+v", list.Checkpoints)
	}
	mustCall(t, tb, protocol.MethodCheckpointDelete, map[string]any{"checkpoint_id": one.CheckpointID}, nil)
	err := tb.Call(ctxT(t), protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": one.CheckpointID}, nil)
	if code, msg := rpcCode(t, err); code != -32602 || !strings.Contains(msg, "no such checkpoint") {
		t.Fatalf("restoring a deleted checkpoint: %d %s", code, msg)
	}
}
