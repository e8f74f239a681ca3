package agents

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/store"
)

// tokenFile is the agent token file: per agent, the SHA-256 of its token.
// The tokens are 256-bit random values, so a fast hash is enough.
type tokenFile struct {
	Agents map[string]tokenEntry `json:"agents"`
}

type tokenEntry struct {
	SHA256   string    `json:"sha256"`
	IssuedAt time.Time `json:"issued_at"`
}

// IssuedAgent is an agent with a token, as agents list shows it.
type IssuedAgent = store.IssuedAgent

// tokenFileStore is TokenFile.
type tokenFileStore struct{ path string }

// TokenFile is the store.AgentTokens of a single daemon: the token file at
// path (0600, hashes only), re-read on every Verify, changed under
// path + ".lock".
func TokenFile(path string) store.AgentTokens { return tokenFileStore{path: path} }

func (f tokenFileStore) Issue(ctx context.Context, agentID, token string) error {
	return Issue(ctx, f.path, agentID, token)
}

func (f tokenFileStore) Revoke(ctx context.Context, agentID string) (bool, error) {
	return Revoke(ctx, f.path, agentID)
}

func (f tokenFileStore) List(context.Context) ([]IssuedAgent, error) { return List(f.path) }

func (f tokenFileStore) Verify(_ context.Context, agentID, token string) (bool, error) {
	return Verify(f.path, agentID, token)
}

// VerifyHash reports whether token hashes to hash, in constant time.
func VerifyHash(hash, token string) bool {
	return subtle.ConstantTimeCompare([]byte(hash), []byte(HashToken(token))) == 1
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

// HashToken is what is kept of a token: its SHA-256, in hex.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Issue stores token as agentID's token, replacing any earlier one. The
// read-modify-write holds the file's lock, so concurrent issuers (and
// revokes) each keep the others' agents.
func Issue(ctx context.Context, path, agentID, token string) error {
	unlock, err := lockFile(ctx, path)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := readTokens(path)
	if err != nil {
		return err
	}
	f.Agents[agentID] = tokenEntry{SHA256: HashToken(token), IssuedAt: time.Now().UTC()}
	return writeTokens(path, f)
}

// Revoke removes agentID's token, under the file's lock; it reports
// whether there was one.
func Revoke(ctx context.Context, path, agentID string) (bool, error) {
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

// List names the agents with a token, never the tokens.
func List(path string) ([]IssuedAgent, error) {
	f, err := readTokens(path)
	if err != nil {
		return nil, err
	}
	out := make([]IssuedAgent, 0, len(f.Agents))
	for id, e := range f.Agents {
		out = append(out, IssuedAgent{AgentID: id, IssuedAt: e.IssuedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

// Verify reports whether token is agentID's current token. It reads the
// file each time, so an issue or a revoke is in force at once.
func Verify(path, agentID, token string) (bool, error) {
	f, err := readTokens(path)
	if err != nil {
		return false, err
	}
	e, ok := f.Agents[agentID]
	match := VerifyHash(e.SHA256, token) // hashed whether or not the agent has a token
	return ok && match, nil
}
