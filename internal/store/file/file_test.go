package file

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/store"
)

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 10 * time.Second

// everyPart is a Config with every part of the file store under dir.
func everyPart(dir string) Config {
	return Config{
		IdempotencyPath: filepath.Join(dir, "idempotency.jsonl"),
		ApprovalsPath:   filepath.Join(dir, "approvals.jsonl"),
		MessagesPath:    filepath.Join(dir, "messages.jsonl"),
		LeasesPath:      filepath.Join(dir, "leases.jsonl"),
		RunsDir:         filepath.Join(dir, "runs"),
		AgentTokensPath: filepath.Join(dir, "agent-tokens.json"),
		PosturesPath:    filepath.Join(dir, "agent-permissions.json"),
		TrajectoriesDir: filepath.Join(dir, "trajectories"),
		HarnessPath:     filepath.Join(dir, "harness.json"),
		TaintPath:       filepath.Join(dir, "taint.jsonl"),
		// The suite's events are dated March 2026: kept, whatever the date.
		Events: &EventsConfig{Dir: filepath.Join(dir, "events"), KeyPath: filepath.Join(dir, "audit-key"), MaxAge: 100 * 365 * 24 * time.Hour},
	}
}

func openStore(t *testing.T, dir string) (*store.Store, Report) {
	t.Helper()
	st, rep, err := Open(Config{
		IdempotencyPath: filepath.Join(dir, "idempotency.jsonl"),
		ApprovalsPath:   filepath.Join(dir, "approvals.jsonl"),
		MessagesPath:    filepath.Join(dir, "messages.jsonl"),
		Node:            "node-a",
		Version:         "1.2.3",
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, rep
}

// TestOpenPartsOutliveARestart: what the approvals, idempotency and
// messages parts commit is there after the store is closed and opened
// again; state starts empty, as the daemon's does.
func TestOpenPartsOutliveARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, _ := openStore(t, dir)
	if st.Kind != Kind || st.Node != "node-a" || st.Events != nil {
		t.Fatalf("kind %q node %q events %v", st.Kind, st.Node, st.Events)
	}
	if err := st.Health(); err != nil {
		t.Fatalf("the file store's health: %v", err)
	}
	if _, err := st.Approvals.Record(approvals.Record{Fingerprint: "fp", Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:x"}); err != nil {
		t.Fatal(err)
	}
	_, hit, claim, err := st.Idempotency.Begin(ctx, "key", "charge", "p1")
	if err != nil || hit {
		t.Fatalf("begin: hit %v err %v", hit, err)
	}
	if err := claim.Commit(ctx, "charged"); err != nil {
		t.Fatal(err)
	}
	id := "m-1"
	if err := st.Messages.Record(ctx, "mkey", store.Receipt{Channel: "slack", MessageID: &id}); err != nil {
		t.Fatal(err)
	}
	if err := st.State.Set(ctx, "", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, rep := openStore(t, dir)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	if rep.Idempotency.Live != 1 || rep.Approvals.Live != 1 || rep.Messages.Live != 1 {
		t.Fatalf("the reopen's report: %+v", rep)
	}
	if rec, ok := st.Approvals.Decision("fp"); !ok || rec.Decision != approvals.Approved {
		t.Fatalf("the decision after a restart: %+v %v", rec, ok)
	}
	if out, hit, claim, err := st.Idempotency.Begin(ctx, "key", "charge", "p2"); err != nil || !hit || claim != nil || out != "charged" {
		t.Fatalf("the result after a restart: %v %v %v %v", out, hit, claim, err)
	}
	if r, ok, err := st.Messages.Delivered(ctx, "mkey"); err != nil || !ok || r.Channel != "slack" || r.MessageID == nil || *r.MessageID != "m-1" {
		t.Fatalf("the receipt after a restart: %+v %v %v", r, ok, err)
	}
	if _, ok, err := st.Messages.Delivered(ctx, "other"); err != nil || ok {
		t.Fatalf("a key never delivered: %v %v", ok, err)
	}
	if _, ok, err := st.State.Get(ctx, "", "k"); err != nil || ok {
		t.Fatalf("state is in memory and starts empty: %v %v", ok, err)
	}
}

// TestOpenClosesWhatItOpenedOnError: a journal that cannot be opened fails
// Open and leaves nothing running (goleak checks the journals' flushers).
func TestOpenClosesWhatItOpenedOnError(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Open(Config{
		IdempotencyPath: filepath.Join(dir, "idempotency.jsonl"),
		ApprovalsPath:   filepath.Join(dir, "approvals.jsonl"),
		MessagesPath:    filepath.Join(blocker, "messages.jsonl"),
	})
	if err == nil {
		t.Fatal("a messages journal under a regular file was opened")
	}
}

// TestMembersListThisDaemonAlone: the file store's member list is this
// daemon, alive, its heartbeat the time of the call.
func TestMembersListThisDaemonAlone(t *testing.T) {
	m := NewMembers("node-a", "1.2.3")
	before := time.Now().UTC()
	list, err := m.List(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("%v %v", list, err)
	}
	me := list[0]
	if me.ID != "node-a" || me.Version != "1.2.3" || !me.Alive || me.StartedAt.After(before) || me.LastHeartbeat.Before(before) {
		t.Fatalf("member %+v", me)
	}
}

// recv waits for the next payload of a subscription.
func recv(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(testTimeout):
		t.Fatal("no payload arrived")
		return ""
	}
}

// TestBusDeliversInOrderPerTopic: a subscriber gets its topic's payloads,
// in order, copies of what was published; cancel stops delivery.
func TestBusDeliversInOrderPerTopic(t *testing.T) {
	ctx := context.Background()
	b := NewBus()
	defer b.Close()
	got := make(chan string, 200)
	cancel := b.Subscribe("decisions", func(p []byte) { got <- string(p) })
	other := make(chan string, 1)
	cancelOther := b.Subscribe("elsewhere", func(p []byte) { other <- string(p) })
	defer cancelOther()
	buf := []byte("x")
	for i := range 100 {
		buf = fmt.Appendf(buf[:0], "%d", i)
		if err := b.Publish(ctx, "decisions", buf); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if p := recv(t, got); p != fmt.Sprint(i) {
			t.Fatalf("payload %d is %q: out of order, or the publisher's buffer was shared", i, p)
		}
	}
	select {
	case p := <-other:
		t.Fatalf("another topic's subscriber got %q", p)
	default:
	}
	cancel()
	cancel() // a second cancel does nothing
	b.mu.Lock()
	_, left := b.subs["decisions"]
	b.mu.Unlock()
	if left {
		t.Fatal("a cancelled subscription is still registered")
	}
	// The subscription on the other topic still works.
	if err := b.Publish(ctx, "elsewhere", []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, other); p != "ping" {
		t.Fatalf("other got %q", p)
	}
}

// TestBusSlowSubscriberBlocksNobody: while a subscriber is stuck in its
// callback, Publish returns at once; past the queue's bound the oldest
// payloads are dropped, the newest kept.
func TestBusSlowSubscriberBlocksNobody(t *testing.T) {
	ctx := context.Background()
	b := NewBus()
	defer b.Close()
	entered := make(chan struct{})
	release := make(chan struct{})
	got := make(chan string, busQueue+10)
	cancel := b.Subscribe("t", func(p []byte) {
		if string(p) == "first" {
			close(entered)
			<-release
		}
		got <- string(p)
	})
	defer cancel()
	if err := b.Publish(ctx, "t", []byte("first")); err != nil {
		t.Fatal(err)
	}
	<-entered
	for i := range busQueue + 5 {
		if err := b.Publish(ctx, "t", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if p := recv(t, got); p != "first" {
		t.Fatalf("first payload %q", p)
	}
	if p := recv(t, got); p != "5" {
		t.Fatalf("after the queue overflowed the oldest kept payload is %q, want 5 (0-4 dropped)", p)
	}
}

// TestBusCloseEndsEverySubscription: Close stops the subscriptions still
// open (goleak checks their goroutines), and a later Subscribe gets nothing.
func TestBusCloseEndsEverySubscription(t *testing.T) {
	b := NewBus()
	cancel := b.Subscribe("t", func([]byte) {})
	b.Subscribe("u", func([]byte) {})
	b.Close()
	cancel() // after Close, a cancel does nothing
	b.Subscribe("t", func([]byte) {})
	b.mu.Lock()
	n := len(b.subs)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d topics still have subscriptions after Close", n)
	}
}

// TestOpenRunsTokensAndPostures: with their paths set, the store keeps run
// traces (a run left in progress is stranded at the next open), agent
// tokens and the posture document in files under the state root; without
// them those parts are nil. A run file that cannot be read fails Open and
// leaves nothing running.
func TestOpenRunsTokensAndPostures(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := everyPart(dir)
	st, _, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := store.RunHead{RunID: "r1", AgentID: "alice", Intent: "i", Owner: "c", StartedAt: time.Now().UTC()}
	if _, created, err := st.Runs.Start(ctx, h, store.RunRecord{Kind: store.RunStarted, Body: []byte(`{"record":"started","run_id":"r1","agent_id":"alice","started_at":"2030-01-02T03:04:05Z"}`)}); err != nil || !created {
		t.Fatalf("start a run: %v %v", created, err)
	}
	if err := st.AgentTokens.Issue(ctx, "alice", "tok"); err != nil {
		t.Fatal(err)
	}
	if err := st.Postures.Update(ctx, func(cur json.RawMessage, found bool) (json.RawMessage, error) {
		if found {
			return nil, fmt.Errorf("a posture document before any was written: %s", cur)
		}
		return []byte(`{"default":{"read_only":"deny"},"agents":{}}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, rep, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	if rep.Runs.Runs != 1 {
		t.Fatalf("the reopen found %d runs, want 1", rep.Runs.Runs)
	}
	if stranded, err := st.Runs.Stranded(ctx); err != nil || len(stranded) != 1 || stranded[0].RunID != "r1" {
		t.Fatalf("the run left in progress: %+v %v", stranded, err)
	}
	if ok, err := st.AgentTokens.Verify(ctx, "alice", "tok"); !ok || err != nil {
		t.Fatalf("the token after a restart: %v %v", ok, err)
	}
	if doc, found, err := st.Postures.Read(ctx); err != nil || !found || string(doc) != `{"default":{"read_only":"deny"},"agents":{}}`+"\n" {
		t.Fatalf("the postures after a restart: %q %v %v", doc, found, err)
	}

	bare, _ := openStore(t, t.TempDir())
	defer bare.Close()
	if bare.Runs != nil || bare.AgentTokens != nil || bare.Postures != nil {
		t.Fatal("a store without the paths has run, token or posture parts")
	}

	bad := t.TempDir()
	if err := os.MkdirAll(filepath.Join(bad, "runs", "alice"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "runs", "alice", "r.jsonl"), []byte("not json\n{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.RunsDir = filepath.Join(bad, "runs")
	cfg.IdempotencyPath = filepath.Join(bad, "idempotency.jsonl")
	cfg.ApprovalsPath = filepath.Join(bad, "approvals.jsonl")
	cfg.MessagesPath = filepath.Join(bad, "messages.jsonl")
	if _, _, err := Open(cfg); err == nil {
		t.Fatal("a corrupt run file was opened")
	}
}
