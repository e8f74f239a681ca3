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
// invalidates a proposal's results with tombstones. Its claims are local,
// so two identical calls in flight at once both dispatch (the cache does
// not merge in-flight duplicates).
type Idempotency struct {
	j *journal.Journal
}

var _ store.Idempotency = (*Idempotency)(nil)

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
	line, ok := c.j.Get(key)
	if !ok {
		return nil, false
	}
	var r idempotencyLine
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, false
	}
	out, err := protocol.DecodeValue(r.Output)
	if err != nil {
		return nil, false
	}
	return out, true
}

// Begin looks key up: a stored result is a hit; otherwise the caller gets a
// local claim whose Commit is Record. It never fails.
func (c *Idempotency) Begin(_ context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
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

func (cl *localClaim) Commit(_ context.Context, output any) error {
	return cl.c.Record(cl.key, cl.tool, cl.proposalID, output)
}

func (*localClaim) Release() {}

// Record stores a result durably; it returns after the record is fsynced.
func (c *Idempotency) Record(key, tool, proposalID string, output any) error {
	out, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode result of tool '%s': %w", tool, err)
	}
	line, err := json.Marshal(idempotencyLine{Op: "put", Key: key, Tool: tool, Output: out, ProposalID: proposalID, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	return c.j.Append(line)
}

// Invalidate tombstones keys (a proposal that recorded them rolled back).
// The tombstones are appended concurrently and share fsyncs.
func (c *Idempotency) Invalidate(_ context.Context, keys []string, proposalID string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, _ := json.Marshal(idempotencyLine{Op: journal.OpTombstone, Key: k, ProposalID: proposalID, At: time.Now().UTC()})
			errs[i] = c.j.Append(line)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Len is the number of live results.
func (c *Idempotency) Len() int {
	_, live := c.j.Stats()
	return live
}

// Close closes the journal.
func (c *Idempotency) Close() error { return c.j.Close() }
