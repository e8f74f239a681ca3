package postgres

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// A token issued through daemon a binds on daemon b; a revoke on b is
// refused on a at once and announced to every daemon; only hashes are
// kept.
func TestAgentTokensAcrossDaemons(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a").Store().AgentTokens, openNode(t, url, "b")
	ctx := ctxT(t)
	revoked := make(chan string, 4)
	listening := make(chan struct{})
	var once sync.Once
	stop := b.bus.Subscribe(store.TopicAgentRevoked, func(p []byte) {
		if p == nil {
			once.Do(func() { close(listening) }) // from now on, revokes reach b
			return
		}
		revoked <- string(p)
	})
	defer stop()
	select {
	case <-listening:
	case <-ctx.Done():
		t.Fatal("b never listened for revokes")
	}
	if err := a.Issue(ctx, "alice", "alice-token"); err != nil {
		t.Fatal(err)
	}
	if err := a.Issue(ctx, "bob", "bob-token"); err != nil {
		t.Fatal(err)
	}
	bt := b.Store().AgentTokens
	if ok, err := bt.Verify(ctx, "alice", "alice-token"); !ok || err != nil {
		t.Fatalf("alice's token on b: %v %v", ok, err)
	}
	for _, c := range [][2]string{{"alice", "bob-token"}, {"alice", ""}, {"carol", "alice-token"}, {"x\x00", "t"}} {
		if ok, err := bt.Verify(ctx, c[0], c[1]); ok || err != nil {
			t.Fatalf("%q with %q verified on b: %v %v", c[0], c[1], ok, err)
		}
	}
	if err := bt.Issue(ctx, "alice", "alice-second"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.Verify(ctx, "alice", "alice-token"); ok {
		t.Fatal("a reissue on b left the first token valid on a")
	}
	list, err := a.List(ctx)
	if err != nil || len(list) != 2 || list[0].AgentID != "alice" || list[1].AgentID != "bob" || list[0].IssuedAt.IsZero() {
		t.Fatalf("list on a: %+v %v", list, err)
	}
	if ok, err := bt.Revoke(ctx, "alice"); !ok || err != nil {
		t.Fatalf("revoke on b: %v %v", ok, err)
	}
	if ok, err := a.Verify(ctx, "alice", "alice-second"); ok || err != nil {
		t.Fatalf("alice's revoked token on a: %v %v", ok, err)
	}
	if ok, _ := a.Verify(ctx, "bob", "bob-token"); !ok {
		t.Fatal("revoking alice stopped bob's token")
	}
	if ok, err := a.Revoke(ctx, "alice"); ok || err != nil {
		t.Fatalf("a second revoke: %v %v, want false", ok, err)
	}
	select {
	case got := <-revoked:
		if got != "alice" {
			t.Fatalf("the revoke was announced as %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the revoke was not announced")
	}
	var n int
	if err := sqlConn(t, url).QueryRow(ctx, "SELECT count(*) FROM car_agent_tokens WHERE hash LIKE '%token%' OR hash = $1", store.HashToken("bob-token")).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the table holds something else than bob's hash: %d rows (%v)", n, err)
	}
}

// The operator's handle on the tokens works on a migrated database and
// refuses one that is not, saying what to do.
func TestOpenTokensNeedsTheSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := ctxT(t)
	if _, _, err := OpenTokens(ctx, Config{URL: url}); err == nil || !strings.Contains(err.Error(), "migrate up") {
		t.Fatalf("tokens on an empty database: %v", err)
	}
	openNode(t, url, "a")
	tokens, closeTokens, err := OpenTokens(ctx, Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer closeTokens()
	if err := tokens.Issue(ctx, "alice", "t"); err != nil {
		t.Fatal(err)
	}
	if ok, err := tokens.Verify(ctx, "alice", "t"); !ok || err != nil {
		t.Fatalf("verify: %v %v", ok, err)
	}

	// A database a newer car-server migrated: refused, saying so.
	if _, err := sqlConn(t, url).Exec(ctx, "INSERT INTO car_schema_version (version_id, is_applied) VALUES (99, true)"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenTokens(ctx, Config{URL: url}); !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("tokens on a newer schema: %v", err)
	}
}

func TestAgentTokensUnavailable(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	tokens := openNode(t, srv.NewDatabase(t), "a").Store().AgentTokens
	ctx := ctxT(t)
	srv.Stop(t)
	_, verr := tokens.Verify(ctx, "alice", "t")
	_, rerr := tokens.Revoke(ctx, "alice")
	_, lerr := tokens.List(ctx)
	for what, err := range map[string]error{"issue": tokens.Issue(ctx, "alice", "t"), "verify": verr, "revoke": rerr, "list": lerr} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database down: %v", what, err)
		}
	}
}

// postures is the agents' posture policy over db's store, as a daemon
// opens it, closed when the test ends.
func openPostures(t *testing.T, db *DB) *agents.Postures {
	t.Helper()
	ps, err := agents.NewPostures(ctxT(t), db.Store().Postures, func(err error) { t.Logf("posture reload: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close)
	return ps
}

// A posture set on a is in force on b (notified); writers on both keep
// each other's changes; an agent loosening its own posture is refused.
func TestPosturesAcrossDaemons(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openPostures(t, openNode(t, url, "a")), openPostures(t, openNode(t, url, "b"))
	ctx := ctxT(t)
	if m, _ := b.Resolve("alice", policy.FullAccess); m != agents.RequireApproval {
		t.Fatalf("the default before any write: %s", m)
	}
	full := policy.FullAccess
	if _, err := a.Set(ctx, "alice", agents.Deny, &full, false); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, eventualLimit, "alice's posture set on a to be in force on b", func() bool {
		m, override := b.Resolve("alice", policy.FullAccess)
		return m == agents.Deny && override
	})
	if _, err := b.Set(ctx, "alice", agents.AlwaysAllow, &full, true); !errors.Is(err, agents.ErrLoosen) {
		t.Fatalf("alice loosening her own posture on b: %v", err)
	}
	if _, err := b.SetDefault(ctx, "cautious", nil, ""); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, eventualLimit, "the default set on b to be in force on a", func() bool {
		m, _ := a.Resolve("bob", policy.FullAccess)
		return m == agents.Deny
	})

	const each = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for w, ps := range []*agents.Postures{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := ps.Set(ctx, fmt.Sprintf("w%d-%d", w, i), agents.Deny, nil, false)
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, eventualLimit, "both daemons to hold every writer's override", func() bool {
		return len(a.Get().Agents) == 2*each+1 && len(b.Get().Agents) == 2*each+1
	})
	pol, err := a.Reset(ctx, "alice")
	if err != nil || len(pol.Agents) != 2*each || pol.Default != agents.Presets["cautious"] {
		t.Fatalf("reset on a: %d overrides, default %+v, %v", len(pol.Agents), pol.Default, err)
	}
}

// A change whose notification is lost is caught by the re-check.
func TestAPostureChangeWithoutNotificationIsReadBack(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	b := openPostures(t, openNode(t, url, "b"))
	ctx := ctxT(t)
	if _, err := sqlConn(t, url).Exec(ctx, `INSERT INTO car_agent_postures (id, policy, version, updated_at)
		VALUES (true, '{"default":{"read_only":"deny"},"agents":{}}', 41, now())`); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, eventualLimit, "the change made behind the store's back to be read", func() bool {
		m, _ := b.Resolve("alice", policy.ReadOnly)
		return m == agents.Deny
	})
}

func TestPosturesUnavailable(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	d := openNode(t, srv.NewDatabase(t), "a")
	ps := openPostures(t, d)
	ctx := ctxT(t)
	srv.Stop(t)
	if _, err := ps.Set(ctx, "alice", agents.Deny, nil, false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("set with the database down: %v", err)
	}
	if m, _ := ps.Resolve("alice", policy.ReadOnly); m != agents.AlwaysAllow {
		t.Fatalf("a refused set changed the posture in force: %s", m)
	}
	if _, _, err := d.Store().Postures.Read(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("read with the database down: %v", err)
	}
}

// An agent whose id NOTIFY cannot carry (8000 bytes or more) still has its
// re-issue and its revoke announced: with an empty payload, which Watch
// hands on as "" (every agent), so its live connection is asked about
// again, never left bound.
func TestAnAgentWhoseIDNotifyCannotCarryIsAnnouncedToEveryone(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a").Store().AgentTokens, openNode(t, url, "b")
	ctx := ctxT(t)
	type heard struct {
		topic   string
		payload []byte
	}
	got := make(chan heard, 16)
	for _, topic := range []string{agentIssuedTopic, store.TopicAgentRevoked} {
		listening := make(chan struct{})
		var once sync.Once
		stop := b.bus.Subscribe(topic, func(p []byte) {
			if p == nil {
				once.Do(func() { close(listening) }) // from now on, announcements reach b
				return
			}
			got <- heard{topic, p}
		})
		defer stop()
		select {
		case <-listening:
		case <-ctx.Done():
			t.Fatalf("b never listened on %s", topic)
		}
	}
	long := strings.Repeat("a", 8000)
	if err := a.Issue(ctx, long, "t1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Revoke(ctx, long); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	// Each topic's handler runs on its own, so the two may be heard in
	// either order.
	want := map[string]bool{agentIssuedTopic: true, store.TopicAgentRevoked: true}
	for len(want) > 0 {
		select {
		case h := <-got:
			if !want[h.topic] || len(h.payload) != 0 {
				t.Fatalf("heard %q on %s, want an empty payload once on each of %v", h.payload, h.topic, want)
			}
			delete(want, h.topic)
		case <-ctx.Done():
			t.Fatalf("%v of an agent with an 8000-byte id were not announced", want)
		}
	}
}
