package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// idempotencyLine is one journal line of the idempotency cache.
type idempotencyLine struct {
	Op         string          `json:"op"` // "put" or "tombstone"
	Key        string          `json:"key"`
	Tool       string          `json:"tool,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ProposalID string          `json:"proposal_id,omitempty"`
	At         time.Time       `json:"at"`
}

// Idempotency is the idempotency cache of a single daemon, over its
// journal: the result of every successful idempotent tool call, journaled
// before the proposal's result is returned, so a re-submission after a
// crash gets the stored result instead of running the tool again; rollback
// invalidates a proposal's results with tombstones, each only while the key
// still holds that proposal's result. Its claims are local,
// so two identical calls in flight at once both dispatch (the cache does
// not merge in-flight duplicates).
type Idempotency struct {
	j    *journal.Journal
	gate keyGate // a result and a tombstone of one key are never written at once
	// perProposal: a result is written at Commit and flushed at Flush,
	// which the engine calls before the proposal's reply (journal_sync =
	// proposal); otherwise Commit returns after the flush (full).
	perProposal bool
}

var (
	_ store.Idempotency        = (*Idempotency)(nil)
	_ store.IdempotencyFlusher = (*Idempotency)(nil)
)

// Sync is the journal_sync setting: when an idempotent result is flushed
// to disk.
type Sync string

const (
	// SyncFull flushes every result before Commit returns: before the next
	// step can depend on it and before any reply. The default.
	SyncFull Sync = "full"
	// SyncProposal writes every result at Commit and flushes a proposal's
	// results once, before the proposal's reply: a process crash loses
	// nothing written, a power loss can lose the results of a proposal not
	// yet answered (their steps may then run again).
	SyncProposal Sync = "proposal"
)

// ParseSync reads a journal_sync value; "" is the default, full.
func ParseSync(s string) (Sync, error) {
	switch Sync(s) {
	case "", SyncFull:
		return SyncFull, nil
	case SyncProposal:
		return SyncProposal, nil
	}
	return "", fmt.Errorf("journal_sync %q is not a mode: use full (every idempotent result flushed before the next step and before any reply; the default) or proposal (a proposal's results flushed once, before its reply)", s)
}

// OpenIdempotency replays the journal at path. The report says how many results are
// live and whether a torn last line was cut off.
func OpenIdempotency(path string, opts ...journal.Option) (*Idempotency, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Idempotency{j: j}, rep, nil
}

// Lookup returns the stored output of key.
func (c *Idempotency) Lookup(key string) (any, bool) {
	r, ok := c.line(key)
	if !ok {
		return nil, false
	}
	out, err := protocol.DecodeValue(r.Output)
	if err != nil {
		return nil, false
	}
	return out, true
}

// line is the live record of key.
func (c *Idempotency) line(key string) (idempotencyLine, bool) {
	var r idempotencyLine
	b, ok := c.j.Get(key)
	if !ok || json.Unmarshal(b, &r) != nil {
		return r, false
	}
	return r, true
}

// Result returns the stored output of key, without a claim. It never fails.
func (c *Idempotency) Result(_ context.Context, key string) (any, bool, error) {
	out, ok := c.Lookup(key)
	return out, ok, nil
}

// Begin looks key up: a stored result is a hit; otherwise the caller gets a
// local claim whose Commit is Record. Under journal_sync = proposal it
// fails once the journal has failed a write or a flush (a result it holds
// may then never reach the disk); otherwise it never fails.
func (c *Idempotency) Begin(_ context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
	if c.perProposal {
		if err := c.j.Err(); err != nil {
			return nil, false, nil, err
		}
	}
	if out, ok := c.Lookup(key); ok {
		return out, true, nil, nil
	}
	return nil, false, &localClaim{c: c, key: key, tool: tool, proposalID: proposalID}, nil
}

// localClaim is a claim of the file store: nothing is held, so Release has nothing to give up.
type localClaim struct {
	c                     *Idempotency
	key, tool, proposalID string
}

func (cl *localClaim) Commit(ctx context.Context, output any) error {
	return cl.c.record(ctx, cl.key, cl.tool, cl.proposalID, output)
}

func (*localClaim) Release() {}

// Record stores a result; it returns after the record is fsynced, or under
// journal_sync = proposal once it is written (Flush flushes it).
func (c *Idempotency) Record(key, tool, proposalID string, output any) error {
	return c.record(context.Background(), key, tool, proposalID, output)
}

// record is Record, waiting for the key's turn until ctx ends.
func (c *Idempotency) record(ctx context.Context, key, tool, proposalID string, output any) error {
	out, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode result of tool '%s': %w", tool, err)
	}
	line, err := json.Marshal(idempotencyLine{Op: "put", Key: key, Tool: tool, Output: out, ProposalID: proposalID, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	leave, err := c.gate.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("store the result of tool '%s': %w", tool, err)
	}
	defer leave()
	if c.perProposal {
		return c.j.Write([][]byte{line})
	}
	return c.j.Append(line)
}

// Flush returns once every result written before it is on disk. Under
// journal_sync = full there is nothing to flush: every Commit flushed its
// own.
func (c *Idempotency) Flush(context.Context) error {
	if !c.perProposal {
		return nil
	}
	return c.j.Sync()
}

// Invalidate tombstones the keys whose result proposalID stored (the
// proposal rolled back); a key that holds another proposal's result, or
// none, is left alone. The tombstones are appended concurrently and share
// fsyncs.
func (c *Idempotency) Invalidate(ctx context.Context, keys []string, proposalID string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.tombstone(ctx, k, proposalID)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tombstone deletes key's result if proposalID stored it.
func (c *Idempotency) tombstone(ctx context.Context, key, proposalID string) error {
	leave, err := c.gate.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("invalidate a result of proposal %s: %w", proposalID, err)
	}
	defer leave()
	if r, ok := c.line(key); !ok || r.ProposalID != proposalID {
		return nil
	}
	line, _ := json.Marshal(idempotencyLine{Op: journal.OpTombstone, Key: key, ProposalID: proposalID, At: time.Now().UTC()})
	return c.j.Append(line)
}

// Len is the number of live results.
func (c *Idempotency) Len() int {
	_, live := c.j.Stats()
	return live
}

// Close closes the journal.
func (c *Idempotency) Close() error { return c.j.Close() }
