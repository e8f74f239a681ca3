package host

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestRegisterMintsIDs(t *testing.T) {
	r := New(Options{})
	seen := map[string]bool{}
	for range 3 {
		a, err := r.RegisterAgent("c1", AgentRequest{Name: "worker", Kind: "cli"})
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(a.ID, "agent-")
		if !ok {
			t.Fatalf("minted id %q lacks the agent- prefix", a.ID)
		}
		if _, err := uuid.Parse(rest); err != nil {
			t.Fatalf("minted id %q does not end in a uuid: %v", a.ID, err)
		}
		if seen[a.ID] {
			t.Fatalf("id %q minted twice", a.ID)
		}
		seen[a.ID] = true
	}
	if n := len(r.Agents()); n != 3 {
		t.Fatalf("%d agents registered, want 3", n)
	}
}

func TestRegisterRecordsOwnerAndDefaults(t *testing.T) {
	r := New(Options{})
	var rec recorder
	r.Subscribe("ui", false, rec.send)
	defer r.Unsubscribe("ui")
	a := mustRegister(t, r, "c1", "a1")
	if a.Status != StatusIdle || a.SessionID != "c1" || a.RegisteredAt.IsZero() {
		t.Fatalf("registered %+v; want status idle, session c1, a registration time", a)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"capabilities":[]`) {
		t.Fatalf("capabilities not an empty array on the wire: %s", b)
	}
	evs := rec.got()
	if len(evs) != 1 || evs[0].Kind != KindAgentRegistered || evs[0].Payload["agent"].(Agent).ID != "a1" {
		t.Fatalf("events = %+v, want one agent.registered carrying the agent", evs)
	}
}

func TestReRegisterBySameConnectionUpdates(t *testing.T) {
	r := New(Options{})
	first := mustRegister(t, r, "c1", "a1")
	if _, err := r.SetStatus("c1", StatusRequest{AgentID: "a1", Status: StatusRunning}); err != nil {
		t.Fatal(err)
	}
	again, err := r.RegisterAgent("c1", AgentRequest{ID: "a1", Name: "renamed", Kind: "cli", Capabilities: []string{"chat"}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Name != "renamed" || again.Capabilities[0] != "chat" || again.Status != StatusRunning || !again.RegisteredAt.Equal(first.RegisteredAt) {
		t.Fatalf("re-registered %+v; want the new name and capabilities, status and registration time kept", again)
	}
	if n := len(r.Agents()); n != 1 {
		t.Fatalf("%d agents after re-registering, want 1", n)
	}
}

func TestOwnership(t *testing.T) {
	r := New(Options{})
	mustRegister(t, r, "owner", "a1")
	const want = "agent 'a1' is owned by another session"
	cases := []struct {
		name string
		do   func() error
	}{
		{"set_status", func() error {
			_, err := r.SetStatus("other", StatusRequest{AgentID: "a1", Status: StatusRunning})
			return err
		}},
		{"unregister", func() error { return r.UnregisterAgent("other", "a1") }},
		{"re-register", func() error {
			_, err := r.RegisterAgent("other", AgentRequest{ID: "a1", Name: "mine now", Kind: "cli"})
			return err
		}},
		{"request_approval for it", func() error {
			_, err := r.RequestApproval("other", ApprovalRequest{AgentID: "a1", Title: "t"})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if !errors.Is(err, ErrNotOwner) || err.Error() != want {
				t.Fatalf("err = %v, want ErrNotOwner reading %q", err, want)
			}
		})
	}
	agents := r.Agents()
	if len(agents) != 1 || agents[0].SessionID != "owner" || agents[0].Status != StatusIdle || agents[0].Name != "agent a1" {
		t.Fatalf("agent changed by refused calls: %+v", agents)
	}
	if n := len(r.Approvals()); n != 0 {
		t.Fatalf("%d approvals recorded by a refused request", n)
	}
}

func TestRegisterValidation(t *testing.T) {
	r := New(Options{})
	cases := []struct {
		name string
		req  AgentRequest
	}{
		{"empty name", AgentRequest{Kind: "cli"}},
		{"blank name", AgentRequest{Name: "  ", Kind: "cli"}},
		{"empty kind", AgentRequest{Name: "n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := r.RegisterAgent("c1", c.req); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestSetStatus(t *testing.T) {
	r := New(Options{})
	mustRegister(t, r, "c1", "a1")
	cases := []struct {
		status  string
		agentID string
		wantErr error
	}{
		{StatusIdle, "a1", nil},
		{StatusRunning, "a1", nil},
		{StatusWaiting, "a1", nil},
		{StatusPaused, "a1", nil},
		{StatusCompleted, "a1", nil},
		{StatusErrored, "a1", nil},
		{StatusStopped, "a1", nil},
		{"done", "a1", ErrInvalid},
		{"", "a1", ErrInvalid},
		{"Running", "a1", ErrInvalid},
		{StatusRunning, "nobody", ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.status+"/"+c.agentID, func(t *testing.T) {
			a, err := r.SetStatus("c1", StatusRequest{AgentID: c.agentID, Status: c.status, CurrentTask: "task", Message: "msg"})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if c.wantErr == nil && (a.Status != c.status || a.CurrentTask != "task" || a.Message != "msg") {
				t.Fatalf("agent after set_status = %+v", a)
			}
		})
	}
}

func TestSetStatusEmitsStatusChanged(t *testing.T) {
	r := New(Options{})
	mustRegister(t, r, "c1", "a1")
	var rec recorder
	r.Subscribe("ui", false, rec.send)
	defer r.Unsubscribe("ui")
	if _, err := r.SetStatus("c1", StatusRequest{AgentID: "a1", Status: StatusCompleted, Message: "done"}); err != nil {
		t.Fatal(err)
	}
	evs := rec.got()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Kind != KindAgentStatusChanged || ev.AgentID != "a1" || ev.Message != "done" ||
		ev.Payload["agent"].(Agent).Status != StatusCompleted || ev.Payload["previous_status"] != StatusIdle {
		t.Fatalf("event = %+v", ev)
	}
}

func TestAgentsPerConnectionBound(t *testing.T) {
	r := New(Options{MaxAgentsPerConn: 2})
	mustRegister(t, r, "c1", "a1")
	mustRegister(t, r, "c1", "a2")
	_, err := r.RegisterAgent("c1", AgentRequest{ID: "a3", Name: "n", Kind: "cli"})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "2 agents") || !strings.Contains(err.Error(), "unregister") {
		t.Fatalf("err = %v, want ErrLimit naming the bound of 2 and what to do", err)
	}
	mustRegister(t, r, "c1", "a2") // updating one already held is not a new agent
	mustRegister(t, r, "c2", "b1") // the bound is per connection
	if err := r.UnregisterAgent("c1", "a1"); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, "c1", "a3")
}

func TestUnregister(t *testing.T) {
	r := New(Options{})
	mustRegister(t, r, "c1", "a1")
	var rec recorder
	r.Subscribe("ui", false, rec.send)
	defer r.Unsubscribe("ui")
	if err := r.UnregisterAgent("c1", "a1"); err != nil {
		t.Fatal(err)
	}
	if err := r.UnregisterAgent("c1", "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second unregister err = %v, want ErrNotFound", err)
	}
	if k := rec.kinds(); len(k) != 1 || k[0] != KindAgentUnregistered {
		t.Fatalf("events = %v, want one agent.unregistered", k)
	}
}
