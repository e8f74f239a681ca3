package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func TestRequestApprovalFlipsAgentToWaiting(t *testing.T) {
	r := New(Options{})
	mustRegister(t, r, "c1", "a1")
	var rec recorder
	r.Subscribe("ui", true, rec.send)
	defer r.Unsubscribe("ui")

	ap, err := r.RequestApproval("c1", ApprovalRequest{AgentID: "a1", Title: "deploy?"})
	if err != nil {
		t.Fatal(err)
	}
	if ap.ClientID != "c1" || ap.Status != ApprovalPending || ap.RequiredApprovals != 1 || !strings.HasPrefix(ap.ID, "approval-") {
		t.Fatalf("approval = %+v; want client c1, pending, 1 required, an approval- id", ap)
	}
	if a := r.Agents()[0]; a.Status != StatusWaiting {
		t.Fatalf("agent status = %s, want %s", a.Status, StatusWaiting)
	}
	if k := rec.kinds(); !slices.Equal(k, []string{KindApprovalRequested, KindAgentStatusChanged}) {
		t.Fatalf("events = %v, want approval.requested then agent.status_changed", k)
	}
	if got := rec.got()[0].Payload["approval"].(Approval); got.ID != ap.ID {
		t.Fatalf("approval.requested carries %s, want %s", got.ID, ap.ID)
	}

	if _, err := r.RequestApproval("c1", ApprovalRequest{AgentID: "a1", Title: "again?"}); err != nil {
		t.Fatal(err)
	}
	if k := rec.kinds(); len(k) != 3 {
		t.Fatalf("events = %v; an agent already waiting should not change status again", k)
	}
}

func TestRequestApprovalForUnknownAgentIsKept(t *testing.T) {
	r := New(Options{})
	var rec recorder
	r.Subscribe("ui", true, rec.send)
	defer r.Unsubscribe("ui")
	ap, err := r.RequestApproval("c1", ApprovalRequest{AgentID: "ghost", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Approval(ap.ID); !ok || got.AgentID != "ghost" {
		t.Fatalf("Approval(%s) = %+v, %v", ap.ID, got, ok)
	}
	if k := rec.kinds(); !slices.Equal(k, []string{KindApprovalRequested}) {
		t.Fatalf("events = %v, want only approval.requested", k)
	}
}

func TestApprovalValidation(t *testing.T) {
	r := New(Options{})
	cases := []struct {
		name string
		conn string
		req  ApprovalRequest
	}{
		{"empty title", "c1", ApprovalRequest{}},
		{"negative required", "c1", ApprovalRequest{Title: "t", RequiredApprovals: -1}},
		{"client approval without a connection", "", ApprovalRequest{Title: "t"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := r.RequestApproval(c.conn, c.req); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name     string
		raisedBy string // "" raises a system-level approval
		resolver string
		approved bool
		wantErr  error
		want     string
	}{
		{"raiser approves its own", "A", "A", true, nil, ApprovalApproved},
		{"raiser denies its own", "A", "A", false, nil, ApprovalDenied},
		{"another session may not resolve a client's", "A", "B", true, ErrNotOwner, ApprovalPending},
		{"anyone resolves a system one", "", "B", true, nil, ApprovalApproved},
		{"anyone denies a system one", "", "C", false, nil, ApprovalDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := New(Options{})
			var ap Approval
			var err error
			if c.raisedBy == "" {
				ap, err = r.RaiseSystem(ApprovalRequest{Title: "ws.method:mail.send"})
			} else {
				ap, err = r.RequestApproval(c.raisedBy, ApprovalRequest{Title: "t"})
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Resolve(c.resolver, ap.ID, c.approved, "looks fine", "conn:"+c.resolver)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if kept, _ := r.Approval(ap.ID); kept.Status != c.want {
				t.Fatalf("status = %s, want %s", kept.Status, c.want)
			}
			if c.wantErr != nil {
				return
			}
			if got.ResolvedBy != "conn:"+c.resolver || got.Approved == nil || *got.Approved != c.approved ||
				got.ResolvedAt == nil || got.Notes != "looks fine" {
				t.Fatalf("resolved approval = %+v", got)
			}
		})
	}
}

func TestResolveOnlyPending(t *testing.T) {
	r := New(Options{})
	ap, err := r.RaiseSystem(ApprovalRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve("A", ap.ID, true, "", "conn:A"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		do      func() error
		wantErr error
		says    string
	}{
		{"resolve twice", func() error { _, err := r.Resolve("B", ap.ID, false, "", "conn:B"); return err }, ErrInvalid, "already approved"},
		{"expire a resolved one", func() error { _, err := r.Expire(ap.ID, "timeout"); return err }, ErrInvalid, "already approved"},
		{"resolve unknown", func() error { _, err := r.Resolve("A", "nope", true, "", "conn:A"); return err }, ErrNotFound, "nope"},
		{"expire unknown", func() error { _, err := r.Expire("nope", "timeout"); return err }, ErrNotFound, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v, want %v saying %q", err, c.wantErr, c.says)
			}
		})
	}
	if kept, _ := r.Approval(ap.ID); kept.Status != ApprovalApproved || *kept.Approved != true {
		t.Fatalf("the refused calls changed the approval: %+v", kept)
	}
}

func TestExpire(t *testing.T) {
	r := New(Options{})
	var rec recorder
	r.Subscribe("ui", true, rec.send)
	defer r.Unsubscribe("ui")
	ap, err := r.RaiseSystem(ApprovalRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Expire(ap.ID, "no decision within 60s")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ApprovalExpired || got.ResolvedAt == nil || got.Notes != "no decision within 60s" {
		t.Fatalf("expired approval = %+v", got)
	}
	evs := rec.got()
	last := evs[len(evs)-1]
	if last.Kind != KindApprovalResolved || last.Payload["approval"].(Approval).Status != ApprovalExpired {
		t.Fatalf("last event = %+v, want approval.resolved carrying the expired approval", last)
	}
}

func TestApprovalsBound(t *testing.T) {
	r := New(Options{MaxApprovals: 3})
	var raised []Approval
	for range 3 {
		ap, err := r.RaiseSystem(ApprovalRequest{Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		raised = append(raised, ap)
	}
	if _, err := r.RaiseSystem(ApprovalRequest{Title: "t"}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "all 3") {
		t.Fatalf("err = %v, want ErrLimit naming the 3 pending", err)
	}
	// Resolve the middle one, expire the last: the middle is the oldest resolved.
	if _, err := r.Resolve("A", raised[1].ID, true, "", "conn:A"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Expire(raised[2].ID, "timeout"); err != nil {
		t.Fatal(err)
	}
	fourth, err := r.RaiseSystem(ApprovalRequest{Title: "t"})
	if err != nil {
		t.Fatalf("with a resolved approval to evict: %v", err)
	}
	var kept []string
	for _, ap := range r.Approvals() {
		kept = append(kept, ap.ID)
	}
	if want := []string{raised[0].ID, raised[2].ID, fourth.ID}; !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v (the oldest resolved evicted, order kept)", kept, want)
	}
	if _, ok := r.Approval(raised[1].ID); ok {
		t.Fatal("the evicted approval is still found by id")
	}
}

func TestPendingPerConnectionBound(t *testing.T) {
	r := New(Options{MaxPendingPerConn: 2})
	first, err := r.RequestApproval("c1", ApprovalRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RequestApproval("c1", ApprovalRequest{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RequestApproval("c1", ApprovalRequest{Title: "t"}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "2 approvals pending") {
		t.Fatalf("err = %v, want ErrLimit naming the 2 pending", err)
	}
	if _, err := r.RequestApproval("c2", ApprovalRequest{Title: "t"}); err != nil {
		t.Fatalf("another connection: %v", err)
	}
	if _, err := r.RaiseSystem(ApprovalRequest{Title: "t"}); err != nil {
		t.Fatalf("system approval: %v", err)
	}
	if _, err := r.Resolve("c1", first.ID, false, "", "conn:c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RequestApproval("c1", ApprovalRequest{Title: "t"}); err != nil {
		t.Fatalf("after resolving one: %v", err)
	}
}

// TestGateApprovalsCountAgainstWhoeverCausedThem: the approvals the gate
// raises for a connection's proposals share that connection's pending
// bound with the requests it raised itself, an agent's over all its
// connections; the gate's approvals stay resolvable by any approver, and
// each names who caused it, with the agent's registered name.
func TestGateApprovalsCountAgainstWhoeverCausedThem(t *testing.T) {
	r := New(Options{MaxPendingPerConn: 2})
	op := func(fp string) Operation { return Operation{Fingerprint: fp, RequiredTier: "full_access"} }
	plain := &Requester{Principal: protocol.PrincipalPlain, ClientName: "my-ide", Connection: "c1"}
	if _, err := r.RequestApprovalBy(*plain, ApprovalRequest{Title: "mine"}); err != nil {
		t.Fatal(err)
	}
	gate, err := r.RaiseGateFor(ApprovalRequest{Title: "deploy"}, op("f1"), plain)
	if err != nil {
		t.Fatal(err)
	}
	if gate.ClientID != "" || gate.RequestedBy == nil || *gate.RequestedBy != *plain {
		t.Fatalf("the gate's approval %+v names %+v", gate, gate.RequestedBy)
	}
	if _, err := r.RaiseGateFor(ApprovalRequest{Title: "deploy"}, op("f2"), plain); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "connection c1 already has 2 approvals pending") {
		t.Fatalf("a third for c1: %v", err)
	}
	if _, err := r.RaiseGateFor(ApprovalRequest{Title: "deploy"}, op("f2"), &Requester{Principal: protocol.PrincipalPlain, Connection: "c2"}); err != nil {
		t.Fatalf("another connection: %v", err)
	}
	if _, err := r.Resolve("c9", gate.ID, true, "", "conn:c9"); err != nil {
		t.Fatalf("any approver resolves the gate's approval: %v", err)
	}
	if _, err := r.RaiseGateFor(ApprovalRequest{Title: "deploy"}, op("f3"), plain); err != nil {
		t.Fatalf("after one was resolved: %v", err)
	}

	if _, err := r.RegisterAgent("a1", AgentRequest{ID: "planner", Name: "The Planner", Kind: "callback"}); err != nil {
		t.Fatal(err)
	}
	for i, conn := range []string{"a1", "a2"} {
		by := Requester{Principal: protocol.PrincipalAgent, AgentID: "planner", Connection: conn}
		ap, err := r.RaiseGateFor(ApprovalRequest{Title: "deploy"}, op(fmt.Sprint("g", i)), &by)
		if err != nil {
			t.Fatal(err)
		}
		if ap.RequestedBy.AgentName != "The Planner" {
			t.Fatalf("the agent's name: %+v", ap.RequestedBy)
		}
	}
	by := Requester{Principal: protocol.PrincipalAgent, AgentID: "planner", Connection: "a3"}
	if _, err := r.RequestApprovalBy(by, ApprovalRequest{Title: "t"}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "agent planner already has 2") {
		t.Fatalf("a third for agent planner on a third connection: %v", err)
	}
}
