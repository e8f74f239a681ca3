package file

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/store"
)

// tokenFile is the agent token file: per agent, the SHA-256 of its token.
// The tokens are 256-bit random values, so a fast hash is enough.
type tokenFile struct {
	Agents map[string]tokenEntry `json:"agents"`
}

// tokenEntry is one agent's token. Tenants absent (a file written before
// tokens named tenants, or a token issued without one) is the default
// tenant alone.
type tokenEntry struct {
	SHA256   string    `json:"sha256"`
	IssuedAt time.Time `json:"issued_at"`
	Tenants  []string  `json:"tenants,omitempty"`
}

// tokenPoll is how often Watch looks at the token file: a revoke that
// edits the file without reaching the daemon closes the agent's connection
// within about this long.
const tokenPoll = 250 * time.Millisecond

// tokenFileStore is TokenFile.
type tokenFileStore struct{ path string }

// TokenFile is the store.AgentTokens of a single daemon: the token file at
// path (0600, hashes only), re-read on every Verify, changed under
// path + ".lock", and watched by polling its metadata.
func TokenFile(path string) store.AgentTokens { return tokenFileStore{path: path} }

func (f tokenFileStore) Issue(ctx context.Context, agentID, token string, tenants ...string) error {
	return IssueToken(ctx, f.path, agentID, token, tenants...)
}

func (f tokenFileStore) Revoke(ctx context.Context, agentID string) (bool, error) {
	return RevokeToken(ctx, f.path, agentID)
}

func (f tokenFileStore) List(context.Context) ([]agents.IssuedAgent, error) {
	return ListTokens(f.path)
}

func (f tokenFileStore) Verify(_ context.Context, agentID, token string) (bool, error) {
	return VerifyToken(f.path, agentID, token)
}

func (f tokenFileStore) Grant(_ context.Context, agentID, token string) ([]string, bool, error) {
	return GrantToken(f.path, agentID, token)
}

func (f tokenFileStore) Identify(_ context.Context, token string) (string, []string, bool, error) {
	return IdentifyToken(f.path, token)
}

// Watch calls fn("") whenever the token file's metadata changes (it is
// replaced, rewritten, created or removed), looking every tokenPoll: the
// file is changed by other processes (car-server agents, an editor), which
// tell the daemon nothing.
func (f tokenFileStore) Watch(fn func(agentID string)) (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := statTokens(f.path)
		tick := time.NewTicker(tokenPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if cur := statTokens(f.path); !sameFileState(last, cur) {
				last = cur
				fn("")
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			<-done
		})
	}
}

// statTokens is the token file's metadata, nil when it cannot be read.
func statTokens(path string) os.FileInfo {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return fi
}

// sameFileState reports whether a and b are the same file, unchanged: an
// atomic rewrite is another file, an edit in place another size or time.
func sameFileState(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

// readTokens reads the token file; a missing file holds no agents.
func readTokens(path string) (tokenFile, error) {
	f := tokenFile{Agents: map[string]tokenEntry{}}
	b, err := atomicfile.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("agent token file %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("agent token file %s is not valid JSON (%v); reissue the tokens with car-server agents issue-token", path, err)
	}
	if f.Agents == nil {
		f.Agents = map[string]tokenEntry{}
	}
	return f, nil
}

func writeTokens(path string, f tokenFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}

// IssueToken stores token as agentID's token, admitting tenants (none: the
// default tenant alone), replacing any earlier one. The read-modify-write
// holds the file's lock, so concurrent issuers (and revokes) each keep the
// others' agents.
func IssueToken(ctx context.Context, path, agentID, token string, tenants ...string) error {
	unlock, err := lockFile(ctx, path)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := readTokens(path)
	if err != nil {
		return err
	}
	e := tokenEntry{SHA256: store.HashToken(token), IssuedAt: time.Now().UTC()}
	if len(tenants) > 0 {
		e.Tenants = agents.Tenants(tenants)
	}
	f.Agents[agentID] = e
	return writeTokens(path, f)
}

// RevokeToken removes agentID's token, under the file's lock; it reports
// whether there was one.
func RevokeToken(ctx context.Context, path, agentID string) (bool, error) {
	unlock, err := lockFile(ctx, path)
	if err != nil {
		return false, err
	}
	defer unlock()
	f, err := readTokens(path)
	if err != nil {
		return false, err
	}
	if _, ok := f.Agents[agentID]; !ok {
		return false, nil
	}
	delete(f.Agents, agentID)
	return true, writeTokens(path, f)
}

// ListTokens names the agents with a token, never the tokens.
func ListTokens(path string) ([]agents.IssuedAgent, error) {
	f, err := readTokens(path)
	if err != nil {
		return nil, err
	}
	out := make([]agents.IssuedAgent, 0, len(f.Agents))
	for id, e := range f.Agents {
		out = append(out, agents.IssuedAgent{AgentID: id, IssuedAt: e.IssuedAt, Tenants: agents.Tenants(e.Tenants)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

// VerifyToken reports whether token is agentID's current token. It reads the
// file each time, so an issue or a revoke is in force at once.
func VerifyToken(path, agentID, token string) (bool, error) {
	_, ok, err := GrantToken(path, agentID, token)
	return ok, err
}

// GrantToken is VerifyToken that also returns the tenants the token admits
// (agents.Tenants), from the same read of the file.
func GrantToken(path, agentID, token string) ([]string, bool, error) {
	f, err := readTokens(path)
	if err != nil {
		return nil, false, err
	}
	e, ok := f.Agents[agentID]
	match := store.VerifyHash(e.SHA256, token) // hashed whether or not the agent has a token
	if !ok || !match {
		return nil, false, nil
	}
	return agents.Tenants(e.Tenants), true, nil
}

// IdentifyToken names the agent whose current token token is, with the
// tenants it admits, from one read of the file. Every entry is compared,
// in constant time each, so the time taken says nothing of which matched.
func IdentifyToken(path, token string) (string, []string, bool, error) {
	f, err := readTokens(path)
	if err != nil {
		return "", nil, false, err
	}
	hash := store.HashToken(token)
	var agent string
	var tenants []string
	found := false
	for id, e := range f.Agents {
		if subtle.ConstantTimeCompare([]byte(e.SHA256), []byte(hash)) == 1 && token != "" {
			agent, tenants, found = id, agents.Tenants(e.Tenants), true
		}
	}
	return agent, tenants, found, nil
}

// OpenPostures reads the policy file at path; a missing file is the
// balanced default with no overrides.
func OpenPostures(path string) (*agents.Postures, error) {
	return agents.NewPostures(context.Background(), PostureFile(path), nil)
}

// postureFile is the policy file, written atomically under its lock.
type postureFile struct{ path string }

// PostureFile is the store.Postures of a single daemon: the policy file at
// path (0600), rewritten atomically under path + ".lock".
func PostureFile(path string) store.Postures { return postureFile{path: path} }

// Read reads the file; a missing one holds no document.
func (f postureFile) Read(context.Context) (json.RawMessage, bool, error) {
	b, err := atomicfile.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("agent permissions %s: %w", f.path, err)
	}
	if _, err := agents.ParsePolicy(b); err != nil {
		return nil, false, fmt.Errorf("agent permissions %s is not valid JSON (%v); fix it or move it aside", f.path, err)
	}
	return b, true, nil
}

// Update holds the file's lock across the read, the change and the atomic
// write, so another writer's update is kept, not overwritten.
func (f postureFile) Update(ctx context.Context, change func(json.RawMessage, bool) (json.RawMessage, error)) error {
	unlock, err := lockFile(ctx, f.path)
	if err != nil {
		return err
	}
	defer unlock()
	cur, found, err := f.Read(ctx)
	if err != nil {
		return err
	}
	next, err := change(cur, found)
	if err != nil {
		return err
	}
	return atomicfile.Write(f.path, append(next, '\n'))
}

// Watch never calls fn: only this process writes the file it reads.
func (postureFile) Watch(func()) func() { return func() {} }
