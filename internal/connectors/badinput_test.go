package connectors

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// healthy adds a well-behaved connector and enables its tool, so a test
// can show that bad input left the others working.
func healthy(t *testing.T, h *harness) {
	t.Helper()
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "healthy", "ok", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("healthy", []string{"call"}); err != nil {
		t.Fatal(err)
	}
}

func stillWorks(t *testing.T, h *harness) {
	t.Helper()
	res := h.submit(t, protocol.Action{ID: "ok", Tool: Canonical("healthy", "call")})
	if r := res.Results[0]; r.Status != protocol.StatusSucceeded {
		t.Fatalf("the healthy connector stopped working: %s %s", r.Status, r.ErrorText())
	}
}

func TestBadCommands(t *testing.T) {
	h := newHarness(t, Options{})
	healthy(t, h)
	_, err := h.m.AddStdio(ctxT(t), protocol.ConnectorsAddStdioParams{Name: "ghost", Command: "/nonexistent/mcp-server"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") || !strings.Contains(err.Error(), "not added") {
		t.Fatalf("a command that does not exist: %v", err)
	}
	_, err = h.m.AddStdio(ctxT(t), selfServer(t, "quitter", "exit", nil))
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "exiting at once") {
		t.Fatalf("a command that exits at once: %v", err)
	}
	if n := len(h.m.List().Connectors); n != 1 {
		t.Fatalf("%d connectors kept; the refused ones must not be", n)
	}
	stillWorks(t, h)
}

func TestAURLThatIsNotAnMCPServer(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("<html>not here</html>"))
	}))
	defer web.Close()
	h := newHarness(t, Options{})
	healthy(t, h)
	_, err := h.m.Add(ctxT(t), protocol.ConnectorsAddParams{Name: "web", URL: web.URL + "/mcp"})
	if err == nil || !strings.Contains(err.Error(), "is it a Streamable HTTP MCP server?") {
		t.Fatalf("a URL that is not an MCP server: %v", err)
	}
	if _, err := h.m.Add(ctxT(t), protocol.ConnectorsAddParams{Name: "web", URL: "file:///etc/passwd"}); err == nil || !strings.Contains(err.Error(), "http://") {
		t.Fatalf("a file URL: %v", err)
	}
	stillWorks(t, h)
}

// Malformed JSON-RPC fails the call, naming the connector; the connector
// reconnects and the others carry on.
func TestMalformedJSONRPC(t *testing.T) {
	h := newHarness(t, Options{})
	healthy(t, h)
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "garbled", "garbage", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("garbled", []string{"call"}); err != nil {
		t.Fatal(err)
	}
	res := h.submit(t, protocol.Action{ID: "g", Tool: Canonical("garbled", "call")})
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "connector 'garbled'") || !strings.Contains(r.ErrorText(), "malformed JSON-RPC") {
		t.Fatalf("a malformed answer: %s %q", r.Status, r.ErrorText())
	}
	stillWorks(t, h)
	testwait.Eventually(t, 30*time.Second, "the garbled connector reconnecting", func() bool {
		for _, c := range h.m.List().Connectors {
			if c.Slug == "garbled" && c.Connected {
				return true
			}
		}
		return false
	})
}

// A 50 MiB result is refused at mcp_max_result_bytes (16 MiB by default).
func TestAHugeResult(t *testing.T) {
	h := newHarness(t, Options{})
	healthy(t, h)
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "huge", "huge", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("huge", []string{"call"}); err != nil {
		t.Fatal(err)
	}
	res := h.submit(t, protocol.Action{ID: "h", Tool: Canonical("huge", "call")})
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "mcp_max_result_bytes") {
		t.Fatalf("a 50 MiB result: %s %q", r.Status, r.ErrorText())
	}
	stillWorks(t, h)
}

func TestBadToolNamesAndSchemas(t *testing.T) {
	h := newHarness(t, Options{})
	healthy(t, h)
	for _, mode := range []string{"badnames", "bigschema"} {
		if _, err := h.m.AddStdio(ctxT(t), selfServer(t, mode, mode, nil)); err != nil {
			t.Fatal(err)
		}
	}
	views, err := h.m.Tools("badnames")
	if err != nil {
		t.Fatal(err)
	}
	errs := map[string]string{}
	for _, v := range views {
		errs[v.Name] = v.Error
	}
	if errs["good"] != "" || !strings.Contains(errs["bad.name"], "[A-Za-z0-9_-]") || !strings.Contains(errs["spa ce"], "[A-Za-z0-9_-]") {
		t.Fatalf("tool errors: %v", errs)
	}
	if _, err := h.m.Enable("badnames", []string{"good", "bad.name"}); err == nil || !strings.Contains(err.Error(), "cannot be enabled") {
		t.Fatalf("enabling a bad name: %v", err)
	}
	if _, err := h.m.Enable("badnames", []string{"good"}); err != nil {
		t.Fatal(err)
	}

	views, err = h.m.Tools("bigschema")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == "huge" && !strings.Contains(v.Error, "max_schema") {
			t.Fatalf("a schema past the bounds: %+v", v)
		}
	}
	if _, err := h.m.Enable("bigschema", []string{"huge"}); err == nil || !strings.Contains(err.Error(), "max_schema") {
		t.Fatalf("enabling a schema past the bounds: %v", err)
	}
	if _, err := h.m.Enable("bigschema", []string{"good"}); err != nil {
		t.Fatal(err)
	}
	res := h.submit(t, protocol.Action{ID: "a", Tool: Canonical("badnames", "good")}, protocol.Action{ID: "b", Tool: Canonical("bigschema", "good")})
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("%s: %s %s", r.ActionID, r.Status, r.ErrorText())
		}
	}
	stillWorks(t, h)
}

// A tools/list of 10,000 tools is refused whole at mcp_max_tools.
func TestTenThousandTools(t *testing.T) {
	h := newHarness(t, Options{})
	healthy(t, h)
	_, err := h.m.AddStdio(ctxT(t), selfServer(t, "many", "many", nil))
	if err == nil || !strings.Contains(err.Error(), "more than 1000 tools (mcp_max_tools)") {
		t.Fatalf("10,000 tools: %v", err)
	}
	stillWorks(t, h)
}

// The action's timeout ends the call, and the server hears
// notifications/cancelled (its handler's context ends).
func TestATimeoutCancelsTheCall(t *testing.T) {
	h := newHarness(t, Options{})
	dir := t.TempDir()
	cancelled := filepath.Join(dir, "cancelled")
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "slow", "slow", map[string]string{"CANCEL_FILE": cancelled, "STARTED_FILE": filepath.Join(dir, "started")})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("slow", []string{"wait"}); err != nil {
		t.Fatal(err)
	}
	ms := uint64(300)
	res := h.submit(t, protocol.Action{ID: "w", Tool: Canonical("slow", "wait"), TimeoutMs: &ms})
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "notifications/cancelled") || !strings.Contains(r.ErrorText(), "timed out") {
		t.Fatalf("a call past its timeout: %s %q", r.Status, r.ErrorText())
	}
	testwait.Eventually(t, 30*time.Second, "the server seeing notifications/cancelled", func() bool {
		data, _ := os.ReadFile(cancelled)
		return string(data) == "cancelled"
	})
}

// The server process killed mid-call: the call fails naming the
// connector, the status says it is down and why, and an action fails at
// once until it is back.
func TestServerKilledMidCall(t *testing.T) {
	h := newHarness(t, Options{BackoffMin: time.Hour, BackoffMax: time.Hour})
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "victim", "slow", map[string]string{"CANCEL_FILE": filepath.Join(dir, "c"), "STARTED_FILE": started})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("victim", []string{"wait"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *protocol.ProposalResult, 1)
	go func() {
		res, _ := h.rt.Submit(ctxT(t), submission(h, protocol.Action{ID: "w", Tool: Canonical("victim", "wait")}))
		done <- res
	}()
	var pid int
	testwait.Eventually(t, 30*time.Second, "the call reaching the server", func() bool {
		data, err := os.ReadFile(started)
		pid, _ = strconv.Atoi(string(data))
		return err == nil && pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil {
		t.Fatal("no result")
	}
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "connector 'victim'") {
		t.Fatalf("the call whose server died: %s %q", r.Status, r.ErrorText())
	}
	var st protocol.ConnectorStatus
	testwait.Eventually(t, 30*time.Second, "the status saying the connector is down", func() bool {
		st = h.m.List().Connectors[0]
		return !st.Connected && st.LastError != ""
	})
	if !strings.Contains(st.LastError, "exited") {
		t.Fatalf("last_error %q", st.LastError)
	}
	res = h.submit(t, protocol.Action{ID: "w", Tool: Canonical("victim", "wait")})
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "connector 'victim' is disconnected") {
		t.Fatalf("a call on a disconnected connector: %s %q", r.Status, r.ErrorText())
	}
}

// Enabled tools survive a restart: a second Manager on the same $CAR_HOME
// reconnects and publishes them again.
func TestRestartKeepsEnabledTools(t *testing.T) {
	home := t.TempDir()
	first := newHarness(t, Options{Home: home})
	if _, err := first.m.AddStdio(ctxT(t), selfServer(t, "kept", "ok", map[string]string{"SECRET_ENV": "hush"})); err != nil {
		t.Fatal(err)
	}
	if _, err := first.m.Enable("kept", []string{"call"}); err != nil {
		t.Fatal(err)
	}
	first.m.Close()
	man, _ := os.ReadFile(filepath.Join(home, manifestFile))
	if strings.Contains(string(man), "hush") {
		t.Fatal("an env value is in the manifest")
	}

	second := newHarness(t, Options{Home: home})
	if err := second.m.Start(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 30*time.Second, "the kept connector's tool published again", func() bool {
		_, ok := second.s.Tools.Lookup(Canonical("kept", "call"))
		return ok
	})
	res := second.submit(t, protocol.Action{ID: "k", Tool: Canonical("kept", "call")})
	if r := res.Results[0]; r.Status != protocol.StatusSucceeded {
		t.Fatalf("after a restart: %s %s", r.Status, r.ErrorText())
	}
	if _, err := second.m.Remove("kept"); err != nil {
		t.Fatal(err)
	}
	man, _ = os.ReadFile(filepath.Join(home, manifestFile))
	if strings.Contains(string(man), "kept") {
		t.Fatalf("a removed connector is still in the manifest: %s", man)
	}
}

// notifications/tools/list_changed lists the tools again; the enabled ones
// stay enabled and the new one comes in disabled.
func TestToolsListChangedKeepsEnabledTools(t *testing.T) {
	h := newHarness(t, Options{})
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "grower", "grow", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("grower", []string{"grow"}); err != nil {
		t.Fatal(err)
	}
	res := h.submit(t, protocol.Action{ID: "g", Tool: Canonical("grower", "grow")})
	if r := res.Results[0]; r.Status != protocol.StatusSucceeded {
		t.Fatalf("grow: %s %s", r.Status, r.ErrorText())
	}
	var views []protocol.ConnectorTool
	testwait.Eventually(t, 30*time.Second, "the new tool listed after tools/list_changed", func() bool {
		views, _ = h.m.Tools("grower")
		return len(views) == 2
	})
	if views[0].Name != "grow" || !views[0].Enabled || views[1].Name != "grown" || views[1].Enabled {
		t.Fatalf("after tools/list_changed: %+v", views)
	}
	if _, ok := h.s.Tools.Lookup(Canonical("grower", "grow")); !ok {
		t.Fatal("the enabled tool is gone after tools/list_changed")
	}
}

// proposal.cancel ends the call the same way: the server hears
// notifications/cancelled.
func TestProposalCancelCancelsTheCall(t *testing.T) {
	h := newHarness(t, Options{})
	dir := t.TempDir()
	cancelled, started := filepath.Join(dir, "cancelled"), filepath.Join(dir, "started")
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "slow", "slow", map[string]string{"CANCEL_FILE": cancelled, "STARTED_FILE": started})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("slow", []string{"wait"}); err != nil {
		t.Fatal(err)
	}
	sub := submission(h, protocol.Action{ID: "w", Tool: Canonical("slow", "wait")})
	sub.Proposal.ID = "p-cancel"
	done := make(chan *protocol.ProposalResult, 1)
	go func() {
		res, _ := h.rt.Submit(ctxT(t), sub)
		done <- res
	}()
	testwait.Eventually(t, 30*time.Second, "the call reaching the server", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	if !h.rt.Cancel("p-cancel", "changed my mind", "s1", true) {
		t.Fatal("proposal.cancel found nothing to cancel")
	}
	res := <-done
	if r := res.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "notifications/cancelled") {
		t.Fatalf("a cancelled call: %s %q", r.Status, r.ErrorText())
	}
	testwait.Eventually(t, 30*time.Second, "the server seeing notifications/cancelled", func() bool {
		data, _ := os.ReadFile(cancelled)
		return string(data) == "cancelled"
	})
}
