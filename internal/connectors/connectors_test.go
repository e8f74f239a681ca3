package connectors

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

const everything = "@modelcontextprotocol/server-everything"

// outputText is the first text content of an action's output.
func outputText(t *testing.T, r protocol.ActionResult) string {
	t.Helper()
	out, ok := r.Output.(map[string]any)
	if !ok {
		t.Fatalf("action %s output is %T, not a CallToolResult object: %+v", r.ActionID, r.Output, r)
	}
	content, _ := out["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			return m["text"].(string)
		}
	}
	t.Fatalf("action %s output has no text content: %v", r.ActionID, out)
	return ""
}

// exerciseEverything enables two tools of a connected server-everything
// connector and runs a proposal that passes one's structured content to
// the other through a reference.
func exerciseEverything(t *testing.T, h *harness, slug string) {
	t.Helper()
	echo, weather := Canonical(slug, "echo"), Canonical(slug, "get-structured-content")
	views, err := h.m.Tools(slug)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Enabled {
			t.Fatalf("tool %s is enabled before anyone enabled it", v.Name)
		}
	}
	for _, s := range h.s.Tools.List() {
		if s.Name == echo {
			t.Fatal("a disabled tool is in tools.list")
		}
	}
	res := h.submit(t, protocol.Action{ID: "a", Tool: echo, Parameters: map[string]any{"message": "hi"}})
	if r := res.Results[0]; r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "connectors.enable_tools") {
		t.Fatalf("a disabled tool ran or was refused without saying how to enable it: %+v", r)
	}

	got, err := h.m.Enable(slug, []string{"echo", "get-structured-content"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Enabled, []string{"echo", "get-structured-content"}) {
		t.Fatalf("enabled %v", got.Enabled)
	}
	var listed *protocol.ToolSchema
	for _, s := range h.s.Tools.List() {
		if s.Name == echo {
			listed = &s
		}
	}
	if listed == nil || listed.Source != "mcp" || listed.Connector != slug || !listed.Idempotent || !strings.Contains(string(listed.Parameters), "message") {
		t.Fatalf("tools.list shows %+v", listed)
	}
	a := protocol.Action{ID: "x", Type: protocol.ActionToolCall, Tool: echo, Parameters: map[string]any{"message": "hi"}}
	if c := h.rt.Classify(&a); c.Tier != policy.ReadOnly || !slices.Contains(c.Signals, "mcp annotation readOnlyHint: true") {
		t.Fatalf("echo (readOnlyHint) classified %v %v", c.Tier, c.Signals)
	}

	res = h.submit(t,
		protocol.Action{ID: "w", Tool: weather, Parameters: map[string]any{"location": "Chicago"}},
		protocol.Action{ID: "e", Tool: echo, Parameters: map[string]any{"message": "$w.output.structuredContent.conditions"}},
	)
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("action %s: %s %s", r.ActionID, r.Status, r.ErrorText())
		}
	}
	if text := outputText(t, res.Results[1]); !strings.Contains(text, "Light rain / drizzle") {
		t.Fatalf("echo of the structured content answered %q", text)
	}

	// The input schema is enforced like any tool's.
	res = h.submit(t, protocol.Action{ID: "w", Tool: weather, Parameters: map[string]any{"location": "Atlantis"}})
	if r := res.Results[0]; r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "schema") {
		t.Fatalf("a call against the MCP input schema: %+v", r)
	}

	// The dispatch is on the record, with its connector and latency.
	found := false
	for _, e := range h.rt.Events.Query(protocol.EventsQueryParams{}) {
		if e.Kind == "tool_dispatched" && e.Data["source"] == "mcp" && e.Data["connector"] == slug {
			if _, ok := e.Data["latency_ms"]; ok {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no tool_dispatched event with source mcp, the connector and its latency")
	}

	d, err := h.m.Disable(slug, []string{"echo"})
	if err != nil || !slices.Equal(d.Disabled, []string{"echo"}) {
		t.Fatalf("disable: %v %v", d, err)
	}
	if _, ok := h.s.Tools.Lookup(echo); ok {
		t.Fatal("a disabled tool is still found")
	}
}

func TestEverythingOverStdio(t *testing.T) {
	script := npmServer(t, everything)
	h := newHarness(t, Options{})
	st, err := h.m.AddStdio(ctxT(t), protocol.ConnectorsAddStdioParams{Name: "Every Thing!", Command: "node", Args: []string{script, "stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Slug != "every_thing_" || !st.Connected || st.ToolCount == 0 || st.EnabledCount != 0 || st.Protocol == "" {
		t.Fatalf("status %+v", st)
	}
	exerciseEverything(t, h, st.Slug)
	if _, err := h.m.AddStdio(ctxT(t), protocol.ConnectorsAddStdioParams{Name: "EVERY-THING!", Command: "node", Args: []string{script}}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a second connector with the same slug: %v", err)
	}
}

func TestEverythingOverStreamableHTTP(t *testing.T) {
	script := npmServer(t, everything)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", script, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not say it listens within 30s")
	}
	h := newHarness(t, Options{})
	st, err := h.m.Add(ctxT(t), protocol.ConnectorsAddParams{Name: "web", URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", Headers: map[string]string{"X-Secret": "s3cr3t-value"}})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Connected || st.URL == "" {
		t.Fatalf("status %+v", st)
	}
	exerciseEverything(t, h, "web")
	// The header value is kept apart, 0600, and never in the manifest.
	man, err := os.ReadFile(filepath.Join(h.home, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(man), "s3cr3t-value") {
		t.Fatal("the manifest holds a header value")
	}
	for _, f := range []string{manifestFile, secretsFile} {
		fi, err := os.Stat(filepath.Join(h.home, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi.Mode(), err)
		}
	}
	sec, _ := os.ReadFile(filepath.Join(h.home, secretsFile))
	if !strings.Contains(string(sec), "s3cr3t-value") {
		t.Fatal("the secrets file does not hold the header")
	}
	if strings.Contains(fmt.Sprint(h.m.List()), "s3cr3t-value") {
		t.Fatal("connectors.list shows a header value")
	}

	// The server goes away: the connector says so, and a call fails at once
	// naming it.
	cmd.Process.Kill()
	cmd.Wait()
	testwait.Eventually(t, 30*time.Second, "the connector seeing its server gone", func() bool {
		st := h.m.List().Connectors[0]
		return !st.Connected && st.LastError != ""
	})
	res := h.submit(t, protocol.Action{ID: "e", Tool: Canonical("web", "get-structured-content"), Parameters: map[string]any{"location": "Chicago"}})
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "connector 'web' is disconnected") {
		t.Fatalf("a call to a server gone: %s %q", r.Status, r.ErrorText())
	}
}
