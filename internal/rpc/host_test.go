package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// startHostServer is a daemon with an approval ledger, approvals that wait
// up to approvalTimeout, and the server options given.
func startHostServer(t *testing.T, approvalTimeout time.Duration, opts Options) *testServer {
	t.Helper()
	ledger, _, err := file.OpenApprovals(filepath.Join(t.TempDir(), "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, serverSetup{opts: opts, engine: engine.Options{Approvals: ledger, ApprovalTimeout: approvalTimeout}, closeAfter: ledger.Close})
}

// hostConn is a host subscriber: every host.event it receives, and every
// frame's bytes, kept for assertions.
type hostConn struct {
	*client.Client
	events chan host.Event
	mu     sync.Mutex
	frames [][]byte // every notification and reply this host read
}

// subscribeHost dials with opts (a host token, say) and subscribes.
func subscribeHost(t *testing.T, ts *testServer, opts *client.Options) (*hostConn, json.RawMessage) {
	t.Helper()
	c, err := client.Dial(ctxT(t), ts.url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &hostConn{Client: c, events: make(chan host.Event, 64)}
	c.HandleNotification(protocol.MethodHostEvent, func(raw json.RawMessage) {
		h.keep(raw)
		var ev host.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Errorf("host.event is not an event: %v: %s", err, raw)
			return
		}
		h.events <- ev
	})
	var snap json.RawMessage
	if err := c.Call(ctxT(t), protocol.MethodHostSubscribe, nil, &snap); err != nil {
		t.Fatalf("host.subscribe: %v", err)
	}
	h.keep(snap)
	return h, snap
}

func (h *hostConn) keep(b []byte) {
	h.mu.Lock()
	h.frames = append(h.frames, append([]byte(nil), b...))
	h.mu.Unlock()
}

// next waits for the next host event of kind.
func (h *hostConn) next(t *testing.T, kind string) host.Event {
	t.Helper()
	for {
		select {
		case ev := <-h.events:
			if ev.Kind == kind {
				return ev
			}
		case <-time.After(testTimeout):
			t.Fatalf("no %s host event", kind)
		}
	}
}

// approvalOf is the approval an approval.* event carries.
func approvalOf(t *testing.T, ev host.Event) host.Approval {
	t.Helper()
	var p struct {
		Approval host.Approval `json:"approval"`
	}
	b, err := json.Marshal(ev.Payload)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.Approval.ID == "" {
		t.Fatalf("%s carries no approval: %v %+v", ev.Kind, err, ev.Payload)
	}
	return p.Approval
}

func (h *hostConn) resolve(t *testing.T, id string, approved bool, notes string) (host.Approval, error) {
	var a host.Approval
	err := h.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": approved, "notes": notes}, &a)
	return a, err
}

const secret = "sk-live-0123456789abcdefSECRET"

func deployPlan() map[string]any {
	return proposal(
		map[string]any{"id": "mark", "type": "state_write", "parameters": map[string]any{"key": "deploying", "value": true}},
		toolCall("ship", "deploy_service", map[string]any{"env": "prod", "api_key": secret, "notes": strings.Repeat("n", 500)}, "dependencies", []string{"mark"}),
	)
}

func TestAHostApprovesAParkedAction(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	h, snap := subscribeHost(t, ts, &client.Options{})
	var s struct {
		Subscribed bool                  `json:"subscribed"`
		Identity   protocol.HostIdentity `json:"identity"`
	}
	if err := json.Unmarshal(snap, &s); err != nil || !s.Subscribed || s.Identity.PID == 0 || s.Identity.StartedAt == "" || s.Identity.ApproverRole != "any" {
		t.Fatalf("snapshot %s", snap)
	}
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, runner.Client, deployPlan())

	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	ctx := a.Context
	if a.Status != host.ApprovalPending || a.ClientID != "" || ctx["proposal_id"] != "p-test" || ctx["action_id"] != "ship" || ctx["tool"] != "deploy_service" ||
		ctx["required_tier"] != "full_access" || ctx["reversibility"] == nil || len(ctx["fingerprint"].(string)) != 32 {
		t.Fatalf("approval %+v", a)
	}
	if sig, _ := ctx["signals"].([]any); len(sig) == 0 {
		t.Fatalf("no classifier signals: %+v", ctx)
	}
	preview, _ := ctx["preview"].(map[string]any)
	if preview["env"] != "prod" || preview["api_key"] != "[redacted]" || len(preview["notes"].(string)) >= 500 {
		t.Fatalf("preview %+v", preview)
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("the parked action ran before anyone decided")
	}
	// The approvals list shows it too, as every read does.
	var list json.RawMessage
	if err := h.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil {
		t.Fatal(err)
	}
	h.keep(list)

	got, err := h.resolve(t, a.ID, true, "release window")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != host.ApprovalApproved || !strings.HasPrefix(got.ResolvedBy, "conn:") {
		t.Fatalf("resolved %+v", got)
	}
	res := awaitResult(t, ch, 2)
	if st := statuses(res); st["mark"] != protocol.StatusSucceeded || st["ship"] != protocol.StatusSucceeded {
		t.Fatalf("after the approval: %v %q", st, resultOf(t, res, "ship").ErrorText())
	}
	if calls := runner.callLog(); len(calls) != 1 || calls[0].Tool != "deploy_service" {
		t.Fatalf("callbacks %+v", calls)
	}
	// It is on the durable ledger at the tier the operation needs.
	var ledger struct {
		Approvals []approvals.Record `json:"approvals"`
	}
	mustCall(t, runner, protocol.MethodApprovalsList, nil, &ledger)
	if len(ledger.Approvals) != 1 || ledger.Approvals[0].Decision != approvals.Approved || ledger.Approvals[0].RequiredTier != "full_access" || ledger.Approvals[0].Reason != "release window" {
		t.Fatalf("ledger %+v", ledger.Approvals)
	}
	resolved := approvalOf(t, h.next(t, host.KindApprovalResolved))
	if resolved.ID != a.ID {
		t.Fatalf("approval.resolved for %s", resolved.ID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.frames {
		if bytes.Contains(f, []byte(secret)) {
			t.Fatalf("the secret reached the host: %s", f)
		}
	}
}

func TestAHostDeniesAParkedAction(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	h, _ := subscribeHost(t, ts, &client.Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, runner.Client, deployPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	if _, err := h.resolve(t, a.ID, false, "not during the freeze"); err != nil {
		t.Fatal(err)
	}
	res := awaitResult(t, ch, 2)
	ship := resultOf(t, res, "ship")
	if ship.Status != protocol.StatusRejected || !strings.Contains(ship.ErrorText(), "not during the freeze") {
		t.Fatalf("ship: %s %q", ship.Status, ship.ErrorText())
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("a denied action ran")
	}
	var exists bool
	mustCall(t, runner, protocol.MethodStateExists, map[string]any{"key": "deploying"}, &exists)
	if exists {
		t.Fatal("the denied action's proposal kept its state write (it aborts and rolls back)")
	}
}

func TestAParkedActionTimesOut(t *testing.T) {
	ts := startHostServer(t, 100*time.Millisecond, Options{})
	h, _ := subscribeHost(t, ts, &client.Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	res := runner.submit(t, deployPlan())
	ship := resultOf(t, res, "ship")
	if ship.Status != protocol.StatusRejected || !strings.Contains(ship.ErrorText(), "nobody decided within 100ms (approval_timeout)") ||
		!strings.Contains(ship.ErrorText(), "permission.approve {fingerprint:") || !strings.Contains(ship.ErrorText(), "then resubmit") {
		t.Fatalf("ship: %s %q", ship.Status, ship.ErrorText())
	}
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	var list struct {
		Approvals []host.Approval `json:"approvals"`
	}
	mustCall(t, runner, protocol.MethodHostApprovals, nil, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != a.ID || list.Approvals[0].Status != host.ApprovalExpired {
		t.Fatalf("approvals after the timeout %+v", list.Approvals)
	}
}

func TestPermissionApproveReleasesAParkedAction(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	h, _ := subscribeHost(t, ts, &client.Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, runner.Client, deployPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	other := ts.dial(t, "")
	if err := other.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"fingerprint": a.Context["fingerprint"], "required_tier": "full_access"}, nil); err != nil {
		t.Fatal(err)
	}
	if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusSucceeded {
		t.Fatalf("after permission.approve: %v", st)
	}
	if r := approvalOf(t, h.next(t, host.KindApprovalResolved)); r.ID != a.ID || r.Status != host.ApprovalApproved {
		t.Fatalf("the host row after permission.approve: %+v", r)
	}
}

func TestWithNoHostWatchingApprovalsAreRejectedAtOnce(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	res := runner.submit(t, deployPlan())
	if ship := resultOf(t, res, "ship"); ship.Status != protocol.StatusRejected || !strings.Contains(ship.ErrorText(), "approve fingerprint") {
		t.Fatalf("ship: %s %q", ship.Status, ship.ErrorText())
	}
}

func TestAReferenceResolvedIntoADangerousCommandParksMidRun(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	h, _ := subscribeHost(t, ts, &client.Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"run": echo})
	ch := submitAsync(t, runner.Client, proposal(
		map[string]any{"id": "cmd", "type": "state_write", "parameters": map[string]any{"key": "c", "value": "rm -rf /srv/app"}},
		toolCall("go", "run", map[string]any{"command": "$cmd.output"}),
	))
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	if p, _ := a.Context["preview"].(map[string]any); p["command"] != "rm -rf /srv/app" || a.Context["required_tier"] != "full_access" {
		t.Fatalf("the mid-run request shows %+v", a.Context)
	}
	if _, err := h.resolve(t, a.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	res := awaitResult(t, ch, 2)
	if st := statuses(res); st["go"] != protocol.StatusSucceeded {
		t.Fatalf("after approving the resolved command: %v %q", st, resultOf(t, res, "go").ErrorText())
	}
}

func TestApproverRoleHost(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{HostToken: "the-host-token", ApproverRole: ApproverHost})
	// An ordinary subscriber is not an approver: nothing parks for it.
	ordinary, _ := subscribeHost(t, ts, &client.Options{})
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	if ship := resultOf(t, runner.submit(t, deployPlan()), "ship"); ship.Status != protocol.StatusRejected {
		t.Fatalf("parked for a subscriber that may not approve: %s", ship.Status)
	}
	if _, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "wrong"}); err == nil || !strings.Contains(err.Error(), "host token mismatch") {
		t.Fatalf("a wrong host token: %v", err)
	}
	h, snap := subscribeHost(t, ts, &client.Options{HostToken: "the-host-token"})
	if !bytes.Contains(snap, []byte(`"role":"host"`)) {
		t.Fatalf("identity of a host-token connection: %s", snap)
	}
	ch := submitAsync(t, runner.Client, deployPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	for _, call := range []struct {
		method string
		params map[string]any
	}{
		{protocol.MethodHostResolveApproval, map[string]any{"approval_id": a.ID, "approved": true}},
		{protocol.MethodPermissionApprove, map[string]any{"fingerprint": a.Context["fingerprint"], "required_tier": "full_access"}},
		{protocol.MethodPermissionReject, map[string]any{"fingerprint": a.Context["fingerprint"], "required_tier": "full_access"}},
		{protocol.MethodPermissionSetTier, map[string]any{"tier": "full_access"}},
	} {
		code, msg := rpcCode(t, ordinary.Call(ctxT(t), call.method, call.params, nil))
		if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "needs the host role") {
			t.Fatalf("%s from an ordinary connection: %d %q", call.method, code, msg)
		}
	}
	if _, err := h.resolve(t, a.ID, true, ""); err != nil {
		t.Fatalf("the host-token connection: %v", err)
	}
	if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusSucceeded {
		t.Fatalf("after the host approved: %v", st)
	}
}

func TestHostAgentsBelongToTheirConnection(t *testing.T) {
	ts := startServer(t, Options{})
	watcher, _ := subscribeHost(t, ts, &client.Options{})
	owner := ts.dial(t, "")
	var a host.Agent
	if err := owner.Call(ctxT(t), protocol.MethodHostRegisterAgent, map[string]any{"id": "researcher-1", "name": "Researcher", "kind": "callback"}, &a); err != nil {
		t.Fatal(err)
	}
	if a.ID != "researcher-1" || a.Status != host.StatusIdle || watcher.next(t, host.KindAgentRegistered).AgentID != "researcher-1" {
		t.Fatalf("registered %+v", a)
	}
	intruder := ts.dial(t, "")
	for _, call := range []struct {
		method string
		params map[string]any
	}{
		{protocol.MethodHostSetStatus, map[string]any{"agent_id": "researcher-1", "status": "running"}},
		{protocol.MethodHostUnregisterAgent, map[string]any{"agent_id": "researcher-1"}},
		{protocol.MethodHostRegisterAgent, map[string]any{"id": "researcher-1", "name": "Mine now", "kind": "callback"}},
	} {
		code, msg := rpcCode(t, intruder.Call(ctxT(t), call.method, call.params, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, "agent 'researcher-1' is owned by another session") {
			t.Fatalf("%s by another connection: %d %q", call.method, code, msg)
		}
	}
	// Reads are open to everyone.
	var agents []host.Agent
	if err := intruder.Call(ctxT(t), protocol.MethodHostAgents, nil, &agents); err != nil || len(agents) != 1 {
		t.Fatalf("host.agents: %v %+v", err, agents)
	}
	if err := owner.Call(ctxT(t), protocol.MethodHostSetStatus, map[string]any{"agent_id": "researcher-1", "status": "running", "current_task": "reading"}, &a); err != nil || a.Status != host.StatusRunning {
		t.Fatalf("the owner's set_status: %v %+v", err, a)
	}
	watcher.next(t, host.KindAgentStatusChanged)
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	if ev := watcher.next(t, host.KindAgentUnregistered); ev.AgentID != "researcher-1" {
		t.Fatalf("agent.unregistered for %q", ev.AgentID)
	}
}

func TestAHostRoleConnectionCancelsAnotherConnectionsProposal(t *testing.T) {
	ts := startServer(t, Options{HostToken: "the-host-token"})
	started := make(chan struct{}, 1)
	runner := newToolbox(t, ts, map[string]toolFunc{"hang": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	ch := submitAsync(t, runner.Client, map[string]any{"id": "p-runaway", "actions": []any{toolCall("t", "hang", nil)}})
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("the callback never arrived")
	}
	h, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "the-host-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	var res protocol.ProposalCancelResult
	if err := h.Call(ctxT(t), protocol.MethodProposalCancel, protocol.ProposalCancelParams{ProposalID: "p-runaway", Reason: "runaway agent"}, &res); err != nil || !res.Cancelled {
		t.Fatalf("the host's cancel: %v %+v", err, res)
	}
	if r := awaitResult(t, ch, 1).Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "cancelled: runaway agent") {
		t.Fatalf("after the host's cancel: %s %q", r.Status, r.ErrorText())
	}
}
