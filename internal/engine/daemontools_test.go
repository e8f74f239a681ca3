package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// A daemon tool is in every session's registry and list, runs through its
// own executor (not the session's), and is classified from its provider's
// classification, raised by what its parameters show.
func TestDaemonToolsRunThroughTheirOwnExecutor(t *testing.T) {
	dt := NewDaemonTools(SchemaLimits{})
	own := &countingExecutor{}
	err := dt.Set("fs", []DaemonTool{{
		Schema: protocol.ToolSchema{Name: "mcp_fs_read", Parameters: json.RawMessage(`{"type":"object","required":["path"]}`)},
		Source: "mcp",
		Class:  &policy.Classification{Tier: policy.ReadOnly, Reversibility: protocol.Reversible, Signals: []string{"readOnlyHint"}},
		Exec:   own,
	}})
	if err != nil {
		t.Fatal(err)
	}
	sessionExec := &countingExecutor{}
	rt, s := openRuntime(t, Options{DaemonTools: dt}, sessionExec)
	list := s.Tools.List()
	var listed *protocol.ToolSchema
	for i := range list {
		if list[i].Name == "mcp_fs_read" {
			listed = &list[i]
		}
	}
	if listed == nil || listed.Source != "mcp" || listed.Connector != "fs" {
		t.Fatalf("tools.list does not show the daemon tool with its source: %+v", list)
	}
	a := protocol.Action{ID: "a", Type: protocol.ActionToolCall, Tool: "mcp_fs_read", Parameters: map[string]any{"path": "/tmp/x"}, FailureBehavior: protocol.FailAbort}
	if c := rt.Classify(&a); c.Tier != policy.ReadOnly {
		t.Fatalf("classified %v, want read_only from the provider", c.Tier)
	}
	secret := a
	secret.Parameters = map[string]any{"path": "/home/u/.ssh/id_rsa"}
	if c := rt.Classify(&secret); c.Tier != policy.FullAccess {
		t.Fatalf("a credential path classified %v, want full_access", c.Tier)
	}
	res, err := rt.Submit(ctxT(t), &Submission{Proposal: &protocol.ActionProposal{Actions: []protocol.Action{a}}, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Status != protocol.StatusSucceeded || own.calls != 1 || sessionExec.calls != 0 {
		t.Fatalf("status %s, daemon executor %d calls, session executor %d", res.Results[0].Status, own.calls, sessionExec.calls)
	}
	bad := a
	bad.Parameters = map[string]any{}
	res, err = rt.Submit(ctxT(t), &Submission{Proposal: &protocol.ActionProposal{Actions: []protocol.Action{bad}}, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Status == protocol.StatusSucceeded || own.calls != 1 {
		t.Fatalf("a call against the daemon tool's schema ran: %+v", res.Results[0])
	}
	dt.Remove("fs")
	if _, ok := s.Tools.Lookup("mcp_fs_read"); ok {
		t.Fatal("a removed daemon tool is still found")
	}
}

func TestAClientCannotRegisterADaemonToolName(t *testing.T) {
	r := NewToolRegistry(0, SchemaLimits{})
	if _, err := r.Register([]protocol.ToolSchema{{Name: "mcp_fs_read"}}); err == nil || !strings.Contains(err.Error(), "mcp_") {
		t.Fatalf("registered a daemon tool name: %v", err)
	}
}

func TestDaemonToolsRefuseAnotherOwnersName(t *testing.T) {
	dt := NewDaemonTools(SchemaLimits{})
	exec := &countingExecutor{}
	if err := dt.Set("a", []DaemonTool{{Schema: protocol.ToolSchema{Name: "mcp_x"}, Exec: exec}}); err != nil {
		t.Fatal(err)
	}
	if err := dt.Set("b", []DaemonTool{{Schema: protocol.ToolSchema{Name: "mcp_x"}, Exec: exec}}); err == nil {
		t.Fatal("two owners hold one name")
	}
	if err := dt.Set("b", []DaemonTool{{Schema: protocol.ToolSchema{Name: "plain"}, Exec: exec}}); err == nil {
		t.Fatal("a daemon tool outside the prefix was taken")
	}
}
