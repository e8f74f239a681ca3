package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// idempotencyLine is one journal line of the idempotency cache: a result
// ("put"), a claim taken before a dispatch ("claim"), a result a rollback
// took away ("invalidated"), or a tombstone of an older daemon. Every line
// but a tombstone carries the key's epoch, so the key's claims never reuse
// one, even after a release, a rollback, a compaction or a restart.
type idempotencyLine struct {
	Op         string          `json:"op"` // "put", "claim", "invalidated" or "tombstone"
	Key        string          `json:"key"`
	Tool       string          `json:"tool,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ProposalID string          `json:"proposal_id,omitempty"`
	Epoch      uint64          `json:"epoch,omitempty"`
	At         time.Time       `json:"at"`
}

// Ops of the idempotency journal besides journal.OpTombstone.
const (
	opPut         = "put"
	opClaim       = "claim"
	opInvalidated = "invalidated"
)

// Idempotency is the idempotency cache of a single daemon, over its
// journal: the result of every successful idempotent tool call, journaled
// before the proposal's result is returned, so a re-submission after a
// crash gets the stored result instead of running the tool again; rollback
// invalidates a proposal's results, each only while the key still holds
// that proposal's result. Its claims are local, so two identical calls in
// flight at once both dispatch (the cache does not merge in-flight
// duplicates); each claim is journaled with the key's next epoch before
// its dispatch, and only the key's latest claim may commit: the older
// call's Commit is refused (store.ErrSuperseded).
type Idempotency struct {
	j       *journal.Journal
	gate    keyGate      // a key's lines are read and written one writer at a time
	results atomic.Int64 // keys whose live line is a result
}

var _ store.Idempotency = (*Idempotency)(nil)

// OpenIdempotency replays the journal at path. The report says how many results are
// live and whether a torn last line was cut off.
func OpenIdempotency(path string, opts ...journal.Option) (*Idempotency, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	c := &Idempotency{j: j}
	var n int64
	j.Each(func(_ string, rec []byte) {
		var r idempotencyLine
		if json.Unmarshal(rec, &r) == nil && r.Op == opPut {
			n++
		}
	})
	c.results.Store(n)
	rep.Live = int(n)
	return c, rep, nil
}

// Lookup returns the stored output of key.
func (c *Idempotency) Lookup(key string) (any, bool) {
	r, ok := c.line(key)
	if !ok || r.Op != opPut {
		return nil, false
	}
	out, err := protocol.DecodeValue(r.Output)
	if err != nil {
		return nil, false
	}
	return out, true
}

// line is the live line of key.
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

// Begin looks key up: a stored result is a hit; otherwise the caller gets
// a local claim with the key's next epoch, journaled (and fsynced) before
// Begin returns. A claim of the key still running elsewhere is superseded
// by it.
func (c *Idempotency) Begin(ctx context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
	if out, ok := c.Lookup(key); ok {
		return out, true, nil, nil
	}
	leave, err := c.gate.enter(ctx, key)
	if err != nil {
		return nil, false, nil, fmt.Errorf("claim idempotency key %s for tool '%s': %w", key, tool, err)
	}
	defer leave()
	r, _ := c.line(key)
	if r.Op == opPut { // committed since the lookup
		if out, err := protocol.DecodeValue(r.Output); err == nil {
			return out, true, nil, nil
		}
	}
	epoch := r.Epoch + 1
	line, err := json.Marshal(idempotencyLine{Op: opClaim, Key: key, Tool: tool, ProposalID: proposalID, Epoch: epoch, At: time.Now().UTC()})
	if err == nil {
		err = c.j.Append(line)
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("claim idempotency key %s for tool '%s': %w", key, tool, err)
	}
	if r.Op == opPut {
		c.results.Add(-1) // an unreadable result is replaced by the claim
	}
	return nil, false, &localClaim{c: c, key: key, tool: tool, proposalID: proposalID, epoch: epoch}, nil
}

// localClaim is a claim of the file store: nothing is held, so Release has
// nothing to give up (the claim's line keeps the epoch taken).
type localClaim struct {
	c                     *Idempotency
	key, tool, proposalID string
	epoch                 uint64
}

func (cl *localClaim) Epoch() uint64 { return cl.epoch }

func (cl *localClaim) Commit(ctx context.Context, output any) error {
	return cl.c.record(ctx, cl.key, cl.tool, cl.proposalID, output, cl.epoch)
}

func (*localClaim) Release() {}

// Record stores a result durably, without a claim, at the key's current
// epoch; it returns after the record is fsynced.
func (c *Idempotency) Record(key, tool, proposalID string, output any) error {
	return c.record(context.Background(), key, tool, proposalID, output, 0)
}

// record is Record, waiting for the key's turn until ctx ends. An epoch
// other than 0 is a claim's: the result is stored only while the key's
// latest claim is that one.
func (c *Idempotency) record(ctx context.Context, key, tool, proposalID string, output any, epoch uint64) error {
	out, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode result of tool '%s': %w", tool, err)
	}
	leave, err := c.gate.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("store the result of tool '%s': %w", tool, err)
	}
	defer leave()
	r, _ := c.line(key)
	if epoch == 0 {
		epoch = r.Epoch
	} else if r.Op != opClaim || r.Epoch != epoch {
		return superseded(key, tool, epoch, r)
	}
	line, err := json.Marshal(idempotencyLine{Op: opPut, Key: key, Tool: tool, Output: out, ProposalID: proposalID, Epoch: epoch, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := c.j.Append(line); err != nil {
		return err
	}
	if r.Op != opPut {
		c.results.Add(1)
	}
	return nil
}

// superseded is the error of a Commit at epoch whose key's live line is r.
func superseded(key, tool string, epoch uint64, r idempotencyLine) error {
	if r.Epoch > epoch {
		what := "runs it now"
		if r.Op == opPut {
			what = "stored its result"
		}
		return fmt.Errorf("%w: tool '%s' (idempotency key %s) ran under epoch %d, but a newer call of it claimed the key at epoch %d and %s; this result was not stored, a resubmission gets the newer one",
			store.ErrSuperseded, tool, key, epoch, r.Epoch, what)
	}
	return fmt.Errorf("tool '%s' (idempotency key %s) ran under epoch %d, but its claim was invalidated while it ran (its proposal rolled back); its result was not stored",
		tool, key, epoch)
}

// Invalidate takes away the results of the keys whose result proposalID stored (the
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

// tombstone takes key's result away if proposalID stored it. The line
// that replaces it keeps the key's epoch.
func (c *Idempotency) tombstone(ctx context.Context, key, proposalID string) error {
	leave, err := c.gate.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("invalidate a result of proposal %s: %w", proposalID, err)
	}
	defer leave()
	r, ok := c.line(key)
	if !ok || r.Op != opPut || r.ProposalID != proposalID {
		return nil
	}
	line, _ := json.Marshal(idempotencyLine{Op: opInvalidated, Key: key, ProposalID: proposalID, Epoch: r.Epoch, At: time.Now().UTC()})
	if err := c.j.Append(line); err != nil {
		return err
	}
	c.results.Add(-1)
	return nil
}

// Len is the number of live results.
func (c *Idempotency) Len() int { return int(c.results.Load()) }

// Close closes the journal.
func (c *Idempotency) Close() error { return c.j.Close() }
