package rpc

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

func startGovernedServer(t *testing.T, supervisionTimeout time.Duration) *testServer {
	t.Helper()
	ledger, _, err := file.OpenApprovals(filepath.Join(t.TempDir(), "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, engine.Options{Approvals: ledger, SupervisionTimeout: supervisionTimeout}, ledger.Close)
}

var fingerprintRE = regexp.MustCompile(`approve fingerprint ([0-9a-f]{32})`)

func TestPermissionBlockApproveExecute(t *testing.T) {
	ts := startGovernedServer(t, 0)
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	approver := ts.dial(t, "")
	plan := proposal(
		map[string]any{"id": "mark", "type": "state_write", "parameters": map[string]any{"key": "deploying", "value": true}},
		toolCall("ship", "deploy_service", map[string]any{"env": "prod"}, "dependencies", []string{"mark"}),
	)
	res := runner.submit(t, plan)
	for _, r := range res.Results {
		if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "action 'ship' needs full_access (granted sandbox_edit)") {
			t.Fatalf("%s: %s %q", r.ActionID, r.Status, r.ErrorText())
		}
	}
	var exists bool
	mustCall(t, runner, "state.exists", map[string]any{"key": "deploying"}, &exists)
	if exists || len(runner.callLog()) != 0 {
		t.Fatal("a blocked proposal changed state or dispatched")
	}
	fp := fingerprintRE.FindStringSubmatch(res.Results[1].ErrorText())[1]

	// The pending queue shows the same fingerprint.
	var pending struct {
		Pending []engine.PermissionRow `json:"pending"`
	}
	mustCall(t, runner, protocol.MethodPermissionPending, map[string]any{"proposal": plan}, &pending)
	if len(pending.Pending) != 1 || pending.Pending[0].Fingerprint != fp || pending.Pending[0].Reversibility != protocol.Compensable {
		t.Fatalf("pending %+v", pending.Pending)
	}

	// An approval under the true tier does not count.
	var rec approvals.Record
	if err := approver.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"fingerprint": fp, "required_tier": "sandbox_edit"}, &rec); err != nil {
		t.Fatal(err)
	}
	if r := runner.submit(t, plan); r.Results[1].Status != protocol.StatusRejected || !strings.Contains(r.Results[1].ErrorText(), "approve fingerprint") {
		t.Fatalf("an under-scoped approval widened access: %s", r.Results[1].ErrorText())
	}

	// The approver's decision, on another connection, opens it; the reviewer
	// is stamped by the server whatever params say.
	if err := approver.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{
		"fingerprint": fp, "required_tier": "full_access", "reason": "release window", "reviewer": "mallory", "evidence": map[string]any{"ticket": "OPS-1"},
	}, &rec); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.Reviewer, "conn:") || rec.Decision != "approved" || rec.RequiredTier != "full_access" || rec.Reason != "release window" {
		t.Fatalf("record %+v", rec)
	}
	res = runner.submit(t, plan)
	if s := statuses(res); s["mark"] != protocol.StatusSucceeded || s["ship"] != protocol.StatusSucceeded {
		t.Fatalf("after approval: %v %q", s, res.Results[1].ErrorText())
	}
	var summary engine.MetricsSummary
	mustCall(t, runner, protocol.MethodMetricsSummary, nil, &summary)
	if summary.ApprovalsRecorded != 2 || summary.GateRejections != 2 || summary.PermissionDecisions != 5 {
		t.Fatalf("summary %+v", summary)
	}
}

func TestPermissionRejectAndTiers(t *testing.T) {
	ts := startGovernedServer(t, 0)
	tb := newToolbox(t, ts, map[string]toolFunc{"write_file": echo, "read_file": echo})
	write := toolCall("w", "write_file", map[string]any{"path": "/tmp/a"})
	read := toolCall("r", "read_file", map[string]any{"path": "/tmp/a"})

	var tier map[string]string
	mustCall(t, tb, protocol.MethodPermissionGetTier, nil, &tier)
	if tier["granted_tier"] != "sandbox_edit" {
		t.Fatalf("default tier %v", tier)
	}
	mustCall(t, tb, protocol.MethodPermissionSetTier, map[string]any{"tier": "read_only"}, &tier)
	if r := tb.submit(t, proposal(write)); r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "needs sandbox_edit (granted read_only)") {
		t.Fatalf("read_only tier let a write through: %q", r.Results[0].ErrorText())
	}
	if r := tb.submit(t, proposal(read)); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatal("read_only tier blocked a read")
	}
	code, _ := rpcCode(t, tb.Call(ctxT(t), protocol.MethodPermissionSetTier, map[string]any{"tier": "root"}, nil))
	if code != protocol.CodeInvalidParams {
		t.Fatal("an unknown tier was accepted")
	}
	mustCall(t, tb, protocol.MethodPermissionSetTier, map[string]any{"tier": "sandbox_edit"}, &tier)

	// A rejection recorded by action denies that operation outright.
	var rec approvals.Record
	mustCall(t, tb, protocol.MethodPermissionReject, map[string]any{"action": write, "reason": "not on prod hosts"}, &rec)
	if rec.Decision != "rejected" || rec.RequiredTier != "sandbox_edit" {
		t.Fatalf("%+v", rec)
	}
	r := tb.submit(t, proposal(write, read))
	if !strings.Contains(r.Results[0].ErrorText(), "is denied: rejected by conn:") || !strings.Contains(r.Results[0].ErrorText(), "not on prod hosts") || r.Results[1].Status != protocol.StatusRejected {
		t.Fatalf("rejection: %q", r.Results[0].ErrorText())
	}
	var eval struct {
		Decisions []engine.PermissionRow `json:"decisions"`
	}
	mustCall(t, tb, protocol.MethodPermissionEvaluate, map[string]any{"proposal": proposal(write, read)}, &eval)
	if eval.Decisions[0].Decision != "deny" || eval.Decisions[1].Decision != "allow" {
		t.Fatalf("evaluate %+v", eval.Decisions)
	}
	var cls struct {
		Classifications []struct {
			ActionID     string `json:"action_id"`
			RequiredTier string `json:"required_tier"`
		} `json:"classifications"`
		Contract string `json:"declared_rollback_contract"`
	}
	mustCall(t, tb, protocol.MethodPermissionClassify, map[string]any{"proposal": proposal(write, read)}, &cls)
	if cls.Classifications[0].RequiredTier != "sandbox_edit" || cls.Classifications[1].RequiredTier != "read_only" || cls.Contract != "irreversible" {
		t.Fatalf("classify %+v", cls)
	}
}

// supervisor is a connection that subscribes and collects intents.
type supervisor struct {
	*toolbox
	intents chan engine.Intent
}

func newSupervisor(t *testing.T, ts *testServer, filter map[string]any) *supervisor {
	t.Helper()
	s := &supervisor{toolbox: newToolbox(t, ts, map[string]toolFunc{}), intents: make(chan engine.Intent, 16)}
	s.HandleNotification(protocol.MethodSupervisionIntent, func(raw json.RawMessage) {
		var in engine.Intent
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Errorf("supervision.intent is not an Intent: %v: %s", err, raw)
			return
		}
		s.intents <- in
	})
	var res map[string]any
	mustCall(t, s.toolbox, protocol.MethodSupervisionSubscribe, map[string]any{"filter": filter}, &res)
	if res["subscribed"] != true {
		t.Fatalf("subscribe %v", res)
	}
	return s
}

func (s *supervisor) next(t *testing.T) engine.Intent {
	t.Helper()
	select {
	case in := <-s.intents:
		return in
	case <-time.After(testTimeout):
		t.Fatal("no supervision.intent")
		return engine.Intent{}
	}
}

func (s *supervisor) decide(t *testing.T, id, kind, reason string) error {
	return s.Call(ctxT(t), protocol.MethodSupervisionDecide, map[string]any{"intent_id": id, "decision": map[string]any{"kind": kind, "reason": reason}}, nil)
}

func TestSupervision(t *testing.T) {
	ts := startGovernedServer(t, 0)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo, "read_file": echo})
	sup := newSupervisor(t, ts, map[string]any{"tools": []string{"stage_site"}})
	stage := toolCall("s", "stage_site", map[string]any{"note": "secret-value-123", "site": "blog"})

	// allow
	ch := submitAsync(t, runner.Client, proposal(stage))
	in := sup.next(t)
	raw := mustJSON(in)
	if strings.Contains(string(raw), "secret-value-123") || strings.Contains(string(raw), "blog") {
		t.Fatalf("an intent carried parameter values: %s", raw)
	}
	if len(in.Actions) != 1 || strings.Join(in.Actions[0].ParameterKeys, ",") != "note,site" || !strings.HasPrefix(in.Actions[0].ParametersDigest, "sha256:") {
		t.Fatalf("intent %s", raw)
	}
	var pend struct {
		Intents []engine.Intent `json:"intents"`
	}
	mustCall(t, sup.toolbox, protocol.MethodSupervisionPending, nil, &pend)
	if len(pend.Intents) != 1 || pend.Intents[0].ID != in.ID {
		t.Fatalf("pending %+v", pend)
	}
	if err := sup.decide(t, in.ID, "deny", ""); err == nil {
		t.Fatal("deny without a reason was accepted")
	}
	if err := sup.decide(t, in.ID, "allow", ""); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("allowed: %q", r.Results[0].ErrorText())
	}
	code, msg := rpcCode(t, sup.decide(t, in.ID, "allow", ""))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "not pending") {
		t.Fatalf("deciding twice: %d %q", code, msg)
	}

	// deny
	ch = submitAsync(t, runner.Client, proposal(stage))
	in = sup.next(t)
	if err := sup.decide(t, in.ID, "deny", "not during the freeze"); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "denied by supervisor conn:") || !strings.Contains(r.Results[0].ErrorText(), "not during the freeze") {
		t.Fatalf("denied: %q", r.Results[0].ErrorText())
	}

	// escalate: blocked until the ledger approves, then admitted on re-submission.
	ch = submitAsync(t, runner.Client, proposal(stage))
	in = sup.next(t)
	if err := sup.decide(t, in.ID, "escalate", "needs a human"); err != nil {
		t.Fatal(err)
	}
	r := awaitResult(t, ch, 1)
	m := fingerprintRE.FindStringSubmatch(r.Results[0].ErrorText())
	if r.Results[0].Status != protocol.StatusRejected || m == nil || !strings.Contains(r.Results[0].ErrorText(), "escalated") {
		t.Fatalf("escalated: %q", r.Results[0].ErrorText())
	}
	mustCall(t, sup.toolbox, protocol.MethodPermissionApprove, map[string]any{"fingerprint": m[1], "required_tier": "sandbox_edit"}, nil)
	ch = submitAsync(t, runner.Client, proposal(stage))
	in = sup.next(t)
	if err := sup.decide(t, in.ID, "escalate", "needs a human"); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("escalated after approval: %q", r.Results[0].ErrorText())
	}

	// A proposal the filter does not match is not parked.
	if r := runner.submit(t, proposal(toolCall("r", "read_file", map[string]any{"path": "/tmp/x"}))); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatal("an unmatched proposal was gated")
	}
	// allow does not bypass the other checks: the runner's own policy still denies.
	mustCall(t, runner, protocol.MethodPolicyRegister, map[string]any{"name": "no_staging", "rule": "deny_tool", "target": "stage_site"}, nil)
	ch = submitAsync(t, runner.Client, proposal(stage))
	in = sup.next(t)
	if err := sup.decide(t, in.ID, "allow", ""); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "no_staging") {
		t.Fatalf("a supervisor's allow bypassed a policy: %q", r.Results[0].ErrorText())
	}
	// A proposal the permission gate blocks never reaches a supervisor.
	r = runner.submit(t, proposal(toolCall("s3", "stage_site", map[string]any{"command": "rm -rf /"})))
	if r.Results[0].Status != protocol.StatusRejected || len(sup.intents) != 0 {
		t.Fatalf("permission-blocked proposal: %q, intents queued %d", r.Results[0].ErrorText(), len(sup.intents))
	}
}

func TestSupervisionTimesOutClosedAndSurvivesDisconnect(t *testing.T) {
	ts := startGovernedServer(t, 100*time.Millisecond)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	sup := newSupervisor(t, ts, map[string]any{"min_reversibility": "compensable"})
	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	sup.next(t)
	sup.Close() // a supervisor that vanishes does not release its intents
	r := awaitResult(t, ch, 1)
	if r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "fail-closed") {
		t.Fatalf("timeout: %q", r.Results[0].ErrorText())
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("dispatched after a timeout")
	}
	// With no supervisor left, proposals run ungated.
	if r := runner.submit(t, proposal(toolCall("s", "stage_site", nil))); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("after the supervisor left: %q", r.Results[0].ErrorText())
	}
	bad := ts.dial(t, "")
	code, _ := rpcCode(t, bad.Call(ctxT(t), protocol.MethodSupervisionSubscribe, map[string]any{"filter": map[string]any{"min_reversibility": "sometimes"}}, nil))
	if code != protocol.CodeInvalidParams {
		t.Fatal("a bad filter was accepted")
	}
}

func TestAReferenceCannotCarryAnOperationPastTheTier(t *testing.T) {
	ts := startGovernedServer(t, 0)
	tb := newToolbox(t, ts, map[string]toolFunc{"run_command": echo})
	plan := proposal(
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "cmd", "value": "rm -rf /srv/data"}},
		toolCall("x", "run_command", map[string]any{"command": "$w.output"}),
	)
	res := tb.submit(t, plan)
	x := resultOf(t, res, "x")
	if x.Status != protocol.StatusRejected || !strings.Contains(x.ErrorText(), "with its references resolved, action 'x' needs full_access") {
		t.Fatalf("%s %q", x.Status, x.ErrorText())
	}
	if len(tb.callLog()) != 0 {
		t.Fatal("the resolved command was dispatched")
	}
	// Approving the resolved operation lets it run.
	m := fingerprintRE.FindStringSubmatch(x.ErrorText())
	mustCall(t, tb, protocol.MethodPermissionApprove, map[string]any{"fingerprint": m[1], "required_tier": "full_access"}, nil)
	if r := resultOf(t, tb.submit(t, plan), "x"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("after approving the resolved operation: %q", r.ErrorText())
	}
}

func TestSupervisorCanDecideWhileTheDaemonDrains(t *testing.T) {
	draining, _ := watchSupervisorDrain(t)
	ts := startGovernedServer(t, testTimeout)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	sup := newSupervisor(t, ts, nil)
	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	in := sup.next(t)
	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(ctxT(t)) }()
	select {
	case <-draining: // the supervisor's own connection refuses new work now
	case <-time.After(testTimeout):
		t.Fatal("the supervisor's connection never began to drain")
	}
	if err := sup.Call(ctxT(t), "state.keys", nil, nil); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("an ordinary request while draining: %v", err)
	}
	if err := sup.decide(t, in.ID, "allow", ""); err != nil {
		t.Fatalf("decide while draining: %v", err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the parked proposal: %q", r.Results[0].ErrorText())
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestOnlyAMatchedSupervisorDecides(t *testing.T) {
	ts := startGovernedServer(t, testTimeout)
	runner := newToolbox(t, ts, map[string]toolFunc{"stage_site": echo})
	sup := newSupervisor(t, ts, map[string]any{"tools": []string{"stage_site"}})
	// The submitter subscribes too, with a filter that matches nothing, and
	// tries to allow its own parked proposal.
	mustCall(t, runner, protocol.MethodSupervisionSubscribe, map[string]any{"filter": map[string]any{"tools": []string{"none"}}}, nil)
	ch := submitAsync(t, runner.Client, proposal(toolCall("s", "stage_site", nil)))
	in := sup.next(t)
	code, msg := rpcCode(t, runner.Call(ctxT(t), protocol.MethodSupervisionDecide, map[string]any{"intent_id": in.ID, "decision": map[string]any{"kind": "allow"}}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "not pending for you") {
		t.Fatalf("self-approval: %d %q", code, msg)
	}
	if err := sup.decide(t, in.ID, "deny", "not now"); err != nil {
		t.Fatal(err)
	}
	if r := awaitResult(t, ch, 1); r.Results[0].Status != protocol.StatusRejected {
		t.Fatal("the real supervisor's deny did not hold")
	}
}
