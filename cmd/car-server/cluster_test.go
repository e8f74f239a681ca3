package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// These tests run several daemons as separate processes, each on its own
// $CAR_HOME, sharing one real PostgreSQL database (store: postgres).

// startCluster starts n daemons on the database at url.
func startCluster(t *testing.T, url string, n int, env ...string) []*daemon {
	t.Helper()
	// GORACE: a daemon built with -race otherwise sleeps a second at exit.
	// A short heartbeat: a member is listed dead, and /healthz follows the
	// store, within a second or so.
	env = append([]string{"CAR_STORE=postgres", "CAR_POSTGRES_URL=" + url, "CAR_HEARTBEAT=300ms", "GORACE=atexit_sleep_ms=0"}, env...)
	ds := make([]*daemon, n)
	for i := range ds {
		ds[i] = startDaemon(t, t.TempDir(), env...)
	}
	return ds
}

// nodeOf is the member id of a daemon, as its state root keeps it.
func nodeOf(t *testing.T, d *daemon) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.home, "node-id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// toolbox is one connection to a daemon that registers tools and runs them:
// it counts the calls by their parameter "k", answers {"ran": k}, holds
// (never answers, until the connection closes) a call whose k was held, and
// makes a call whose k is gated wait at its barrier.
type toolbox struct {
	*client.Client
	mu    sync.Mutex
	calls map[string]int
	held  map[string]chan struct{} // closed when the held call arrives
	gates map[string]*barrier
}

// barrier holds the calls that reach it until n of them have.
type barrier struct {
	mu   sync.Mutex
	n    int
	open chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gate makes the calls with k wait at b.
func (tb *toolbox) gate(b *barrier, k string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.gates[k] = b
}

func newToolbox(t *testing.T, d *daemon, tools ...protocol.ToolSchema) *toolbox {
	t.Helper()
	tb := &toolbox{Client: d.dial(t), calls: map[string]int{}, held: map[string]chan struct{}{}, gates: map[string]*barrier{}}
	t.Cleanup(func() { tb.Close() })
	tb.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p protocol.ToolExecuteParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("tools.execute params: %w", err)
		}
		k, _ := p.Parameters["k"].(string)
		tb.mu.Lock()
		tb.calls[k]++
		arrived, hold := tb.held[k]
		gate := tb.gates[k]
		tb.mu.Unlock()
		if gate != nil {
			if err := gate.wait(ctx); err != nil {
				return nil, err
			}
		}
		if hold {
			close(arrived)
			<-ctx.Done() // the daemon dies with this call open; Close ends ctx
			return nil, ctx.Err()
		}
		return map[string]any{"ran": k}, nil
	})
	if err := tb.Call(ctxT(t), protocol.MethodToolsRegister, tools, nil); err != nil {
		t.Fatal(err)
	}
	return tb
}

// count is how many times the daemon called a tool with k.
func (tb *toolbox) count(k string) int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.calls[k]
}

// hold makes the next call with k never answer; the channel closes when it
// arrives.
func (tb *toolbox) hold(k string) <-chan struct{} {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	ch := make(chan struct{})
	tb.held[k] = ch
	return ch
}

// toolCall is a tool_call action whose parameter k names what it does.
func toolCall(id, tool, k string, more ...any) map[string]any {
	params := map[string]any{"k": k}
	for i := 0; i+1 < len(more); i += 2 {
		params[more[i].(string)] = more[i+1]
	}
	return map[string]any{"id": id, "type": "tool_call", "tool": tool, "parameters": params}
}

// submit sends a one-action proposal and returns its result.
func submit(ctx context.Context, c *client.Client, proposalID string, action map[string]any) (protocol.ActionResult, error) {
	var res protocol.ProposalResult
	p := map[string]any{"actions": []any{action}}
	if proposalID != "" {
		p["id"] = proposalID
	}
	if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": p}, &res); err != nil {
		return protocol.ActionResult{}, err
	}
	if len(res.Results) != 1 {
		return protocol.ActionResult{}, fmt.Errorf("%d results for one action: %+v", len(res.Results), res)
	}
	return res.Results[0], nil
}

// mustSubmit is submit that fails the test on a transport error.
func mustSubmit(t *testing.T, c *client.Client, proposalID string, action map[string]any) protocol.ActionResult {
	t.Helper()
	r, err := submit(ctxT(t), c, proposalID, action)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type submitted struct {
	res protocol.ActionResult
	err error
}

// submitAsync submits in the background; the channel gets the outcome.
func submitAsync(t *testing.T, c *client.Client, proposalID string, action map[string]any) <-chan submitted {
	ctx := ctxT(t)
	ch := make(chan submitted, 1)
	go func() {
		r, err := submit(ctx, c, proposalID, action)
		ch <- submitted{r, err}
	}()
	return ch
}

// await waits for an outcome of submitAsync.
func await(t *testing.T, ch <-chan submitted) protocol.ActionResult {
	t.Helper()
	select {
	case s := <-ch:
		if s.err != nil {
			t.Fatal(s.err)
		}
		return s.res
	case <-time.After(waitLimit):
		t.Fatal("no proposal result")
		return protocol.ActionResult{}
	}
}

// hostWatch is a host.subscribe connection: an approver that sees the
// approvals of every daemon.
type hostWatch struct {
	*client.Client
	events chan protocol.HostEventEntry
}

func watchHost(t *testing.T, d *daemon) *hostWatch {
	t.Helper()
	h := &hostWatch{Client: d.dial(t), events: make(chan protocol.HostEventEntry, 256)}
	t.Cleanup(func() { h.Close() })
	h.HandleNotification(protocol.MethodHostEvent, func(raw json.RawMessage) {
		var ev protocol.HostEventEntry
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Errorf("host.event is not an event: %v: %s", err, raw)
			return
		}
		select {
		case h.events <- ev:
		default:
			t.Errorf("host events not read: %s", raw)
		}
	})
	if err := h.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}
	return h
}

// requested waits for approval.requested of the approval the permission
// gate raised for proposalID.
func (h *hostWatch) requested(t *testing.T, proposalID string) (protocol.HostEventEntry, protocol.HostApproval) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev := <-h.events:
			if ev.Kind != "approval.requested" {
				continue
			}
			ap := approvalIn(t, ev)
			if ap.Context["proposal_id"] == proposalID {
				return ev, ap
			}
		case <-timeout:
			t.Fatalf("no approval.requested for proposal %s", proposalID)
		}
	}
}

// approvalIn is the approval an approval.* host event carries.
func approvalIn(t *testing.T, ev protocol.HostEventEntry) protocol.HostApproval {
	t.Helper()
	var p struct {
		Approval protocol.HostApproval `json:"approval"`
	}
	b, err := json.Marshal(ev.Payload)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.Approval.ID == "" {
		t.Fatalf("%s without an approval: %v %+v", ev.Kind, err, ev.Payload)
	}
	return p.Approval
}

// evaluate is the permission gate's decision on one action, on c's daemon.
func evaluate(t *testing.T, c *client.Client, action map[string]any) string {
	t.Helper()
	var res struct {
		Decisions []struct {
			Decision string `json:"decision"`
		} `json:"decisions"`
	}
	if err := c.Call(ctxT(t), protocol.MethodPermissionEvaluate, map[string]any{"proposal": map[string]any{"actions": []any{action}}}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Decisions) != 1 {
		t.Fatalf("want one decision, got %+v", res.Decisions)
	}
	return res.Decisions[0].Decision
}

// TestClusterApprovalOnOneDaemonCountsOnAnother: an approval recorded on A
// admits the action on B when it is resubmitted there, and releases one
// parked on B, whether the person decides through host.resolve_approval
// (the approval B raised, mirrored on A) or permission.approve/reject on A.
func TestClusterApprovalOnOneDaemonCountsOnAnother(t *testing.T) {
	ds := startCluster(t, pgtest.URL(t), 2)
	a, b := ds[0], ds[1]
	onA := a.dial(t)
	defer onA.Close()
	runner := newToolbox(t, b, protocol.ToolSchema{Name: "deploy_service"})
	deploy := func(k string) map[string]any { return toolCall("ship", "deploy_service", k, "env", "prod") }

	// Resubmitted: with nobody to ask, B rejects at once what needs an
	// approval; approved on A, the same action is admitted on B.
	if r := mustSubmit(t, runner.Client, "", deploy("resubmitted")); r.Status != protocol.StatusRejected || runner.count("resubmitted") != 0 {
		t.Fatalf("unapproved on B: %s %q", r.Status, r.ErrorText())
	}
	// B's copy of the ledger follows A's records through notifications,
	// a moment behind; an approval committed on A counts on B at once all
	// the same. Many times over, since a late copy is late only sometimes.
	for i := range 30 {
		k := "resubmitted"
		if i > 0 {
			k = fmt.Sprint("submitted-", i)
		}
		if err := onA.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"action": deploy(k), "reason": "change 42"}, nil); err != nil {
			t.Fatal(err)
		}
		if r := mustSubmit(t, runner.Client, "", deploy(k)); r.Status != protocol.StatusSucceeded || runner.count(k) != 1 {
			t.Fatalf("approved on A, then submitted on B: %s %q", r.Status, r.ErrorText())
		}
	}

	// Parked and released: with an approver subscribed on A, B parks
	// rather than rejects, and the approval it raised shows on A, where a
	// decision releases it. B hears of A's approver on the bus, moments
	// after A answered the subscription: until then B rejects at once, as
	// with nobody to ask. So probe until B parks.
	hostA := watchHost(t, a)
	var ch <-chan submitted
	var ev protocol.HostEventEntry
	var ap protocol.HostApproval
	deadline := time.Now().Add(waitLimit)
	for n := 0; ch == nil; n++ {
		k := fmt.Sprint("parked-host-", n)
		probe := submitAsync(t, runner.Client, k, deploy(k))
		select {
		case ev = <-hostA.events:
			if ev.Kind != "approval.requested" {
				t.Fatalf("on A, before any approval was requested: %+v", ev)
			}
			ap = approvalIn(t, ev)
			if ap.Context["proposal_id"] != k || runner.count(k) != 0 {
				t.Fatalf("A's approval.requested %+v, for %s, which ran %d times", ap, k, runner.count(k))
			}
			ch = probe
		case s := <-probe:
			if s.err != nil || s.res.Status != protocol.StatusRejected || runner.count(k) != 0 {
				t.Fatalf("%s on B, before B heard of A's approver: %v %s %q", k, s.err, s.res.Status, s.res.ErrorText())
			}
			if time.Now().After(deadline) {
				t.Fatal("B never parked an action for A's approver")
			}
		}
	}
	if ev.Node != nodeOf(t, b) || ap.Node != nodeOf(t, b) || ap.Status != "pending" || ap.Context["tool"] != "deploy_service" {
		t.Fatalf("A's approval.requested: node %q, approval %+v", ev.Node, ap)
	}
	var resolved protocol.HostApproval
	if err := hostA.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": ap.ID, "approved": true, "notes": "release window"}, &resolved); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); r.Status != protocol.StatusSucceeded || runner.count(ap.Context["proposal_id"].(string)) != 1 {
		t.Fatalf("resolved on A, parked on B: %s %q", r.Status, r.ErrorText())
	}

	for _, tc := range []struct {
		k, method string
		want      protocol.ActionStatus
		runs      int
	}{
		{"parked-approve", protocol.MethodPermissionApprove, protocol.StatusSucceeded, 1},
		{"parked-reject", protocol.MethodPermissionReject, protocol.StatusRejected, 0},
	} {
		ch := submitAsync(t, runner.Client, tc.k, deploy(tc.k))
		hostA.requested(t, tc.k) // parked on B
		if err := onA.Call(ctxT(t), tc.method, map[string]any{"action": deploy(tc.k), "reason": "decided on A"}, nil); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch)
		if r.Status != tc.want || runner.count(tc.k) != tc.runs {
			t.Fatalf("%s on A, parked on B: %s %q, ran %d times", tc.method, r.Status, r.ErrorText(), runner.count(tc.k))
		}
		if tc.want == protocol.StatusRejected && !strings.Contains(r.ErrorText(), "decided on A") {
			t.Fatalf("the rejection does not give A's reason: %q", r.ErrorText())
		}
	}
}

// idempotentTools are the tools of the idempotency tests.
var idempotentTools = []protocol.ToolSchema{{Name: "book_seat", Idempotent: true}, {Name: "note"}}

// TestClusterIdempotentActionsDispatchOnce: the same idempotent action
// submitted on A and B at the same moment runs once; an action acknowledged
// on a daemon that is then SIGKILLed is a cache hit on another; and a claim
// whose holder was SIGKILLed is taken over once its lease runs out, then
// dispatched once.
func TestClusterIdempotentActionsDispatchOnce(t *testing.T) {
	ds := startCluster(t, pgtest.URL(t), 3, "CAR_CLAIM_LEASE=2s")
	a, b, c := ds[0], ds[1], ds[2]
	tbA, tbB, tbC := newToolbox(t, a, idempotentTools...), newToolbox(t, b, idempotentTools...), newToolbox(t, c, idempotentTools...)

	// At the same moment on A and B, for several keys at once. Each
	// dispatch waits until every key has been dispatched once, so that the
	// other daemon meets each key while it is claimed and running.
	const keys = 16
	seats := newBarrier(keys)
	for i := range keys {
		tbA.gate(seats, fmt.Sprint("seat-", i))
		tbB.gate(seats, fmt.Sprint("seat-", i))
	}
	var results [keys][2]submitted
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range keys {
		for j, tb := range []*toolbox{tbA, tbB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := submit(ctxT(t), tb.Client, "", toolCall("b", "book_seat", fmt.Sprint("seat-", i)))
				results[i][j] = submitted{r, err}
			}()
		}
	}
	close(start)
	wg.Wait()
	for i := range keys {
		k := fmt.Sprint("seat-", i)
		if n := tbA.count(k) + tbB.count(k); n != 1 {
			t.Errorf("%s submitted on A and B at once was dispatched %d times (A %d, B %d)", k, n, tbA.count(k), tbB.count(k))
		}
		ran := 0
		for j, s := range results[i] {
			if s.err != nil || s.res.Status != protocol.StatusSucceeded {
				t.Fatalf("%s on daemon %d: %v %s %q", k, j, s.err, s.res.Status, s.res.ErrorText())
			}
			if !reflect.DeepEqual(s.res.Output, map[string]any{"ran": k}) {
				t.Errorf("%s on daemon %d: output %v", k, j, s.res.Output)
			}
			if s.res.CacheHit == "" {
				ran++
			} else if s.res.CacheHit != "idempotency" {
				t.Errorf("%s on daemon %d: cache_hit %q", k, j, s.res.CacheHit)
			}
		}
		if ran != 1 {
			t.Errorf("%s: %d of the two results say the tool ran, want 1", k, ran)
		}
	}

	// Acknowledged on C, which is then SIGKILLed: a cache hit on B.
	if r := mustSubmit(t, tbC.Client, "", toolCall("b", "book_seat", "acked")); r.Status != protocol.StatusSucceeded || r.CacheHit != "" || tbC.count("acked") != 1 {
		t.Fatalf("on C: %s %q hit %q", r.Status, r.ErrorText(), r.CacheHit)
	}
	c.kill(t)
	if r := mustSubmit(t, tbB.Client, "", toolCall("b", "book_seat", "acked")); r.Status != protocol.StatusSucceeded || r.CacheHit != "idempotency" ||
		!reflect.DeepEqual(r.Output, map[string]any{"ran": "acked"}) || tbB.count("acked") != 0 {
		t.Fatalf("acknowledged on C, resubmitted on B after C died: %s %q hit %q output %v, B ran it %d times", r.Status, r.ErrorText(), r.CacheHit, r.Output, tbB.count("acked"))
	}

	// Claims held by A, which is SIGKILLed with both calls open. B meets
	// the first while A lives, and waits; the second after A died. Each
	// is taken over when A's lease runs out, and dispatched once.
	feed := make(chan engine.Event, 256)
	tbB.HandleNotification(protocol.MethodEventsEvent, func(raw json.RawMessage) {
		var e engine.Event
		if json.Unmarshal(raw, &e) == nil {
			feed <- e
		}
	})
	if err := tbB.Call(ctxT(t), protocol.MethodEventsSubscribe, map[string]any{"kinds": []string{"action_started"}, "proposal_id": "waits"}, nil); err != nil {
		t.Fatal(err)
	}
	var open []<-chan submitted
	for _, k := range []string{"held-live", "held-dead"} {
		arrived := tbA.hold(k)
		open = append(open, submitAsync(t, tbA.Client, "", toolCall("b", "book_seat", k)))
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatalf("%s never reached A's tool", k)
		}
	}
	live := submitAsync(t, tbB.Client, "waits", toolCall("b", "book_seat", "held-live"))
	select {
	case <-feed: // B is on the action, at its claim
	case <-time.After(waitLimit):
		t.Fatal("B never started the action")
	}
	if n := tbB.count("held-live"); n != 0 {
		t.Fatalf("B dispatched %d times a key A's live claim holds", n)
	}
	a.kill(t)
	tbA.Close()
	for _, ch := range open {
		if s := <-ch; s.err == nil {
			t.Fatalf("a submission on A outlived it: %+v", s.res)
		}
	}
	dead := submitAsync(t, tbB.Client, "", toolCall("b", "book_seat", "held-dead"))
	for k, ch := range map[string]<-chan submitted{"held-live": live, "held-dead": dead} {
		r := await(t, ch)
		if r.Status != protocol.StatusSucceeded || r.CacheHit != "" || tbB.count(k) != 1 || tbA.count(k) != 1 {
			t.Fatalf("%s, held by A when it died, on B: %s %q hit %q; ran on A %d, on B %d times", k, r.Status, r.ErrorText(), r.CacheHit, tbA.count(k), tbB.count(k))
		}
	}
	if r := mustSubmit(t, tbB.Client, "", toolCall("b", "book_seat", "held-dead")); r.CacheHit != "idempotency" || tbB.count("held-dead") != 1 {
		t.Fatalf("after the takeover, again on B: %s hit %q, ran %d times", r.Status, r.CacheHit, tbB.count("held-dead"))
	}
}

// supervisor is a supervision.subscribe connection.
type supervisor struct {
	*client.Client
	intents chan engine.Intent
}

func subscribeSupervisor(t *testing.T, d *daemon, filter map[string]any) *supervisor {
	t.Helper()
	s := &supervisor{Client: d.dial(t), intents: make(chan engine.Intent, 64)}
	t.Cleanup(func() { s.Close() })
	s.HandleNotification(protocol.MethodSupervisionIntent, func(raw json.RawMessage) {
		var in engine.Intent
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Errorf("supervision.intent is not an intent: %v: %s", err, raw)
			return
		}
		s.intents <- in
	})
	if err := s.Call(ctxT(t), protocol.MethodSupervisionSubscribe, map[string]any{"filter": filter}, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *supervisor) decide(t *testing.T, id, kind, reason string) {
	t.Helper()
	if err := s.Call(ctxT(t), protocol.MethodSupervisionDecide, map[string]any{"intent_id": id, "decision": map[string]any{"kind": kind, "reason": reason}}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestClusterSupervisorOnOneDaemonDecidesAnIntentFromAnother: a supervisor
// connected to A decides what waits on B: allowed, it runs; denied, it is
// rejected with the supervisor's reason.
func TestClusterSupervisorOnOneDaemonDecidesAnIntentFromAnother(t *testing.T) {
	ds := startCluster(t, pgtest.URL(t), 2)
	a, b := ds[0], ds[1]
	sup := subscribeSupervisor(t, a, map[string]any{"tools": []string{"stage_site"}})
	runner := newToolbox(t, b, protocol.ToolSchema{Name: "stage_site"})

	// B learns of A's supervisor through the store, moments after A
	// answered the subscription; until then B runs unsupervised, as a
	// daemon does without supervisors. So probe until B parks.
	var in engine.Intent
	var parked <-chan submitted
	deadline := time.Now().Add(waitLimit)
	for n := 0; parked == nil; n++ {
		k := fmt.Sprint("probe-", n)
		ch := submitAsync(t, runner.Client, "", toolCall("s", "stage_site", k))
		select {
		case in = <-sup.intents:
			parked = ch
			if runner.count(k) != 0 {
				t.Fatalf("%s ran before A's supervisor decided", k)
			}
		case s := <-ch:
			if s.err != nil || s.res.Status != protocol.StatusSucceeded {
				t.Fatalf("an unsupervised run on B: %v %s %q", s.err, s.res.Status, s.res.ErrorText())
			}
			if time.Now().After(deadline) {
				t.Fatal("B never parked a proposal for A's supervisor")
			}
		}
	}
	if in.Node != nodeOf(t, b) || len(in.Actions) != 1 {
		t.Fatalf("the intent on A: %+v", in)
	}
	sup.decide(t, in.ID, "allow", "")
	if r := await(t, parked); r.Status != protocol.StatusSucceeded {
		t.Fatalf("allowed on A: %s %q", r.Status, r.ErrorText())
	}

	ch := submitAsync(t, runner.Client, "", toolCall("s", "stage_site", "denied"))
	select {
	case in = <-sup.intents:
	case <-time.After(waitLimit):
		t.Fatal("no intent on A")
	}
	sup.decide(t, in.ID, "deny", "not today")
	if r := await(t, ch); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "not today") || runner.count("denied") != 0 {
		t.Fatalf("denied on A: %s %q, ran %d times", r.Status, r.ErrorText(), runner.count("denied"))
	}
}

// queryEvents is events.query on c's daemon.
func queryEvents(t *testing.T, c *client.Client, q map[string]any) []engine.Event {
	t.Helper()
	var res struct {
		Events []engine.Event `json:"events"`
	}
	if err := c.Call(ctxT(t), protocol.MethodEventsQuery, q, &res); err != nil {
		t.Fatal(err)
	}
	return res.Events
}

// hasKinds reports whether events holds each kind, all recorded by node.
func hasKinds(events []engine.Event, node string, kinds ...engine.EventKind) bool {
	seen := map[engine.EventKind]bool{}
	for _, e := range events {
		if e.Node == node {
			seen[e.Kind] = true
		}
	}
	for _, k := range kinds {
		if !seen[k] {
			return false
		}
	}
	return true
}

// memberStatus runs car-server status --json against the daemon of home.
func memberStatus(t *testing.T, home string) protocol.ServerStatusResult {
	t.Helper()
	cmd := execBinary("status", "--json")
	cmd.Env = append(os.Environ(), "CAR_HOME="+home, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, out)
	}
	var st protocol.ServerStatusResult
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, out)
	}
	return st
}

// alive is each member's liveness by id.
func alive(st protocol.ServerStatusResult) map[string]bool {
	out := map[string]bool{}
	for _, m := range st.Members {
		out[m.ID] = m.Alive
	}
	return out
}

// TestClusterSharesStateEventsAndMembers: state written on A is read on B,
// B's events.query sees A's proposal, and car-server status on A lists both
// daemons alive, then B dead once it was SIGKILLed and its heartbeats
// stopped.
func TestClusterSharesStateEventsAndMembers(t *testing.T) {
	ds := startCluster(t, pgtest.URL(t), 2)
	a, b := ds[0], ds[1]
	idA, idB := nodeOf(t, a), nodeOf(t, b)
	runner := newToolbox(t, a, idempotentTools...)
	onB := b.dial(t)
	defer onB.Close()
	ctx := ctxT(t)

	want := map[string]any{"version": 7.0, "by": "a"}
	if err := runner.Call(ctx, protocol.MethodStateSet, map[string]any{"key": "release", "value": want}, nil); err != nil {
		t.Fatal(err)
	}
	var got any
	if err := onB.Call(ctx, protocol.MethodStateGet, map[string]any{"key": "release"}, &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("state.set on A, state.get on B: %v %v", got, err)
	}

	if r := mustSubmit(t, runner.Client, "seen-on-b", toolCall("n", "note", "hello")); r.Status != protocol.StatusSucceeded {
		t.Fatalf("on A: %s %q", r.Status, r.ErrorText())
	}
	// A writes its events in batches, at most 200 ms behind.
	testwait.Eventually(t, waitLimit, "B's events.query showing A's proposal", func() bool {
		return hasKinds(queryEvents(t, onB, map[string]any{"proposal_id": "seen-on-b"}), idA,
			engine.EventProposalReceived, engine.EventActionSucceeded, engine.EventProposalFinished)
	})

	if st := alive(memberStatus(t, a.home)); len(st) != 2 || !st[idA] || !st[idB] {
		t.Fatalf("members on A: %v, want %s and %s alive", st, idA, idB)
	}
	b.kill(t)
	testwait.Eventually(t, waitLimit, "B shown dead after its heartbeats stopped", func() bool {
		st := alive(memberStatus(t, a.home))
		return len(st) == 2 && st[idA] && !st[idB]
	})
	cmd := execBinary("status")
	cmd.Env = append(os.Environ(), "CAR_HOME="+a.home)
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 0 || !regexpLine(string(out), idA, "alive") || !regexpLine(string(out), idB, "DEAD") || !strings.Contains(string(out), "store                postgres") {
		t.Fatalf("status: exit %d:\n%s", code, out)
	}
}

// health is GET /healthz on d: the status code and the body.
func health(t *testing.T, d *daemon) (int, string) {
	t.Helper()
	return httpGet(t, "http://"+d.addr+"/healthz")
}

// spoolSize is the size of d's events spool (0 when there is none).
func spoolSize(t *testing.T, d *daemon) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(d.home, "events-spool.jsonl"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestClusterOutageOfPostgreSQL: PostgreSQL stops while two daemons run on
// it. What needs the store fails saying so, and nothing is acknowledged; a
// plain tool call still runs; /healthz answers 503 naming the store; events
// wait in the spool. PostgreSQL starts again: everything resumes without a
// restart, and the spooled events reach the other daemon.
func TestClusterOutageOfPostgreSQL(t *testing.T) {
	srv := pgtest.NewServer(t)
	ds := startCluster(t, srv.NewDatabase(t), 2, "CAR_CLAIM_LEASE=2s")
	a, b := ds[0], ds[1]
	runner := newToolbox(t, a, append([]protocol.ToolSchema{{Name: "deploy_service"}}, idempotentTools...)...)
	onB := b.dial(t)
	defer onB.Close()
	if code, body := health(t, a); code != http.StatusOK {
		t.Fatalf("/healthz before the outage: %d %s", code, body)
	}
	// An idempotent call claimed before the outage, running when it begins.
	running := newBarrier(2)
	runner.gate(running, "running")
	runningCh := submitAsync(t, runner.Client, "", toolCall("b", "book_seat", "running"))
	testwait.Eventually(t, waitLimit, "the idempotent call reaching the tool", func() bool { return runner.count("running") == 1 })

	srv.Stop(t)
	testwait.Eventually(t, waitLimit, "/healthz saying the store is down", func() bool {
		code, body := health(t, a)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "postgres store") && strings.Contains(body, "the shared store is unavailable")
	})
	// The running call answers now: its result cannot be committed, so it
	// is not acknowledged.
	if err := running.wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, runningCh); r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "could not be committed") || !strings.Contains(r.ErrorText(), "the shared store is unavailable") {
		t.Fatalf("an idempotent call that ran while the store went down: %s %q", r.Status, r.ErrorText())
	}
	// An idempotent action is not run, and not acknowledged.
	r := mustSubmit(t, runner.Client, "", toolCall("b", "book_seat", "during-outage"))
	if r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "the shared store is unavailable") || runner.count("during-outage") != 0 {
		t.Fatalf("an idempotent action while the store is down: %s %q, ran %d times", r.Status, r.ErrorText(), runner.count("during-outage"))
	}
	// A plain tool call runs.
	if r := mustSubmit(t, runner.Client, "plain-during-outage", toolCall("n", "note", "plain")); r.Status != protocol.StatusSucceeded || runner.count("plain") != 1 {
		t.Fatalf("a plain tool call while the store is down: %s %q", r.Status, r.ErrorText())
	}
	err := runner.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "k", "value": 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "the shared store is unavailable") {
		t.Fatalf("state.set while the store is down: %v", err)
	}
	write := map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": 2}}
	if r := mustSubmit(t, runner.Client, "", write); r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "the shared store is unavailable") {
		t.Fatalf("a state_write while the store is down: %s %q", r.Status, r.ErrorText())
	}
	// An action that needs an approval is refused, saying why it cannot
	// be told whether another daemon recorded one.
	deploy := toolCall("d", "deploy_service", "after-outage", "env", "prod")
	if r := mustSubmit(t, runner.Client, "", deploy); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "the shared store is unavailable") || runner.count("after-outage") != 0 {
		t.Fatalf("an action needing an approval while the store is down: %s %q", r.Status, r.ErrorText())
	}
	err = runner.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"action": deploy}, nil)
	if err == nil || !strings.Contains(err.Error(), "the shared store is unavailable") {
		t.Fatalf("permission.approve while the store is down: %v", err)
	}
	testwait.Eventually(t, waitLimit, "B's /healthz saying the store is down", func() bool {
		code, body := health(t, b)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "the shared store is unavailable")
	})
	// The events of the plain call wait in A's spool.
	testwait.Eventually(t, waitLimit, "A spooling its events", func() bool { return spoolSize(t, a) > 0 })

	srv.Start(t)
	testwait.Eventually(t, waitLimit, "/healthz answering 200 again", func() bool {
		code, _ := health(t, a)
		return code == http.StatusOK
	})
	r = mustSubmit(t, runner.Client, "", toolCall("b", "book_seat", "during-outage"))
	if r.Status != protocol.StatusSucceeded || r.CacheHit != "" || runner.count("during-outage") != 1 {
		t.Fatalf("the idempotent action after the outage: %s %q hit %q, ran %d times", r.Status, r.ErrorText(), r.CacheHit, runner.count("during-outage"))
	}
	// The call that was not acknowledged runs again, once its claim lapsed.
	if r := mustSubmit(t, runner.Client, "", toolCall("b", "book_seat", "running")); r.Status != protocol.StatusSucceeded || r.CacheHit != "" || runner.count("running") != 2 {
		t.Fatalf("the unacknowledged call after the outage: %s %q hit %q, ran %d times", r.Status, r.ErrorText(), r.CacheHit, runner.count("running"))
	}
	if err := runner.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "k", "value": 1}, nil); err != nil {
		t.Fatalf("state.set after the outage: %v", err)
	}
	var got any
	if err := onB.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "k"}, &got); err != nil || got != 1.0 {
		t.Fatalf("state.get on B after the outage: %v %v", got, err)
	}
	// Notifications between the daemons resume: an approval recorded on A
	// reaches B's copy of the ledger.
	if err := runner.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"action": deploy}, nil); err != nil {
		t.Fatalf("permission.approve after the outage: %v", err)
	}
	testwait.Eventually(t, waitLimit, "B reading the approval recorded on A after the outage", func() bool { return evaluate(t, onB, deploy) == "allow" })
	if r := mustSubmit(t, runner.Client, "", deploy); r.Status != protocol.StatusSucceeded || runner.count("after-outage") != 1 {
		t.Fatalf("an approved action after the outage: %s %q", r.Status, r.ErrorText())
	}
	idA := nodeOf(t, a)
	testwait.Eventually(t, waitLimit, "A's spooled events reaching B", func() bool {
		return hasKinds(queryEvents(t, onB, map[string]any{"proposal_id": "plain-during-outage"}), idA,
			engine.EventProposalReceived, engine.EventActionSucceeded, engine.EventProposalFinished)
	})
	testwait.Eventually(t, waitLimit, "A's spool drained", func() bool { return spoolSize(t, a) == 0 })
	// The spooled events kept A's chain.
	var chains protocol.ChainVerifyResult
	if err := onB.Call(ctxT(t), protocol.MethodEventsChainVerify, nil, &chains); err != nil {
		t.Fatal(err)
	}
	verifiedA := 0
	for _, c := range chains.Nodes {
		if c.Node == idA && c.Tampered == nil {
			verifiedA = c.Verified
		}
	}
	if chains.TamperedAt != nil || verifiedA == 0 {
		t.Fatalf("events.chain.verify on B after the outage: %s", mustJSON(t, chains))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
