package rpc

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/storetest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// registryView is the test's supervisor registry as one daemon uses it.
type registryView struct{ *storetest.Member }

func (v registryView) Alive(ctx context.Context) ([]engine.RemoteSupervisor, error) {
	rows, err := v.Rows(ctx)
	out := make([]engine.RemoteSupervisor, 0, len(rows))
	for _, r := range rows {
		out = append(out, engine.RemoteSupervisor(r))
	}
	return out, err
}

// cluster is daemons sharing one approval ledger, one bus and one
// supervisor registry, as daemons on one store do.
type cluster struct {
	at  map[string]*testServer // by node
	reg *storetest.Supervisors
}

// startCluster serves one daemon per node.
func startCluster(t *testing.T, nodes ...string) cluster {
	t.Helper()
	ledger, _, err := file.OpenApprovals(filepath.Join(t.TempDir(), "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ledger.Close(); err != nil {
			t.Error(err)
		}
	})
	bus, reg := storetest.NewBus(), storetest.NewSupervisors()
	out := cluster{at: map[string]*testServer{}, reg: reg}
	for _, node := range nodes {
		ts := startServerWith(t, serverSetup{
			opts:   Options{Node: node, Bus: bus},
			engine: engine.Options{Approvals: ledger, SupervisionTimeout: testTimeout, ApprovalTimeout: testTimeout},
		})
		leave, err := ts.rt.Supervisors.JoinCluster(ctxT(t), engine.SupervisionCluster{Node: node, Bus: bus, Registry: registryView{reg.For(node)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(leave)
		out.at[node] = ts
	}
	return out
}

func TestASupervisorOnOneDaemonDecidesWhatWaitsOnAnother(t *testing.T) {
	d := startCluster(t, "a", "b")
	sup := newSupervisor(t, d.at["a"], map[string]any{"tools": []string{"stage_site"}})
	if err := d.at["b"].rt.Supervisors.Refresh(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	runner := newToolbox(t, d.at["b"], map[string]toolFunc{"stage_site": echo})

	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", map[string]any{"note": "secret-value-123"})))
	in := sup.next(t)
	if in.Node != "b" || len(in.Actions) != 1 || strings.Contains(string(mustJSON(in)), "secret-value-123") {
		t.Fatalf("intent on A: %s", mustJSON(in))
	}
	var pend struct {
		Intents []engine.Intent `json:"intents"`
	}
	mustCall(t, sup.toolbox, protocol.MethodSupervisionPending, nil, &pend)
	if len(pend.Intents) != 1 || pend.Intents[0].ID != in.ID || pend.Intents[0].Node != "b" {
		t.Fatalf("A's supervision.pending %+v", pend.Intents)
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("B ran before A's supervisor decided")
	}
	if err := sup.decide(t, in.ID, "allow", ""); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded || len(runner.callLog()) != 1 {
		t.Fatalf("allowed on A: %s %q", r.Results[0].Status, r.Results[0].ErrorText())
	}
	if err := sup.decide(t, in.ID, "allow", ""); err == nil || !strings.Contains(err.Error(), "is not pending for you") {
		t.Fatalf("a second decision: %v", err)
	}

	ch = submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	in = sup.next(t)
	if err := sup.decide(t, in.ID, "deny", "not today"); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "not today") || len(runner.callLog()) != 1 {
		t.Fatalf("denied on A: %s %q", r.Results[0].Status, r.Results[0].ErrorText())
	}

	// With A's supervisor gone, B runs unsupervised, as a daemon alone does.
	sup.Close()
	testwait.Eventually(t, testTimeout, "A unregistering its supervisor", func() bool { return len(d.reg.Conns("a")) == 0 })
	if err := d.at["b"].rt.Supervisors.Refresh(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := runner.submit(t, proposal(toolCall("s", "stage_site", nil))); r.Results[0].Status != protocol.StatusSucceeded || len(runner.callLog()) != 2 {
		t.Fatalf("unsupervised on B: %s %q", r.Results[0].Status, r.Results[0].ErrorText())
	}
}

func TestAHostOnOneDaemonApprovesAnActionParkedOnAnother(t *testing.T) {
	d := startCluster(t, "a", "b")
	h, _ := subscribeHost(t, d.at["a"], &client.Options{})
	// B parks rather than rejects: an approver watches on A.
	testwait.Eventually(t, testTimeout, "B counting A's approver", d.at["b"].srv.host.HasApprovers)
	runner := newToolbox(t, d.at["b"], map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, runner.Client, deployPlan())

	ev := h.next(t, host.KindApprovalRequested)
	a := approvalOf(t, ev)
	if ev.Node != "b" || a.Node != "b" || a.Status != host.ApprovalPending || a.Context["tool"] != "deploy_service" {
		t.Fatalf("A's approval.requested: node %q %+v", ev.Node, a)
	}
	var list struct {
		Approvals []host.Approval `json:"approvals"`
	}
	if err := h.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Approvals) != 1 || list.Approvals[0].ID != a.ID {
		t.Fatalf("A's host.approvals %+v", list.Approvals)
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("the parked action ran before anyone decided")
	}

	got, err := h.resolve(t, a.ID, true, "release window")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != host.ApprovalApproved || !strings.HasPrefix(got.ResolvedBy, "conn:") {
		t.Fatalf("resolved on A: %+v", got)
	}
	res := awaitResult(t, ch, 2)
	if st := statuses(res); st["ship"] != protocol.StatusSucceeded || len(runner.callLog()) != 1 {
		t.Fatalf("after A's approval: %v %q", st, resultOf(t, res, "ship").ErrorText())
	}
	// B resolved its own row, and A hears it from B.
	resolved := h.next(t, host.KindApprovalResolved)
	if r := approvalOf(t, resolved); resolved.Node != "b" || r.ID != a.ID || r.Status != host.ApprovalApproved || r.ResolvedBy != got.ResolvedBy {
		t.Fatalf("B's approval.resolved on A: node %q %+v", resolved.Node, r)
	}
	if row, ok := d.at["b"].srv.host.Approval(a.ID); !ok || row.Status != host.ApprovalApproved || row.ResolvedBy != got.ResolvedBy {
		t.Fatalf("B's row %+v", row)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.frames {
		if bytes.Contains(f, []byte(secret)) {
			t.Fatalf("the secret reached the host on A: %s", f)
		}
	}
}

func TestASubscriptionTheSharedStoreCannotRecordIsAnInternalError(t *testing.T) {
	d := startCluster(t, "a")
	d.reg.Fail(errors.New("connection refused"))
	defer d.reg.Fail(nil)
	sup := newToolbox(t, d.at["a"], nil)
	err := sup.Call(ctxT(t), protocol.MethodSupervisionSubscribe, nil, nil)
	code, msg := rpcCode(t, err)
	if code != protocol.CodeInternal || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "nothing was subscribed") {
		t.Fatalf("%d %s", code, msg)
	}
	if d.at["a"].rt.Status().Supervisors != 0 {
		t.Fatal("subscribed although the store did not record it")
	}
}
