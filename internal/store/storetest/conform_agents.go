package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

func verify(t *testing.T, tokens store.AgentTokens, agentID, token string) bool {
	t.Helper()
	ok, err := tokens.Verify(ctx(t), agentID, token)
	if err != nil {
		t.Fatalf("Verify(%s): %v", agentID, err)
	}
	return ok
}

func issued(t *testing.T, tokens store.AgentTokens) []string {
	t.Helper()
	list, err := tokens.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, a := range list {
		if a.IssuedAt.IsZero() || time.Since(a.IssuedAt) < -time.Minute {
			t.Fatalf("agent %s's IssuedAt is %v", a.AgentID, a.IssuedAt)
		}
		ids = append(ids, a.AgentID)
	}
	return ids
}

func testAgentTokens(t *testing.T, open Open, opts Options) {
	if !has(opts, "AgentTokens") {
		return
	}
	t.Run("IssueVerifyRevokeRestart", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		tok := d.AgentTokens
		if verify(t, tok, "agent-b", "secret") {
			t.Fatal("an agent without a token verified")
		}
		if ids := issued(t, tok); len(ids) != 0 {
			t.Fatalf("an empty store lists %v", ids)
		}
		for _, id := range []string{"agent-b", "Agent-a", "agent-a"} {
			if err := tok.Issue(ctx(t), id, "secret of "+id); err != nil {
				t.Fatal(err)
			}
		}
		if !verify(t, tok, "agent-b", "secret of agent-b") {
			t.Fatal("the issued token did not verify")
		}
		if verify(t, tok, "agent-b", "secret of agent-a") || verify(t, tok, "agent-b", "") {
			t.Fatal("a wrong token verified")
		}
		if ids := issued(t, tok); !reflect.DeepEqual(ids, []string{"Agent-a", "agent-a", "agent-b"}) {
			t.Fatalf("List = %v, want the agents in byte order", ids)
		}
		// A new token replaces the old.
		if err := tok.Issue(ctx(t), "agent-b", "new secret"); err != nil {
			t.Fatal(err)
		}
		if verify(t, tok, "agent-b", "secret of agent-b") || !verify(t, tok, "agent-b", "new secret") {
			t.Fatal("after a reissue the old token verifies or the new one does not")
		}
		if ok, err := tok.Revoke(ctx(t), "agent-a"); err != nil || !ok {
			t.Fatalf("Revoke(agent-a) = %v %v", ok, err)
		}
		if ok, err := tok.Revoke(ctx(t), "agent-a"); err != nil || ok {
			t.Fatalf("a second Revoke(agent-a) = %v %v, want false", ok, err)
		}
		if verify(t, tok, "agent-a", "secret of agent-a") {
			t.Fatal("a revoked token verified")
		}
		d = b.restart(d)
		if !verify(t, d.AgentTokens, "agent-b", "new secret") || verify(t, d.AgentTokens, "agent-a", "secret of agent-a") {
			t.Fatal("after a restart the tokens are not as they were")
		}
		if ids := issued(t, d.AgentTokens); !reflect.DeepEqual(ids, []string{"Agent-a", "agent-b"}) {
			t.Fatalf("after a restart List = %v", ids)
		}
	})

	// Issues that race: of one agent, exactly one token is in force; of
	// different agents, every one is kept.
	t.Run("RacingIssues", func(t *testing.T) {
		tok := newBacking(t, open).open("node-a").AgentTokens
		errs := make([]error, 2*racers)
		race(2*racers, func(i int) {
			if i < racers {
				errs[i] = tok.Issue(ctx(t), "same", fmt.Sprintf("token %d", i))
			} else {
				errs[i] = tok.Issue(ctx(t), fmt.Sprintf("agent-%d", i), "t")
			}
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("issue %d: %v", i, err)
			}
		}
		n := 0
		for i := range racers {
			if verify(t, tok, "same", fmt.Sprintf("token %d", i)) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d of the racing tokens of one agent verify, want 1", n)
		}
		if ids := issued(t, tok); len(ids) != racers+1 {
			t.Fatalf("List after the race = %v, want %d agents", ids, racers+1)
		}
	})

	// A token keeps the tenants it was issued with; none is the default
	// tenant alone.
	t.Run("Tenants", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		tok := d.AgentTokens
		if err := tok.Issue(ctx(t), "scoped", "s", "b", "a", "b", ""); err != nil {
			t.Fatal(err)
		}
		if err := tok.Issue(ctx(t), "plain", "p"); err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"scoped": {"", "a", "b"}, "plain": {""}}
		for agent, token := range map[string]string{"scoped": "s", "plain": "p"} {
			tenants, ok, err := tok.Grant(ctx(t), agent, token)
			if err != nil || !ok || !reflect.DeepEqual(tenants, want[agent]) {
				t.Fatalf("Grant(%s) = %q %v %v, want %q", agent, tenants, ok, err, want[agent])
			}
		}
		if tenants, ok, err := tok.Grant(ctx(t), "scoped", "p"); ok || err != nil || tenants != nil {
			t.Fatalf("Grant with another agent's token = %q %v %v", tenants, ok, err)
		}
		// The token alone names its agent, with the same tenants.
		for agent, token := range map[string]string{"scoped": "s", "plain": "p"} {
			id, tenants, ok, err := tok.Identify(ctx(t), token)
			if err != nil || !ok || id != agent || !reflect.DeepEqual(tenants, want[agent]) {
				t.Fatalf("Identify(%s's token) = %q %q %v %v, want %q %q", agent, id, tenants, ok, err, agent, want[agent])
			}
		}
		for _, token := range []string{"nobody's", ""} {
			if id, tenants, ok, err := tok.Identify(ctx(t), token); ok || err != nil || id != "" || tenants != nil {
				t.Fatalf("Identify(%q) = %q %q %v %v, want nobody", token, id, tenants, ok, err)
			}
		}
		d = b.restart(d)
		list, err := d.AgentTokens.List(ctx(t))
		if err != nil || len(list) != 2 || !reflect.DeepEqual(list[0].Tenants, want["plain"]) || !reflect.DeepEqual(list[1].Tenants, want["scoped"]) {
			t.Fatalf("List after a restart = %+v %v", list, err)
		}
		// A re-issue replaces the tenants with the token.
		if err := d.AgentTokens.Issue(ctx(t), "scoped", "s2", "a"); err != nil {
			t.Fatal(err)
		}
		if tenants, ok, _ := d.AgentTokens.Grant(ctx(t), "scoped", "s2"); !ok || !reflect.DeepEqual(tenants, []string{"a"}) {
			t.Fatalf("Grant after a re-issue with fewer tenants = %q %v", tenants, ok)
		}
		if id, _, ok, _ := d.AgentTokens.Identify(ctx(t), "s"); ok {
			t.Fatalf("Identify(the replaced token) = %q, want nobody", id)
		}
	})

	if !opts.Shared {
		return
	}
	// A revoke and a re-issue on one daemon reach the other's Watch, named.
	t.Run("WatchAcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").AgentTokens, b.open("node-b").AgentTokens
		named := make(chan string, 16)
		listening := make(chan struct{})
		var once sync.Once
		stop := other.Watch(func(agentID string) {
			if agentID == "" {
				once.Do(func() { close(listening) }) // the shared store's watch starts with a look at everything
				return
			}
			named <- agentID
		})
		defer stop()
		wait := ctx(t)
		select {
		case <-listening:
		case <-wait.Done():
			t.Fatal("node-b's watch never started")
		}
		if err := a.Issue(ctx(t), "watched", "t"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Revoke(ctx(t), "watched"); err != nil {
			t.Fatal(err)
		}
		for seen := 0; seen < 2; {
			select {
			case got := <-named:
				if got != "watched" {
					t.Fatalf("the watch named %q", got)
				}
				seen++
			case <-wait.Done():
				t.Fatalf("node-b's watch heard %d of the issue and the revoke on node-a", seen)
			}
		}
	})

	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").AgentTokens, b.open("node-b").AgentTokens
		if err := a.Issue(ctx(t), "agent", "secret"); err != nil {
			t.Fatal(err)
		}
		if !verify(t, other, "agent", "secret") {
			t.Fatal("a token issued on node-a does not verify on node-b at once")
		}
		if ok, err := other.Revoke(ctx(t), "agent"); err != nil || !ok {
			t.Fatalf("node-b's Revoke = %v %v", ok, err)
		}
		if verify(t, a, "agent", "secret") {
			t.Fatal("a token revoked on node-b still verifies on node-a")
		}
	})
}

// policyDoc is a posture document holding n (the file store reads it as a
// policy, whose unknown fields it ignores).
func policyDoc(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"default":{},"agents":{},"n":%d}`, n))
}

// countOf reads n back from a policyDoc.
func countOf(t *testing.T, doc json.RawMessage) int {
	t.Helper()
	var d struct{ N int }
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatalf("the posture document %s: %v", doc, err)
	}
	return d.N
}

func readPostures(t *testing.T, p store.Postures) (json.RawMessage, bool) {
	t.Helper()
	doc, found, err := p.Read(ctx(t))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return doc, found
}

// increment is an Update that adds one to n; it may run on any goroutine.
func increment(t *testing.T, p store.Postures) error {
	return p.Update(ctx(t), func(cur json.RawMessage, found bool) (json.RawMessage, error) {
		var d struct{ N int }
		if found {
			if err := json.Unmarshal(cur, &d); err != nil {
				return nil, fmt.Errorf("the posture document %s: %w", cur, err)
			}
		}
		return policyDoc(d.N + 1), nil
	})
}

func testPostures(t *testing.T, open Open, opts Options) {
	if !has(opts, "Postures") {
		return
	}
	t.Run("ReadUpdateRestart", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		p := d.Postures
		if doc, found := readPostures(t, p); found || doc != nil {
			t.Fatalf("an empty store holds the document %s", doc)
		}
		sawFound := true
		if err := p.Update(ctx(t), func(cur json.RawMessage, found bool) (json.RawMessage, error) {
			sawFound = found
			return policyDoc(1), nil
		}); err != nil {
			t.Fatal(err)
		}
		if sawFound {
			t.Fatal("the first Update was handed a document")
		}
		if doc, found := readPostures(t, p); !found || !sameJSON(doc, policyDoc(1)) {
			t.Fatalf("Read = %s %v, want %s", doc, found, policyDoc(1))
		}
		refused := errors.New("refused by change")
		if err := p.Update(ctx(t), func(json.RawMessage, bool) (json.RawMessage, error) { return policyDoc(99), refused }); !errors.Is(err, refused) {
			t.Fatalf("the error of change came back as %v", err)
		}
		if doc, _ := readPostures(t, p); !sameJSON(doc, policyDoc(1)) {
			t.Fatalf("a refused change stored %s", doc)
		}
		d = b.restart(d)
		if doc, found := readPostures(t, d.Postures); !found || !sameJSON(doc, policyDoc(1)) {
			t.Fatalf("after a restart Read = %s %v", doc, found)
		}
		stop := d.Postures.Watch(func() {})
		stop()
		stop() // a second cancel does nothing
	})

	// Updates that race: each sees the one before it, so none is lost.
	t.Run("RacingUpdates", func(t *testing.T) {
		p := newBacking(t, open).open("node-a").Postures
		errs := make([]error, racers)
		race(racers, func(i int) { errs[i] = increment(t, p) })
		for i, err := range errs {
			if err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
		if doc, _ := readPostures(t, p); countOf(t, doc) != racers {
			t.Fatalf("after %d racing increments the document is %s", racers, doc)
		}
	})

	if !opts.Shared {
		return
	}
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").Postures, b.open("node-b").Postures
		changed := make(chan struct{}, 1)
		stop := other.Watch(func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
		defer stop()
		// A watch may be called once as it starts (it cannot know what it
		// missed); what counts is a call after the update, with the
		// document then readable.
		if err := increment(t, a); err != nil {
			t.Fatal(err)
		}
		wait := ctx(t)
		for {
			select {
			case <-changed:
			case <-wait.Done():
				t.Fatal("node-b's watch was not called after node-a's update")
			}
			if doc, found := readPostures(t, other); found && countOf(t, doc) == 1 {
				return
			}
		}
	})
}
