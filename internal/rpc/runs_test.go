package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

const runsHostToken = "runs-host-token"

// runsServer is a daemon with run traces, agent tokens, postures and an
// approval ledger under one state root.
type runsServer struct {
	*testServer
	home  string
	store *runs.Store
	log   *file.Runs
}

// runsSetup tunes startRunsServer.
type runsSetup struct {
	home      string        // reuse a state root ("" makes one)
	grace     time.Duration // the incomplete-marker grace (a minute when 0)
	feedQueue int
	// writeTimeout is the daemon's write deadline (its default when 0).
	writeTimeout time.Duration
	bounds       runs.Options // the run store's bounds (Grace and CloseLog are set here)
	journals     int          // run journals open at once (the file store's default when 0)
}

func startRunsServer(t *testing.T, rs runsSetup) *runsServer {
	t.Helper()
	if rs.home == "" {
		rs.home = t.TempDir()
	}
	if rs.grace == 0 {
		rs.grace = time.Minute
	}
	log, _, err := file.OpenRuns(filepath.Join(rs.home, "runs"), file.MaxOpenRunJournals(rs.journals))
	if err != nil {
		t.Fatal(err)
	}
	opts := rs.bounds
	opts.Grace, opts.CloseLog = rs.grace, log.Close
	st, _, err := runs.OpenLog(context.Background(), log, opts)
	if err != nil {
		t.Fatal(errorsJoin(err, log.Close()))
	}
	ps, err := file.OpenPostures(filepath.Join(rs.home, "agent-permissions.json"))
	if err != nil {
		t.Fatal(err)
	}
	ledger, _, err := file.OpenApprovals(filepath.Join(rs.home, "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, serverSetup{
		opts:   Options{HostToken: runsHostToken, Runs: st, AgentTokens: file.TokenFile(filepath.Join(rs.home, "agent-tokens.json")), Postures: ps, FeedQueue: rs.feedQueue, WriteTimeout: rs.writeTimeout},
		engine: engine.Options{Approvals: ledger, Postures: ps, ApprovalTimeout: testTimeout},
		closeAfter: func() error {
			return errorsJoin(st.Close(), ledger.Close())
		},
	})
	return &runsServer{testServer: ts, home: rs.home, store: st, log: log}
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// issue mints agent's token in the server's token file.
func (rs *runsServer) issue(t *testing.T, agent string) string {
	t.Helper()
	token := "token-of-" + agent + "-" + fmt.Sprint(time.Now().UnixNano())
	if err := file.IssueToken(context.Background(), filepath.Join(rs.home, "agent-tokens.json"), agent, token); err != nil {
		t.Fatal(err)
	}
	return token
}

// dialAgent connects bound to agent.
func (rs *runsServer) dialAgent(t *testing.T, agent, token string) (*client.Client, error) {
	c, err := client.Dial(ctxT(t), rs.url, &client.Options{Token: token, AgentID: agent})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func (rs *runsServer) mustAgent(t *testing.T, agent string) *client.Client {
	t.Helper()
	c, err := rs.dialAgent(t, agent, rs.issue(t, agent))
	if err != nil {
		t.Fatalf("bind %s: %v", agent, err)
	}
	return c
}

func (rs *runsServer) hostClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t), rs.url, &client.Options{HostToken: runsHostToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// trustAgents moves the default posture to trusting, so that bound agents'
// sandbox edits run without a person (the balanced default asks first).
func trustAgents(t *testing.T, rs *runsServer) {
	t.Helper()
	call(t, rs.hostClient(t), protocol.MethodAgentPermissionsSetDefault, map[string]any{"preset": "trusting"}, nil)
}

// call is a call that must succeed.
func call(t *testing.T, c *client.Client, method string, params, out any) {
	t.Helper()
	if err := c.Call(ctxT(t), method, params, out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

type startReply struct {
	RunID   string `json:"run_id"`
	AgentID string `json:"agent_id"`
}

type appendReply struct {
	RunID     string `json:"run_id"`
	BaseIndex int    `json:"base_index"`
	Count     int    `json:"count"`
	OK        bool   `json:"ok"`
	Dropped   string `json:"dropped"`
}

func startRun(t *testing.T, c *client.Client, params map[string]any) string {
	t.Helper()
	var r startReply
	call(t, c, protocol.MethodRunsStart, params, &r)
	if r.RunID == "" {
		t.Fatalf("runs.start answered no run_id: %+v", r)
	}
	return r.RunID
}

func turnsN(n int, prefix string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"index": -1, "prompt": fmt.Sprintf("%s-%d", prefix, i), "output": "done"}
	}
	return out
}

func recordTurns(t *testing.T, c *client.Client, runID string, turns []any) appendReply {
	t.Helper()
	var r appendReply
	call(t, c, protocol.MethodRunsRecordTurns, map[string]any{"run_id": runID, "turns": turns}, &r)
	return r
}

type traceReply struct {
	RunID    string        `json:"run_id"`
	AgentID  string        `json:"agent_id"`
	NotFound bool          `json:"not_found"`
	Records  []runs.Record `json:"records"`
}

func getTrace(t *testing.T, c *client.Client, runID string) traceReply {
	t.Helper()
	var r traceReply
	call(t, c, protocol.MethodRunsGetTrace, map[string]any{"run_id": runID}, &r)
	return r
}

func TestAgentBindingAndASecondAttachRefused(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	token := rs.issue(t, "alice")
	var res protocol.AuthResult
	raw := rs.raw(t)
	rep := raw.call(`{"jsonrpc":"2.0","id":1,"method":"session.auth","params":{"token":"` + token + `","agent_id":"alice"}}`)
	if rep.Error != nil || json.Unmarshal(rep.Result, &res) != nil || res.AgentID != "alice" || !res.OK {
		t.Fatalf("bind: %+v %s", rep.Error, rep.Result)
	}
	if _, err := rs.dialAgent(t, "alice", token); err == nil || !strings.Contains(err.Error(), "already attached on another connection") {
		t.Fatalf("second attach: %v", err)
	}
	if _, err := rs.dialAgent(t, "bob", token); err == nil || !strings.Contains(err.Error(), "token mismatch") {
		t.Fatalf("alice's token bound bob: %v", err)
	}
	// The host token is not an agent's token either.
	if _, err := rs.dialAgent(t, "carol", runsHostToken); err == nil {
		t.Fatal("the host token bound an agent")
	}
	// Once the first connection goes, the agent can attach again.
	raw.ws.CloseNow()
	rs.waitLog(t, "connection closed", 4) // the three refused dials and this one
	bound, err := rs.dialAgent(t, "alice", token)
	if err != nil {
		t.Fatalf("re-attach after the first connection closed: %v", err)
	}
	// tools.execute carries the agent, and its events name it.
	trustAgents(t, rs)
	tb := newToolboxOn(t, bound, map[string]toolFunc{"look": echo})
	res2 := tb.submit(t, proposal(toolCall("a", "look", map[string]any{"q": 1})))
	if statuses(res2)["a"] != protocol.StatusSucceeded {
		t.Fatalf("proposal: %+v", res2)
	}
	if calls := tb.callLog(); len(calls) != 1 || calls[0].AgentID != "alice" {
		t.Fatalf("tools.execute %+v", calls)
	}
	if ev := eventOf(t, tb.Client, map[string]any{"kinds": []string{"action_succeeded"}, "data_matches": map[string]any{"agent": "alice"}}); ev.ActionID != "a" {
		t.Fatalf("event %+v", ev)
	}
}

func TestTheDaemonTokenCannotBindAnAgent(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	rs.srv.opts.Token = "the-daemon-token" // set before any connection
	rs.issue(t, "alice")
	_, err := rs.dialAgent(t, "alice", "the-daemon-token")
	if err == nil || !strings.Contains(err.Error(), "daemon's token cannot bind an agent") {
		t.Fatalf("daemon token with agent_id: %v", err)
	}
}

func TestAnIssuedTokenWorksAndARevokedOneStopsAtOnce(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	first := rs.issue(t, "alice")
	c, err := rs.dialAgent(t, "alice", first)
	if err != nil {
		t.Fatal(err)
	}
	// Issuing again replaces the token: the first no longer binds.
	second := rs.issue(t, "alice")
	c.Close()
	rs.waitLog(t, "connection closed", 1)
	if _, err := rs.dialAgent(t, "alice", first); err == nil {
		t.Fatal("a replaced token still binds")
	}
	live, err := rs.dialAgent(t, "alice", second)
	if err != nil {
		t.Fatal(err)
	}
	// agents.revoke needs the host role.
	if err := live.Call(ctxT(t), protocol.MethodAgentsRevoke, map[string]any{"agent_id": "alice"}, nil); err == nil {
		t.Fatal("an agent revoked a token")
	}
	var res struct {
		Revoked bool `json:"revoked"`
		Closed  int  `json:"connections_closed"`
	}
	call(t, rs.hostClient(t), protocol.MethodAgentsRevoke, map[string]any{"agent_id": "alice"}, &res)
	if !res.Revoked || res.Closed != 1 {
		t.Fatalf("revoke %+v", res)
	}
	select {
	case <-live.Done():
	case <-time.After(testTimeout):
		t.Fatal("the revoked agent's connection stayed open")
	}
	if _, err := rs.dialAgent(t, "alice", second); err == nil {
		t.Fatal("a revoked token still binds")
	}
}

func TestARunRecordsProposalsAndReplaysAfterARestart(t *testing.T) {
	home := t.TempDir()
	rs := startRunsServer(t, runsSetup{home: home})
	trustAgents(t, rs)
	tb := newToolboxOn(t, rs.mustAgent(t, "alice"), map[string]toolFunc{"look": echo})
	var st startReply
	call(t, tb.Client, protocol.MethodRunsStart, map[string]any{"intent": "find the bug", "idempotency_key": "run-1"}, &st)
	if st.RunID != "run-1" || st.AgentID != "alice" {
		t.Fatalf("start %+v", st)
	}
	// Idempotent: the same key is the same run.
	var again startReply
	call(t, tb.Client, protocol.MethodRunsStart, map[string]any{"intent": "find the bug", "idempotency_key": "run-1"}, &again)
	if again.RunID != "run-1" {
		t.Fatalf("idempotent start %+v", again)
	}
	res := tb.submit(t, proposal(
		toolCall("a", "look", map[string]any{"q": "x"}),
		toolCall("b", "nope", nil),
	))
	if st := statuses(res); st["a"] != protocol.StatusSucceeded || st["b"] != protocol.StatusRejected {
		t.Fatalf("proposal %v", st)
	}
	call(t, tb.Client, protocol.MethodRunsComplete, map[string]any{"run_id": "run-1", "outcome": map[string]any{"status": "success", "summary": "fixed"}}, nil)
	if err := tb.Call(ctxT(t), protocol.MethodRunsComplete, map[string]any{"run_id": "run-1", "outcome": map[string]any{}}, nil); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Fatalf("double complete: %v", err)
	}

	check := func(c *client.Client) {
		t.Helper()
		var list struct {
			Runs []runs.Summary `json:"runs"`
		}
		call(t, c, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list)
		if len(list.Runs) != 1 || list.Runs[0].RunID != "run-1" || list.Runs[0].Status != runs.StatusCompleted || list.Runs[0].TurnCount != 2 || list.Runs[0].EndedAt == nil {
			t.Fatalf("runs.list %+v", list.Runs)
		}
		tr := getTrace(t, c, "run-1")
		if len(tr.Records) != 4 || tr.Records[0].Record != runs.KindStarted || tr.Records[3].Record != runs.KindEnded || tr.Records[3].Status != runs.StatusCompleted {
			t.Fatalf("trace %+v", tr.Records)
		}
		turns := map[string]*runs.Turn{}
		for i, r := range tr.Records[1:3] {
			if r.Turn == nil || r.Index != i {
				t.Fatalf("turn %d: %+v", i, r)
			}
			turns[r.Tool] = r.Turn
		}
		if a := turns["look"]; a == nil || a.PolicyRejected != nil || fmt.Sprint(a.Parameters) != "map[q:x]" || fmt.Sprint(a.Output) != "map[q:x]" {
			t.Fatalf("look turn %+v", a)
		}
		if b := turns["nope"]; b == nil || string(b.PolicyRejected) != "true" || !strings.Contains(fmt.Sprint(b.Output), "unknown tool") {
			t.Fatalf("rejected turn %+v", b)
		}
	}
	check(tb.Client)
	if err := rs.stop(); err != nil {
		t.Fatal(err)
	}
	restarted := startRunsServer(t, runsSetup{home: home})
	check(restarted.hostClient(t))
}

// traceFeed collects runs.trace.event notifications.
type traceFeed struct {
	events chan runs.Event
}

func subscribeRun(t *testing.T, c *client.Client, runID string, buffer int) (*traceFeed, runs.Snapshot) {
	t.Helper()
	f := &traceFeed{events: make(chan runs.Event, buffer)}
	c.HandleNotification(protocol.MethodRunsTraceEvent, func(raw json.RawMessage) {
		var ev runs.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Errorf("runs.trace.event: %v: %s", err, raw)
			return
		}
		f.events <- ev
	})
	var snap runs.Snapshot
	call(t, c, protocol.MethodRunsSubscribe, map[string]any{"run_id": runID}, &snap)
	return f, snap
}

func (f *traceFeed) next(t *testing.T) runs.Event {
	t.Helper()
	select {
	case ev := <-f.events:
		return ev
	case <-time.After(testTimeout):
		t.Fatal("no runs.trace.event")
		return runs.Event{}
	}
}

func TestAMidRunSubscriberGetsTheSnapshotThenContiguousEvents(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	alice := rs.mustAgent(t, "alice")
	runID := startRun(t, alice, map[string]any{"intent": "stream"})
	if r := recordTurns(t, alice, runID, turnsN(7, "early")); !r.OK || r.BaseIndex != 0 || r.Count != 7 {
		t.Fatalf("append %+v", r)
	}
	host := rs.hostClient(t)
	feed, snap := subscribeRun(t, host, runID, 64)
	if snap.Cursor != 7 || len(snap.TurnsSoFar) != 7 || snap.Status != runs.StatusInProgress || snap.AgentID != "alice" || snap.TurnsSoFar[6].Index != 6 {
		t.Fatalf("snapshot cursor %d, %d turns, %s", snap.Cursor, len(snap.TurnsSoFar), snap.Status)
	}
	// Batches race each other; the daemon orders them.
	done := make(chan appendReply, 4)
	for i := 0; i < 4; i++ {
		go func() {
			var r appendReply
			if err := alice.Call(ctxT(t), protocol.MethodRunsRecordTurns, map[string]any{"run_id": runID, "turns": turnsN(3, "late")}, &r); err != nil {
				t.Error(err)
			}
			done <- r
		}()
	}
	bases := map[int]bool{}
	for i := 0; i < 4; i++ {
		r := <-done
		bases[r.BaseIndex] = r.OK && r.Count == 3
	}
	if !bases[7] || !bases[10] || !bases[13] || !bases[16] {
		t.Fatalf("base indices %v", bases)
	}
	for want := 8; want <= 19; want++ {
		ev := feed.next(t)
		if ev.Cursor != want || ev.Record.Record != runs.KindTurn || ev.Record.Index != want-1 {
			t.Fatalf("event cursor %d index %d, want cursor %d", ev.Cursor, ev.Record.Index, want)
		}
	}
	call(t, alice, protocol.MethodRunsComplete, map[string]any{"run_id": runID, "outcome": map[string]any{"status": "success"}}, nil)
	if ev := feed.next(t); ev.Record.Record != runs.KindEnded || ev.Status != runs.StatusCompleted || ev.Cursor != 19 {
		t.Fatalf("end event %+v", ev)
	}
	var un struct {
		Removed bool `json:"removed"`
	}
	if err := host.Call(ctxT(t), protocol.MethodRunsUnsubscribe, map[string]any{"run_id": runID}, &un); err != nil {
		rs.logs.mu.Lock()
		for _, e := range rs.logs.entries {
			t.Logf("%s %v", e.msg, e.fields)
		}
		rs.logs.mu.Unlock()
		t.Fatal(err)
	}
	if !un.Removed {
		t.Fatal("unsubscribe removed nothing")
	}
}

func TestAWedgedSubscriberLosesEventsButBlocksNobody(t *testing.T) {
	// The hook holds the wedged connection's trace events as a socket that
	// has stopped draining would, until release is closed.
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	holdNotifications(t, held, release, func(c *conn, method string) bool { return method == protocol.MethodRunsTraceEvent && c.isHost() }) // the wedged subscriber is the only host
	rs := startRunsServer(t, runsSetup{feedQueue: 2})
	alice := rs.mustAgent(t, "alice")
	runID := startRun(t, alice, map[string]any{"intent": "flood"})

	wedged := rs.hostClient(t)
	got := make(chan runs.Event, 4096)
	wedged.HandleNotification(protocol.MethodRunsTraceEvent, func(raw json.RawMessage) {
		var ev runs.Event
		if err := json.Unmarshal(raw, &ev); err == nil {
			got <- ev
		}
	})
	call(t, wedged, protocol.MethodRunsSubscribe, map[string]any{"run_id": runID}, nil)

	// The recorder finishes every batch while the subscriber is wedged.
	const batches, per = 4, 5
	for b := 0; b < batches; b++ {
		if r := recordTurns(t, alice, runID, turnsN(per, fmt.Sprint("batch", b))); !r.OK {
			t.Fatalf("batch %d: %+v", b, r)
		}
	}
	select {
	case <-held:
	case <-time.After(testTimeout):
		t.Fatal("no trace event was ever sent to the wedged subscriber")
	}
	// Other clients are served meanwhile, the wedged one included.
	var list struct {
		Runs []runs.Summary `json:"runs"`
	}
	call(t, wedged, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list)
	if len(list.Runs) != 1 || list.Runs[0].TurnCount != batches*per {
		t.Fatalf("runs.list while wedged: %+v", list.Runs)
	}
	close(release)
	// The wedged one resumes and finds a gap in the cursors.
	prev, gap := 0, false
	for prev < batches*per {
		select {
		case ev := <-got:
			if ev.Cursor != prev+1 {
				gap = true
			}
			prev = ev.Cursor
		case <-time.After(testTimeout):
			t.Fatalf("the wedged subscriber never caught up (last cursor %d)", prev)
		}
	}
	if !gap {
		t.Fatal("the wedged subscriber lost nothing: the queue did not bound it")
	}
}

func TestRunsAreNotFoundForAnotherAgentButTheHostReadsThem(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	alice := rs.mustAgent(t, "alice")
	bob := rs.mustAgent(t, "bob")
	runID := startRun(t, alice, map[string]any{"intent": "private"})
	recordTurns(t, alice, runID, turnsN(1, "secret"))

	unknown := getTrace(t, bob, "no-such-run")
	theirs := getTrace(t, bob, runID)
	if !unknown.NotFound || !theirs.NotFound || theirs.Records != nil {
		t.Fatalf("bob read alice's run: %+v / %+v", theirs, unknown)
	}
	err1 := bob.Call(ctxT(t), protocol.MethodRunsSubscribe, map[string]any{"run_id": runID}, nil)
	err2 := bob.Call(ctxT(t), protocol.MethodRunsSubscribe, map[string]any{"run_id": "no-such-run"}, nil)
	if err1 == nil || err2 == nil || strings.ReplaceAll(err1.Error(), runID, "ID") != strings.ReplaceAll(err2.Error(), "no-such-run", "ID") {
		t.Fatalf("subscribe answers differ: %v / %v", err1, err2)
	}
	if err := bob.Call(ctxT(t), protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, nil); err == nil {
		t.Fatal("bob listed alice's runs")
	}
	if r := recordTurns(t, bob, runID, turnsN(1, "forged")); r.OK || r.Dropped != runs.DropRunNotFound {
		t.Fatalf("bob appended to alice's run: %+v", r)
	}
	// An unbound connection may not start a run under a named agent.
	anon := rs.dial(t, "")
	if err := anon.Call(ctxT(t), protocol.MethodRunsStart, map[string]any{"intent": "x", "agent_id": "alice"}, nil); err == nil {
		t.Fatal("an unbound connection started a run for alice")
	}
	var named startReply
	call(t, anon, protocol.MethodRunsStart, map[string]any{"intent": "x", "agent_name": "Scenario Runner #1"}, &named)
	if named.AgentID != "name:scenario-runner-1" {
		t.Fatalf("synthesized id %q", named.AgentID)
	}

	host := rs.hostClient(t)
	if tr := getTrace(t, host, runID); tr.NotFound || len(tr.Records) != 2 || tr.AgentID != "alice" {
		t.Fatalf("host trace %+v", tr)
	}
	var list struct {
		Runs []runs.Summary `json:"runs"`
	}
	call(t, host, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list)
	if len(list.Runs) != 1 {
		t.Fatalf("host list %+v", list.Runs)
	}
	// record_turns from a host-only connection is refused like any stranger.
	if r := recordTurns(t, host, runID, turnsN(1, "host")); r.OK || r.Dropped != runs.DropRunNotFound {
		t.Fatalf("host appended: %+v", r)
	}
	// A host may start a run for any agent.
	var hs startReply
	call(t, host, protocol.MethodRunsStart, map[string]any{"intent": "for carol", "agent_id": "carol"}, &hs)
	if hs.AgentID != "carol" {
		t.Fatalf("host start %+v", hs)
	}
}

func TestRecordTurnsCapsAndDropReasons(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	alice := rs.mustAgent(t, "alice")
	runID := startRun(t, alice, map[string]any{"intent": "caps"})

	// A field over 16 KB is cut and marked; the index sent is ignored.
	long := strings.Repeat("é", runs.MaxFieldBytes)
	r := recordTurns(t, alice, runID, []any{map[string]any{"index": "seven", "prompt": long, "parameters": map[string]any{"p": long}}})
	if !r.OK || r.BaseIndex != 0 {
		t.Fatalf("append %+v", r)
	}
	tr := getTrace(t, alice, runID)
	turn := tr.Records[1].Turn
	if p, _ := turn.Prompt.(string); len(p) > runs.MaxFieldBytes+32 || !strings.HasSuffix(p, "…[truncated]") || string(turn.VerifierVerdict) != `"not_run"` {
		t.Fatalf("prompt of %d bytes, verdict %s", len(p), turn.VerifierVerdict)
	}
	if p, _ := turn.Parameters.(map[string]any)["p"].(string); !strings.HasSuffix(p, "…[truncated]") {
		t.Fatal("a parameters string was not cut")
	}
	// Many sub-cap strings over 256 KiB: the free text is replaced.
	params := map[string]any{}
	for i := 0; i < 20; i++ {
		params[fmt.Sprint("k", i)] = strings.Repeat("y", runs.MaxFieldBytes)
	}
	r = recordTurns(t, alice, runID, []any{map[string]any{"tool": "t", "parameters": params, "output": "o"}})
	if !r.OK || r.BaseIndex != 1 {
		t.Fatalf("append %+v", r)
	}
	tr = getTrace(t, alice, runID)
	if turn := tr.Records[2].Turn; turn.Parameters != "…[truncated: turn exceeded 256 KiB]" || turn.Tool != "t" {
		t.Fatalf("over-cap turn %+v", turn.Parameters)
	}
	// Over the cap even then: the whole batch is dropped.
	huge := map[string]any{"blob": strings.Repeat("z", runs.MaxTurnBytes)}
	r = recordTurns(t, alice, runID, []any{map[string]any{"prompt": "fine"}, map[string]any{"cli_outcome": huge}})
	if r.OK || r.Dropped != runs.DropTurnTooLarge || r.Count != 0 {
		t.Fatalf("too large %+v", r)
	}
	// A batch over 256 turns is a validation error.
	err := alice.Call(ctxT(t), protocol.MethodRunsRecordTurns, map[string]any{"run_id": runID, "turns": turnsN(runs.MaxBatch+1, "b")}, nil)
	if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, "runs.record_turns requires { run_id, turns: [RunTurn] }") {
		t.Fatalf("oversized batch: %d %s", code, msg)
	}
	for _, bad := range []any{[]any{}, "x", []any{"not an object"}} {
		if err := alice.Call(ctxT(t), protocol.MethodRunsRecordTurns, map[string]any{"run_id": runID, "turns": bad}, nil); err == nil {
			t.Fatalf("turns %v accepted", bad)
		}
	}
	// The run ceiling: 2000 turns, and no batch past it.
	for n := 2; n < runs.MaxTurns; {
		k := min(runs.MaxBatch, runs.MaxTurns-n)
		if r := recordTurns(t, alice, runID, turnsN(k, "fill")); !r.OK || r.BaseIndex != n {
			t.Fatalf("fill at %d: %+v", n, r)
		}
		n += k
	}
	if r := recordTurns(t, alice, runID, turnsN(1, "over")); r.OK || r.Dropped != runs.DropRunTurnLimit {
		t.Fatalf("past the ceiling %+v", r)
	}
	call(t, alice, protocol.MethodRunsComplete, map[string]any{"run_id": runID, "outcome": map[string]any{}}, nil)
	if r := recordTurns(t, alice, runID, turnsN(1, "late")); r.OK || r.Dropped != runs.DropRunTerminal {
		t.Fatalf("after the end %+v", r)
	}
	if r := recordTurns(t, alice, "no-such-run", turnsN(1, "x")); r.OK || r.Dropped != runs.DropRunNotFound {
		t.Fatalf("unknown run %+v", r)
	}
}

func TestADisconnectWithoutCompleteLeavesAnIncompleteMarker(t *testing.T) {
	rs := startRunsServer(t, runsSetup{grace: time.Millisecond})
	alice := rs.mustAgent(t, "alice")
	runID := startRun(t, alice, map[string]any{"intent": "crash"})
	recordTurns(t, alice, runID, turnsN(2, "t"))
	host := rs.hostClient(t)
	feed, _ := subscribeRun(t, host, runID, 16)
	alice.Close()
	ev := feed.next(t)
	if ev.Record.Record != runs.KindEnded || ev.Status != runs.StatusIncomplete || ev.Cursor != 2 {
		t.Fatalf("end event %+v", ev)
	}
	tr := getTrace(t, host, runID)
	if n := len(tr.Records); n != 4 || tr.Records[n-1].Status != runs.StatusIncomplete {
		t.Fatalf("trace %+v", tr.Records)
	}
}

func TestAgentPosturesAreEnforcedOnABoundAgentsProposal(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	host := rs.hostClient(t)
	tools := map[string]toolFunc{"read_file": echo, "write_file": echo, "deploy_service": echo}
	tb := newToolboxOn(t, rs.mustAgent(t, "alice"), tools)

	// Mutations need the host role; the agent may not loosen itself.
	if err := tb.Call(ctxT(t), protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "alice", "mode": "always_allow"}, nil); err == nil {
		t.Fatal("an agent loosened its own posture")
	}
	var pol agents.Policy
	call(t, host, protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "alice", "mode": "deny", "tier": "sandbox_edit"}, &pol)
	if pol.Agents["alice"].SandboxEdit != "deny" || pol.Default.ReadOnly != "always_allow" {
		t.Fatalf("policy %+v", pol)
	}
	res := tb.submit(t, proposal(toolCall("w", "write_file", map[string]any{"path": "a.txt"})))
	if r := resultOf(t, res, "w"); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "agent_permissions: deny") {
		t.Fatalf("deny: %s %q", r.Status, r.ErrorText())
	}
	if ev := eventOf(t, host, map[string]any{"kinds": []string{"agent_posture"}, "data_matches": map[string]any{"mode": "deny"}}); ev.Data["agent"] != "alice" {
		t.Fatalf("posture event %+v", ev)
	}

	// require_approval parks for a person, who approves.
	call(t, host, protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "alice", "mode": "require_approval", "tier": "sandbox_edit"}, nil)
	h, _ := subscribeHost(t, rs.testServer, &client.Options{HostToken: runsHostToken})
	ch := submitAsync(t, tb.Client, proposal(toolCall("w", "write_file", map[string]any{"path": "b.txt"})))
	a := approvalOf(t, h.next(t, "approval.requested"))
	if _, err := h.resolve(t, a.ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if st := statuses(awaitResult(t, ch, 1)); st["w"] != protocol.StatusSucceeded {
		t.Fatalf("after approval %v", st)
	}
	call(t, h.Client, protocol.MethodHostUnsubscribe, nil, nil) // nobody watches: what needs a person is refused at once

	// always_allow admits up to its tier without an approval.
	res = tb.submit(t, proposal(toolCall("d", "deploy_service", map[string]any{"env": "prod"})))
	if r := resultOf(t, res, "d"); r.Status == protocol.StatusSucceeded {
		t.Fatal("full_access ran under the balanced default")
	}
	call(t, host, protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "alice", "mode": "always_allow", "tier": "full_access"}, nil)
	res = tb.submit(t, proposal(toolCall("d", "deploy_service", map[string]any{"env": "prod"})))
	if r := resultOf(t, res, "d"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("always_allow: %s %q", r.Status, r.ErrorText())
	}
	var ev struct {
		Mode        string `json:"mode"`
		HasOverride bool   `json:"has_override"`
	}
	call(t, tb.Client, protocol.MethodAgentPermissionsEvaluate, map[string]any{"agent_id": "alice", "tier": "full_access"}, &ev)
	if ev.Mode != "always_allow" || !ev.HasOverride {
		t.Fatalf("evaluate %+v", ev)
	}
	call(t, host, protocol.MethodAgentPermissionsReset, map[string]any{"agent_id": "alice"}, nil)
	var after agents.Policy
	call(t, host, protocol.MethodAgentPermissionsSetDefault, map[string]any{"preset": "cautious"}, &after)
	if _, ok := after.Agents["alice"]; ok || after.Default.FullAccess != "deny" {
		t.Fatalf("after reset and cautious %+v", after)
	}
	// The file holds what the daemon answered.
	reread, err := file.OpenPostures(filepath.Join(rs.home, "agent-permissions.json"))
	if err != nil || reread.Get().Default.FullAccess != "deny" {
		t.Fatalf("file %+v %v", reread, err)
	}
}

func TestCostFoldsByAgentAndAnAlertFires(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	c, _ := playAgents(t, rs.testServer, func(_ context.Context, name, _ string) (any, error) {
		o := output(name, "ok", 100)
		o["tokens"].(map[string]any)["cost_usd"] = 0.25
		return o, nil
	})
	call(t, c, protocol.MethodMultiPipeline, map[string]any{"stages": specs("planner", "coder"), "task": "t"}, nil)
	alice := rs.mustAgent(t, "alice")
	runID := startRun(t, alice, map[string]any{"intent": "metered"})
	recordTurns(t, alice, runID, []any{map[string]any{"prompt": "p", "tokens": map[string]any{"input_tokens": 7, "output_tokens": 3, "cost_usd": 0.5}}})

	var costs []engine.AgentCost
	call(t, c, protocol.MethodEventsCostByAgent, nil, &costs)
	want := []engine.AgentCost{
		{Agent: "alice", Calls: 1, TokensIn: 7, TokensOut: 3, CostUSD: 0.5},
		{Agent: "coder", Calls: 1, TokensIn: 100, TokensOut: 100, CostUSD: 0.25},
		{Agent: "planner", Calls: 1, TokensIn: 100, TokensOut: 100, CostUSD: 0.25},
	}
	if fmt.Sprint(costs) != fmt.Sprint(want) {
		t.Fatalf("cost_by_agent %+v", costs)
	}
	var al struct {
		Summary engine.MetricsSummary `json:"summary"`
		Alerts  []engine.Alert        `json:"alerts"`
	}
	call(t, c, protocol.MethodMetricsAlerts, map[string]any{"max_cost_usd": 0.9}, &al)
	if len(al.Alerts) != 1 || al.Alerts[0].Kind != "cost_overage" || al.Alerts[0].Observed != 1.0 || al.Summary.CumulativeCostUSD != 1.0 {
		t.Fatalf("alerts %+v summary %+v", al.Alerts, al.Summary)
	}
	rs.waitLog(t, "alert fired", 1)
	// Retention never rolls the budget back.
	call(t, rs.hostClient(t), protocol.MethodEventsRetention, map[string]any{"policy": map[string]any{"max_events": 0}}, nil)
	call(t, c, protocol.MethodMetricsAlerts, map[string]any{"max_cost_usd": 0.9}, &al)
	if len(al.Alerts) != 1 || al.Summary.CostUSD != 0 || al.Summary.CumulativeCostUSD != 1.0 {
		t.Fatalf("after a trim: alerts %+v summary %+v", al.Alerts, al.Summary)
	}
	call(t, c, protocol.MethodMetricsAlerts, map[string]any{"max_cost_usd": 2}, &al)
	if len(al.Alerts) != 0 {
		t.Fatalf("under budget %+v", al.Alerts)
	}
}

func TestPermissionEvaluateShowsABoundAgentsPosture(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	host := rs.hostClient(t)
	alice := rs.mustAgent(t, "alice")
	call(t, host, protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "alice", "mode": "deny", "tier": "sandbox_edit"}, nil)
	call(t, host, protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "alice", "mode": "always_allow", "tier": "full_access"}, nil)
	write := proposal(
		toolCall("w", "write_file", map[string]any{"path": "a.txt"}),
		toolCall("d", "deploy_service", map[string]any{"env": "prod"}),
	)
	decisions := func(c *client.Client) map[string]string {
		var eval struct {
			Decisions []engine.PermissionRow `json:"decisions"`
		}
		call(t, c, protocol.MethodPermissionEvaluate, map[string]any{"proposal": write}, &eval)
		out := map[string]string{}
		for _, r := range eval.Decisions {
			out[r.ActionID] = r.Decision
		}
		return out
	}
	if got := decisions(alice); got["w"] != engine.DecisionDeny || got["d"] != engine.DecisionAllow {
		t.Fatalf("alice's evaluate: %v, want w denied by her posture and d allowed by it", got)
	}
	// The same proposal from a connection bound to no agent: no posture.
	if got := decisions(rs.dial(t, "")); got["w"] != engine.DecisionAllow || got["d"] != engine.DecisionNeedsApproval {
		t.Fatalf("an unbound connection's evaluate: %v", got)
	}
}
