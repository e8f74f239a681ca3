package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// npmServer is the entry script of an npm MCP server the connector tests
// install (npm ci in internal/connectors/testdata/npm). Missing, the test
// skips locally and fails in CI.
func npmServer(t *testing.T, pkg string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "internal", "connectors", "testdata", "npm", "node_modules", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (npm ci in internal/connectors/testdata/npm): %v", pkg, err)
		}
		t.Skipf("needs the npm package %s (npm ci in internal/connectors/testdata/npm)", pkg)
	}
	return path
}

// descendantsOf are the live processes under pid, at any depth.
func descendantsOf(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		kids := childrenOf(t, queue[0])
		out = append(out, kids...)
		queue = append(queue, kids...)
	}
	return out
}

// childrenOf are the live processes whose parent is pid (zombies are not
// alive).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("needs /proc to find the daemon's children: %v", err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state := procStat(p); ppid == pid && state != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// procStat is a process's parent and state from /proc/PID/stat, or 0 and
// "" when it is gone.
func procStat(pid int) (int, string) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0, ""
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid, fields[0]
}

func processAlive(pid int) bool {
	_, state := procStat(pid)
	return state != "" && state != "Z"
}

func waitGone(t *testing.T, what string, pids []int) {
	t.Helper()
	testwait.Eventually(t, waitLimit, what, func() bool {
		for _, p := range pids {
			if processAlive(p) {
				return false
			}
		}
		return true
	})
}

// An MCP server in front of the daemon, over the wire: added by a person,
// its tools disabled until enabled, an enabled full_access tool parked for
// a person's approval and run once released, the dispatch on the record,
// and the process ended by connectors.remove.
func TestConnectorsOverTheWire(t *testing.T) {
	script := npmServer(t, "@modelcontextprotocol/server-filesystem")
	root := t.TempDir()
	d := startDaemon(t, t.TempDir())
	person := d.dial(t)
	defer person.Close()
	if err := person.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}
	var st protocol.ConnectorStatus
	if err := person.Call(ctxT(t), protocol.MethodConnectorsAddStdio, protocol.ConnectorsAddStdioParams{Name: "Files", Command: "node", Args: []string{script, root}, Env: map[string]string{"FS_SECRET": "do-not-show"}}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Slug != "files" || !st.Connected || st.ToolCount == 0 || st.EnabledCount != 0 {
		t.Fatalf("connectors.add_stdio: %+v", st)
	}
	children := descendantsOf(t, d.cmd.Process.Pid)
	if len(children) != 2 {
		t.Fatalf("the daemon has %d descendants, want the server and its reaper", len(children))
	}
	var enabled protocol.ConnectorEnableResult
	if err := person.Call(ctxT(t), protocol.MethodConnectorsEnableTools, protocol.ConnectorToolsParams{Slug: "files", Tools: []string{"write_file", "read_text_file"}}, &enabled); err != nil {
		t.Fatal(err)
	}

	agent := d.dial(t)
	defer agent.Close()
	var tools protocol.ToolsListResult
	if err := agent.Call(ctxT(t), protocol.MethodToolsList, nil, &tools); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range tools.Tools {
		if s.Name == "mcp_files_write_file" && s.Source == "mcp" && s.Connector == "files" && s.Idempotent {
			found = true
		}
	}
	if !found {
		t.Fatalf("tools.list of another connection lacks mcp_files_write_file: %+v", tools.Tools)
	}

	// permission.classify says which annotation decided.
	var cls protocol.ClassifyResult
	if err := agent.Call(ctxT(t), protocol.MethodPermissionClassify, map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "r", "type": "tool_call", "tool": "mcp_files_read_text_file", "parameters": map[string]any{"path": filepath.Join(root, "x")}},
		map[string]any{"id": "w", "type": "tool_call", "tool": "mcp_files_write_file", "parameters": map[string]any{"path": filepath.Join(root, "x"), "content": ""}},
	}}}, &cls); err != nil {
		t.Fatal(err)
	}
	if c := cls.Classifications; len(c) != 2 || c[0].RequiredTier != "read_only" || !slices.Contains(c[0].Signals, "mcp annotation readOnlyHint: true") || c[1].RequiredTier != "full_access" || len(c[1].Signals) == 0 || !strings.HasPrefix(c[1].Signals[0], "mcp annotations") {
		t.Fatalf("permission.classify: %+v", c)
	}

	target := filepath.Join(root, "note.txt")
	done := make(chan error, 1)
	var res protocol.ProposalResult
	go func() {
		done <- agent.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
			map[string]any{"id": "w", "type": "tool_call", "tool": "mcp_files_write_file", "parameters": map[string]any{"path": target, "content": "approved"}},
			map[string]any{"id": "r", "type": "tool_call", "tool": "mcp_files_read_text_file", "parameters": map[string]any{"path": target}, "dependencies": []string{"w"}},
		}}}, &res)
	}()
	var waiting protocol.HostApprovalsResult
	testwait.Eventually(t, waitLimit, "the write's approval request", func() bool {
		return person.Call(ctxT(t), protocol.MethodHostApprovals, nil, &waiting) == nil && len(waiting.Approvals) > 0
	})
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the write ran before the approval")
	}
	if err := person.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": waiting.Approvals[0].ID, "approved": true}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || len(res.Results) != 2 || res.Results[0].Status != protocol.StatusSucceeded || res.Results[1].Status != protocol.StatusSucceeded {
			t.Fatalf("after the approval: %v %+v %q %q", err, res.Results, res.Results[0].ErrorText(), res.Results[1].ErrorText())
		}
	case <-time.After(waitLimit):
		t.Fatal("the proposal did not finish after the approval")
	}
	if data, err := os.ReadFile(target); err != nil || string(data) != "approved" {
		t.Fatalf("the file holds %q (%v)", data, err)
	}

	// write_file is idempotent by its idempotentHint: the same write again
	// is answered from the idempotency cache, and the server is not called.
	var again protocol.ProposalResult
	if err := agent.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "w", "type": "tool_call", "tool": "mcp_files_write_file", "parameters": map[string]any{"path": target, "content": "approved"}},
	}}}, &again); err != nil || again.Results[0].Status != protocol.StatusSucceeded || again.Results[0].CacheHit != "idempotency" {
		t.Fatalf("the same idempotent write again: %v %+v", err, again.Results)
	}

	var evs protocol.EventsQueryResult
	if err := person.Call(ctxT(t), protocol.MethodEventsQuery, protocol.EventsQueryParams{Kinds: []protocol.EventKind{"tool_dispatched"}}, &evs); err != nil {
		t.Fatal(err)
	}
	if evs.Count != 2 || evs.Events[0].Data["source"] != "mcp" || evs.Events[0].Data["connector"] != "files" {
		t.Fatalf("tool_dispatched events: %+v", evs.Events)
	}
	if logs, err := os.ReadFile(d.logPath); err != nil || strings.Contains(string(logs), "do-not-show") {
		t.Fatalf("the env value reached the log (%v)", err)
	}

	var removed protocol.ConnectorRemoveResult
	if err := person.Call(ctxT(t), protocol.MethodConnectorsRemove, protocol.ConnectorSlugParams{Slug: "files"}, &removed); err != nil || removed.Removed != "files" {
		t.Fatalf("connectors.remove: %+v %v", removed, err)
	}
	waitGone(t, "the removed connector's process ending", children)
}

// connectors.toml is loaded at start and on SIGHUP, its connectors cannot
// be removed over the wire, and a malformed file stops the start naming
// the file and the line.
func TestConnectorsFileLoadAndReload(t *testing.T) {
	script := npmServer(t, "@modelcontextprotocol/server-everything")
	home := t.TempDir()
	file := filepath.Join(home, "connectors.toml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	one := fmt.Sprintf("[[connector]]\nname = \"ev\"\ncommand = \"node\"\nargs = [%q, \"stdio\"]\nenable = [\"echo\"]\n", script)
	write(one)
	d := startDaemon(t, home)
	d.waitLog(t, "connector connected")
	c := d.dial(t)
	defer c.Close()
	var res protocol.ProposalResult
	if err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "e", "type": "tool_call", "tool": "mcp_ev_echo", "parameters": map[string]any{"message": "from the file"}},
	}}}, &res); err != nil || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the file's enabled tool: %v %+v", err, res.Results)
	}
	err := c.Call(ctxT(t), protocol.MethodConnectorsRemove, protocol.ConnectorSlugParams{Slug: "ev"}, nil)
	if err == nil || !strings.Contains(err.Error(), "connectors.toml") {
		t.Fatalf("removing the file's connector over the wire: %v", err)
	}

	write(one + fmt.Sprintf("\n[[connector]]\nname = \"other\"\ncommand = \"node\"\nargs = [%q]\n", script))
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "connectors reloaded")
	var list protocol.ConnectorsListResult
	if err := c.Call(ctxT(t), protocol.MethodConnectorsList, nil, &list); err != nil || len(list.Connectors) != 2 || !list.Connectors[1].FromFile {
		t.Fatalf("after a good reload: %+v %v", list, err)
	}

	write("[[connector]]\nname = \"ev\"\ncommand = \"node\"\nbogus = true\n")
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := d.waitLog(t, "connectors reload failed; the connectors running stay")
	if !strings.Contains(fmt.Sprint(line["error"]), "line 4") {
		t.Fatalf("the reload error should name the line: %v", line)
	}
	d.stop(t)
	if out, code := runBinary(t, "--home", home, "--port", "0"); code != 1 || !strings.Contains(out, file) || !strings.Contains(out, "line 4: unknown key connector.bogus") {
		t.Fatalf("start with a bad connectors file: exit %d\n%s", code, out)
	}
}

// No connector process outlives the daemon, nor any process a server
// started: not after a shutdown, and not after SIGKILL.
func TestConnectorProcessesNeverOutliveTheDaemon(t *testing.T) {
	script := npmServer(t, "@modelcontextprotocol/server-everything")
	for _, how := range []string{"shutdown", "SIGKILL"} {
		t.Run(how, func(t *testing.T) {
			home := t.TempDir()
			// b's server leaves a grandchild of its own behind it.
			body := fmt.Sprintf("[[connector]]\nname = \"a\"\ncommand = \"node\"\nargs = [%q]\n\n[[connector]]\nname = \"b\"\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 3600 & exec node %s\"]\n", script, script)
			if err := os.WriteFile(filepath.Join(home, "connectors.toml"), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			d := startDaemon(t, home)
			d.waitLog(t, "connector connected")
			d.waitLog(t, "connector connected")
			children := descendantsOf(t, d.cmd.Process.Pid)
			if len(children) != 5 {
				t.Fatalf("the daemon has %d descendants, want two reapers, two servers and a sleep", len(children))
			}
			if how == "SIGKILL" {
				d.kill(t)
			} else {
				d.stop(t)
			}
			waitGone(t, "the servers ending with the daemon ("+how+")", children)
		})
	}
}
