package connectors

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

const filesystem = "@modelcontextprotocol/server-filesystem"

// server-filesystem over stdio on a temporary directory: annotations
// classify its tools, a call writes and reads a real file, deny_connector
// denies every tool.
func TestFilesystemOverStdio(t *testing.T) {
	script := npmServer(t, filesystem)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{})
	st, err := h.m.AddStdio(ctxT(t), protocol.ConnectorsAddStdioParams{Name: "files", Command: "node", Args: []string{script, root}})
	if err != nil {
		t.Fatal(err)
	}
	views, err := h.m.Tools(st.Slug)
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]string{}
	for _, v := range views {
		tiers[v.Name] = v.Tier
	}
	// readOnlyHint true; destructiveHint false; destructiveHint true.
	if tiers["read_text_file"] != "read_only" || tiers["create_directory"] != "sandbox_edit" || tiers["write_file"] != "full_access" {
		t.Fatalf("tiers from annotations: %v", tiers)
	}
	if _, err := h.m.Enable("files", []string{"read_text_file", "write_file", "create_directory"}); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]policy.Tier{"read_text_file": policy.ReadOnly, "create_directory": policy.SandboxEdit, "write_file": policy.FullAccess} {
		a := protocol.Action{Type: protocol.ActionToolCall, Tool: Canonical("files", tool), Parameters: map[string]any{"path": filepath.Join(root, "x")}}
		c := h.rt.Classify(&a)
		if c.Tier != want || len(c.Signals) == 0 || !strings.HasPrefix(c.Signals[0], "mcp annotation") {
			t.Errorf("%s classified %v %v, want %v from an annotation", tool, c.Tier, c.Signals, want)
		}
	}

	// A full_access tool (destructiveHint true) needs a person's approval
	// (the daemon's tests park and release one); a sandbox_edit one and a
	// read_only one run.
	res := h.submit(t, protocol.Action{ID: "w", Tool: Canonical("files", "write_file"), Parameters: map[string]any{"path": filepath.Join(root, "out.txt"), "content": "x"}})
	if r := res.Results[0]; r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "permission.approve") {
		t.Fatalf("write_file without an approval: %s %q", r.Status, r.ErrorText())
	}
	dir := filepath.Join(root, "made")
	res = h.submit(t,
		protocol.Action{ID: "d", Tool: Canonical("files", "create_directory"), Parameters: map[string]any{"path": dir}},
		protocol.Action{ID: "r", Tool: Canonical("files", "read_text_file"), Parameters: map[string]any{"path": filepath.Join(root, "hello.txt")}},
	)
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("%s: %s %s", r.ActionID, r.Status, r.ErrorText())
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("create_directory made nothing: %v", err)
	}
	if text := outputText(t, res.Results[1]); text != "hello from disk" {
		t.Fatalf("read_text_file answered %q", text)
	}

	// isError: reading outside the allowed directory fails the action with
	// the server's text.
	res = h.submit(t, protocol.Action{ID: "r", Tool: Canonical("files", "read_text_file"), Parameters: map[string]any{"path": "/etc/hostname"}})
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "isError") || !strings.Contains(r.ErrorText(), "denied") {
		t.Fatalf("a read outside the root: %s %q", r.Status, r.ErrorText())
	}

	h.s.Policies.Add(policy.Policy{Name: "no_files", Rule: policy.DenyConnector{Slug: "files"}})
	res = h.submit(t, protocol.Action{ID: "r", Tool: Canonical("files", "read_text_file"), Parameters: map[string]any{"path": filepath.Join(root, "hello.txt")}})
	if r := res.Results[0]; r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "connector 'files' is denied") {
		t.Fatalf("deny_connector: %s %q", r.Status, r.ErrorText())
	}
	if !slices.ContainsFunc(h.rt.Events.Query(protocol.EventsQueryParams{}), func(e protocol.Event) bool { return e.Kind == "policy_violation" }) {
		t.Fatal("no policy_violation event")
	}
}
