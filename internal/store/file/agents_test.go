package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

func issue(t *testing.T, path, agent, token string) {
	t.Helper()
	if err := IssueToken(context.Background(), path, agent, token); err != nil {
		t.Fatalf("issue %s: %v", agent, err)
	}
}

// verifies reports whether token is agent's token, failing on a read error.
func verifies(t *testing.T, path, agent, token string) bool {
	t.Helper()
	ok, err := VerifyToken(path, agent, token)
	if err != nil {
		t.Fatalf("verify %s: %v", agent, err)
	}
	return ok
}

func TestATokenIsIssuedVerifiedReplacedAndRevoked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "agent-tokens.json")
	if verifies(t, path, "alice", "t1") {
		t.Fatal("a token verified before any was issued")
	}
	issue(t, path, "alice", "alice-first-token")
	issue(t, path, "bob", "bob-token")
	if !verifies(t, path, "alice", "alice-first-token") || !verifies(t, path, "bob", "bob-token") {
		t.Fatal("an issued token does not verify")
	}
	if verifies(t, path, "alice", "bob-token") || verifies(t, path, "alice", "") || verifies(t, path, "carol", "bob-token") {
		t.Fatal("a token verified for an agent it was not issued to")
	}
	issue(t, path, "alice", "alice-second-token")
	if verifies(t, path, "alice", "alice-first-token") || !verifies(t, path, "alice", "alice-second-token") {
		t.Fatal("issuing again did not replace the agent's token")
	}
	list, err := ListTokens(path)
	if err != nil || len(list) != 2 || list[0].AgentID != "alice" || list[1].AgentID != "bob" || list[0].IssuedAt.IsZero() {
		t.Fatalf("list: %+v, %v", list, err)
	}
	revoked, err := RevokeToken(context.Background(), path, "alice")
	if err != nil || !revoked {
		t.Fatalf("revoke: %v %v", revoked, err)
	}
	if verifies(t, path, "alice", "alice-second-token") || !verifies(t, path, "bob", "bob-token") {
		t.Fatal("revoking alice did not stop her token, or stopped bob's")
	}
	if revoked, err := RevokeToken(context.Background(), path, "alice"); err != nil || revoked {
		t.Fatalf("a second revoke: %v %v, want false", revoked, err)
	}
}

func TestTheTokenFileHoldsOnlyHashesAndIs0600(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-tokens.json")
	const token = "a-token-that-must-never-reach-the-disk"
	issue(t, path, "alice", token)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), token) || !strings.Contains(string(b), store.HashToken(token)) {
		t.Fatalf("the token file holds the token, or not its hash:\n%s", b)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("the token file is %v, want 0600", st.Mode().Perm())
	}
	assertOnlyFiles(t, dir, "agent-tokens.json", "agent-tokens.json.lock")
}

func TestAGarbledTokenFileIsAnErrorThatSaysWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyToken(path, "alice", "x"); err == nil || !strings.Contains(err.Error(), "reissue") {
		t.Fatalf("verify on a garbled file: %v", err)
	}
}

func TestConcurrentIssuersKeepEveryAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens.json")
	const issuers = 24
	var wg sync.WaitGroup
	errs := make(chan error, issuers)
	for i := 0; i < issuers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- IssueToken(context.Background(), path, fmt.Sprint("agent-", i), fmt.Sprint("token-", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	list, err := ListTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != issuers {
		t.Fatalf("%d concurrent issuers left %d agents in the file: an update was lost", issuers, len(list))
	}
	for i := 0; i < issuers; i++ {
		if !verifies(t, path, fmt.Sprint("agent-", i), fmt.Sprint("token-", i)) {
			t.Errorf("agent-%d's token does not verify", i)
		}
	}
}

func TestAHeldLockMakesAnIssuerWaitUntilItsContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens.json")
	unlock, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := IssueToken(ctx, path, "alice", "t"); err == nil || !strings.Contains(err.Error(), "another process holds") {
		t.Fatalf("issue under a held lock: %v", err)
	}
	unlock()
	issue(t, path, "alice", "t")
}

// assertOnlyFiles fails unless dir holds exactly names (no temp file left).
func assertOnlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want exactly %v", dir, got, names)
	}
}

// Watch calls fn when the token file changes, by whoever: an atomic
// rewrite, an edit in place, a removal.
func TestTokenFileWatchSeesEveryChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens.json")
	calls := make(chan string, 16)
	stop := TokenFile(path).Watch(func(agentID string) { calls <- agentID })
	defer stop()
	seen := func(what string) {
		t.Helper()
		select {
		case got := <-calls:
			if got != "" {
				t.Fatalf("the file store's watch named %q; it cannot know which agent changed", got)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the watch did not see %s", what)
		}
	}
	if err := IssueToken(context.Background(), path, "alice", "t"); err != nil {
		t.Fatal(err)
	}
	seen("the file created")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, ' '), 0o600); err != nil {
		t.Fatal(err)
	}
	seen("an edit in place")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	seen("the file removed")
	stop()
	stop() // a second cancel does nothing
}
