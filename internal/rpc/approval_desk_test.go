package rpc

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// deploys is a proposal of n deploy_service actions, each a distinct
// operation (fingerprint) that needs full_access.
func deploys(id string, n int) map[string]any {
	actions := make([]any, n)
	for i := range actions {
		actions[i] = toolCall(fmt.Sprintf("d%d", i), "deploy_service", map[string]any{"service": fmt.Sprintf("svc-%d", i), "env": "prod"})
	}
	return map[string]any{"id": id, "actions": actions}
}

// startDeskServer is startHostServer with the approval desk's bounds given.
func startDeskServer(t *testing.T, perProposal, perConn int) *testServer {
	t.Helper()
	ledger, _, err := file.OpenApprovals(filepath.Join(t.TempDir(), "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, serverSetup{engine: engine.Options{
		Approvals: ledger, ApprovalTimeout: testTimeout, MaxApprovalsPerProposal: perProposal,
		Desk: host.New(host.Options{MaxPendingPerConn: perConn}),
	}, closeAfter: ledger.Close})
}

// TestOneProposalCannotFillTheApprovalDesk: a proposal of 1,000 distinct
// deploy_service actions raised 1,000 cards, and every other connection's
// approval-needing proposal was refused for as long as they waited. Now it
// is rejected before any card is raised, naming the setting, and another
// connection's proposal still parks for a person.
func TestOneProposalCannotFillTheApprovalDesk(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	h, _ := subscribeHost(t, ts, &client.Options{})
	hostile := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	res := hostile.submit(t, deploys("p-flood", 1000))
	if len(res.Results) != 1000 {
		t.Fatalf("%d results", len(res.Results))
	}
	for _, r := range res.Results {
		if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "would put 1000 distinct operations") || !strings.Contains(r.ErrorText(), "max_approvals_per_proposal (64)") {
			t.Fatalf("%s: %s %q; want it rejected naming max_approvals_per_proposal", r.ActionID, r.Status, r.ErrorText())
		}
	}
	var kept protocol.HostApprovalsResult
	mustCall(t, hostile, protocol.MethodHostApprovals, nil, &kept)
	if len(kept.Approvals) != 0 {
		t.Fatalf("the rejected proposal raised %d approvals", len(kept.Approvals))
	}

	other := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, other.Client, deployPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	if a.RequestedBy == nil || a.RequestedBy.Connection != a.Context["connection"] || a.RequestedBy.Principal != protocol.PrincipalPlain {
		t.Fatalf("the other connection's approval names %+v, its context's connection %v", a.RequestedBy, a.Context["connection"])
	}
	if _, err := h.resolve(t, a.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusSucceeded {
		t.Fatalf("the other connection's proposal after the approval: %v", st)
	}
}

// TestGateApprovalsAreChargedToTheSubmittingConnection: the approvals the
// gate raises for a connection's proposals count against that connection's
// pending cap, so it cannot fill the desk; another connection still parks.
func TestGateApprovalsAreChargedToTheSubmittingConnection(t *testing.T) {
	ts := startDeskServer(t, 3, 3)
	h, _ := subscribeHost(t, ts, &client.Options{})
	greedy := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	if res := greedy.submit(t, deploys("p-four", 4)); !strings.Contains(resultOf(t, res, "d0").ErrorText(), "more than max_approvals_per_proposal (3)") {
		t.Fatalf("four operations past a bound of three: %q", resultOf(t, res, "d0").ErrorText())
	}
	parked := submitAsync(t, greedy.Client, deploys("p-three", 3))
	for range 3 {
		h.next(t, host.KindApprovalRequested)
	}
	// The connection has three pending: its next one is refused, naming it.
	res := greedy.submit(t, deployPlan())
	if msg := resultOf(t, res, "ship").ErrorText(); !strings.Contains(msg, "already has 3 approvals pending") || !strings.Contains(msg, "its proposals wait for") {
		t.Fatalf("a fourth pending approval of one connection: %q", msg)
	}
	other := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, other.Client, deployPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	if a.Context["proposal_id"] != "p-test" || a.RequestedBy == nil || a.RequestedBy.Connection != a.Context["connection"] {
		t.Fatalf("the other connection's approval: %+v", a)
	}
	if _, err := h.resolve(t, a.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusSucceeded {
		t.Fatalf("the other connection after the approval: %v", st)
	}
	var kept protocol.HostApprovalsResult
	mustCall(t, other, protocol.MethodHostApprovals, nil, &kept)
	for _, ap := range kept.Approvals {
		if ap.Status == host.ApprovalPending {
			if _, err := h.resolve(t, ap.ID, false, "not today"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := statuses(awaitResult(t, parked, 3)); st["d0"] != protocol.StatusRejected {
		t.Fatalf("the greedy proposal after its rejections: %v", st)
	}
}

// TestApprovalsNameWhoAsked: an approval names its principal: an agent by
// id and its registered name, a plain client by the name it gave in
// server.handshake, the host as host; each with its connection.
func TestApprovalsNameWhoAsked(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	trustAgents(t, rs) // only the deploy waits for a person
	h, _ := subscribeHost(t, rs.testServer, &client.Options{HostToken: runsHostToken})

	agent := rs.mustAgent(t, "planner")
	call(t, agent, protocol.MethodHostRegisterAgent, map[string]any{"id": "planner", "name": "The Planner", "kind": "callback"}, nil)
	tb := newToolboxOn(t, agent, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, tb.Client, deployPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	want := protocol.ApprovalRequester{Principal: protocol.PrincipalAgent, AgentID: "planner", AgentName: "The Planner", ClientName: "car-server-go-client", Connection: a.Context["connection"].(string)}
	if a.RequestedBy == nil || *a.RequestedBy != want {
		t.Fatalf("the gate's approval for agent planner names %+v, want %+v", a.RequestedBy, want)
	}
	if got := a.RequestedBy.String(); got != "agent planner (The Planner) via car-server-go-client, connection "+want.Connection {
		t.Fatalf("said as %q", got)
	}
	if _, err := h.resolve(t, a.ID, false, "not now"); err != nil {
		t.Fatal(err)
	}
	awaitResult(t, ch, 2)

	plain, err := client.Dial(ctxT(t), rs.url, &client.Options{SkipHandshake: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	code, msg := rpcCode(t, plain.Call(ctxT(t), protocol.MethodServerHandshake, map[string]any{"protocol_version": protocol.ProtocolVersion, "client_name": strings.Repeat("x", protocol.MaxClientName+1)}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "client_name is 129 bytes") {
		t.Fatalf("a client_name over the bound: %d %q", code, msg)
	}
	call(t, plain, protocol.MethodServerHandshake, map[string]any{"protocol_version": protocol.ProtocolVersion, "client_name": "my-ide", "client_version": "1.2.3"}, nil)
	var raised host.Approval
	call(t, plain, protocol.MethodHostRequestApproval, map[string]any{"title": "merge the branch"}, &raised)
	if by := raised.RequestedBy; by == nil || by.Principal != protocol.PrincipalPlain || by.ClientName != "my-ide" || by.Connection != raised.ClientID || by.AgentID != "" {
		t.Fatalf("a plain client's request names %+v (client_id %s)", by, raised.ClientID)
	}
	if got := raised.RequestedBy.String(); got != "plain client my-ide, connection "+raised.ClientID {
		t.Fatalf("said as %q", got)
	}

	var own host.Approval
	call(t, h.Client, protocol.MethodHostRequestApproval, map[string]any{"title": "a note to myself"}, &own)
	if by := own.RequestedBy; by == nil || by.Principal != protocol.PrincipalHost || by.Connection != own.ClientID {
		t.Fatalf("the host's own request names %+v", by)
	}
}

// TestAnAgentResolvesOnlyItsOwnRequest: host.resolve_approval is open to
// every connection for a request it raised itself, and a decision for
// anything else: an agent may withdraw its own request, never answer the
// gate's approval of its proposal nor another connection's request; so may
// a plain client under approver_role = host.
func TestAnAgentResolvesOnlyItsOwnRequest(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	trustAgents(t, rs) // only the deploy waits for a person
	h, _ := subscribeHost(t, rs.testServer, &client.Options{HostToken: runsHostToken})
	agent := rs.mustAgent(t, "worker")

	var mine host.Approval
	call(t, agent, protocol.MethodHostRequestApproval, map[string]any{"title": "may I?"}, &mine)
	var withdrawn host.Approval
	call(t, agent, protocol.MethodHostResolveApproval, map[string]any{"approval_id": mine.ID, "approved": false, "notes": "withdrawn"}, &withdrawn)
	if withdrawn.Status != host.ApprovalDenied || withdrawn.Notes != "withdrawn" {
		t.Fatalf("the agent's own request after it withdrew it: %+v", withdrawn)
	}

	var theirs host.Approval
	call(t, h.Client, protocol.MethodHostRequestApproval, map[string]any{"title": "the host's question"}, &theirs)
	tb := newToolboxOn(t, agent, map[string]toolFunc{"deploy_service": echo})
	ch := submitAsync(t, tb.Client, deployPlan())
	var gate host.Approval
	for gate.ID == "" {
		if a := approvalOf(t, h.next(t, host.KindApprovalRequested)); a.Context["proposal_id"] == "p-test" {
			gate = a
		}
	}
	for _, id := range []string{gate.ID, theirs.ID} {
		code, msg := rpcCode(t, agent.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": true}, nil))
		if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "host.resolve_approval of an approval this connection did not raise") || !strings.Contains(msg, "host role") {
			t.Fatalf("agent worker resolving %s: %d %q", id, code, msg)
		}
	}
	if a, _ := rs.srv.host.Approval(gate.ID); a.Status != host.ApprovalPending {
		t.Fatalf("the refused agent changed the gate's approval: %+v", a)
	}
	if _, err := h.resolve(t, gate.ID, false, "no"); err != nil {
		t.Fatal(err)
	}
	if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusRejected {
		t.Fatalf("after the host's rejection: %v", st)
	}

	// A plain client under approver_role = host: its own, yes; the gate's, no.
	ts := startHostServer(t, testTimeout, Options{HostToken: "the-host-token", ApproverRole: ApproverHost})
	person, _ := subscribeHost(t, ts, &client.Options{HostToken: "the-host-token"})
	plain := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	call(t, plain.Client, protocol.MethodHostRequestApproval, map[string]any{"title": "may I?"}, &mine)
	call(t, plain.Client, protocol.MethodHostResolveApproval, map[string]any{"approval_id": mine.ID, "approved": true}, &withdrawn)
	if withdrawn.Status != host.ApprovalApproved {
		t.Fatalf("a plain client's own request: %+v", withdrawn)
	}
	ch = submitAsync(t, plain.Client, deployPlan())
	gate = approvalOf(t, person.next(t, host.KindApprovalRequested))
	for gate.Context["proposal_id"] != "p-test" {
		gate = approvalOf(t, person.next(t, host.KindApprovalRequested))
	}
	if code, msg := rpcCode(t, plain.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": gate.ID, "approved": true}, nil)); code != protocol.CodeApprovalDenied || !strings.Contains(msg, "approver_role = host") {
		t.Fatalf("a plain client resolving the gate's approval under approver_role host: %d %q", code, msg)
	}
	if _, err := person.resolve(t, gate.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusSucceeded {
		t.Fatalf("after the person approved: %v", st)
	}
}

// TestAClientNameCannotForgeWhoAsked: the name a client gives is shown to a
// person on its approvals, a line in car-server approvals watch among them,
// so a name with a control character (a newline starting a forged "asked
// by host" line, a terminal escape) is refused, and such a client_version
// names nobody.
func TestAClientNameCannotForgeWhoAsked(t *testing.T) {
	ts := startServer(t, Options{})
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{SkipHandshake: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, name := range []string{"my-ide\n  asked by host, connection c1", "my-ide\x1b[2K", "my-ide\u2028", "\u202eedi-ym"} {
		code, msg := rpcCode(t, c.Call(ctxT(t), protocol.MethodServerHandshake, map[string]any{"protocol_version": protocol.ProtocolVersion, "client_name": name}, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, "client_name") {
			t.Errorf("client_name %q: %d %q, want -32602 naming client_name", name, code, msg)
		}
	}
	call(t, c, protocol.MethodServerHandshake, map[string]any{"protocol_version": protocol.ProtocolVersion, "client_version": "1.2\n  asked by host"}, nil)
	var raised host.Approval
	call(t, c, protocol.MethodHostRequestApproval, map[string]any{"title": "merge the branch"}, &raised)
	if by := raised.RequestedBy; by == nil || by.ClientName != "" {
		t.Fatalf("a client_version with a newline named the client: %+v", by)
	}
}
