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
// ("put"), a result a rollback took away ("invalidated"), a tombstone of an
// older daemon, or, under generationKey, the generation of the last start
// ("generation"). A result and an invalidation carry the key's epoch.
type idempotencyLine struct {
	Op         string          `json:"op"` // "put", "invalidated", "tombstone" or "generation"
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
	opInvalidated = "invalidated"
	opGeneration  = "generation"
)

// generationKey is the journal key of the start counter: no idempotency key
// (a hex digest) is ever spelt so.
const generationKey = "#generation"

// generationShift places a start's epochs: every epoch handed out by the
// store opened for generation G lies in [G<<generationShift + 1,
// (G+1)<<generationShift), so a start never hands out an epoch an earlier
// start did, with no write per claim.
const generationShift = 32

// Idempotency is the idempotency cache of a single daemon, over its
// journal: the result of every successful idempotent tool call, journaled
// before the proposal's result is returned, so a re-submission after a
// crash gets the stored result instead of running the tool again; rollback
// invalidates a proposal's results, each only while the key still holds
// that proposal's result. Its claims are local, so two identical calls in
// flight at once both dispatch (the cache does not merge in-flight
// duplicates); each claim takes the key's next epoch, and only the key's
// latest claim may commit: the older call's Commit is refused
// (store.ErrSuperseded).
//
// Epochs need no write per claim. Each open journals (and fsyncs) the next
// generation G before any claim, and this store's epochs all lie in G's
// range, above every epoch of an earlier start, whether or not that
// start's claims ever reached the journal. Within a start a key's epochs
// count up from the last one it saw: its stored result's, or its last
// claim's, kept in memory. A fresh journal's first start is generation 0,
// so its epochs read 1, 2, 3...
type Idempotency struct {
	j       *journal.Journal
	gate    keyGate      // a key's lines are read and written one writer at a time
	results atomic.Int64 // keys whose live line is a result
	gen     uint64       // this start's generation
	// perProposal: a result is written at Commit and flushed at Flush,
	// which the engine calls before the proposal's reply (journal_sync =
	// proposal); otherwise Commit returns after the flush (full).
	perProposal bool

	mu     sync.Mutex
	latest map[string]uint64 // key → its latest claim's epoch, while in flight or released
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

// OpenIdempotency replays the journal at path and journals the start's
// generation. The report says how many results are live and whether a torn
// last line was cut off.
func OpenIdempotency(path string, opts ...journal.Option) (*Idempotency, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	c := &Idempotency{j: j, latest: make(map[string]uint64)}
	var n int64
	j.Each(func(_ string, rec []byte) {
		var r idempotencyLine
		if json.Unmarshal(rec, &r) == nil && r.Op == opPut {
			n++
		}
	})
	c.results.Store(n)
	rep.Live = int(n)
	if r, ok := c.line(generationKey); ok && r.Op == opGeneration {
		c.gen = r.Epoch + 1
	}
	if c.gen >= 1<<(53-generationShift) {
		return nil, rep, errors.Join(fmt.Errorf("%s: %d starts used up the epochs a JSON number carries exactly; compact it after moving its results to a new journal", path, c.gen), j.Close())
	}
	line, _ := json.Marshal(idempotencyLine{Op: opGeneration, Key: generationKey, Epoch: c.gen, At: time.Now().UTC()})
	if err := j.Append(line); err != nil {
		return nil, rep, errors.Join(fmt.Errorf("%s: record this start's generation: %w", path, err), j.Close())
	}
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
// a local claim with the key's next epoch. A claim of the key still running
// is superseded by it. Under journal_sync = proposal it fails once the
// journal has failed a write or a flush (a result it holds may then never
// reach the disk).
func (c *Idempotency) Begin(ctx context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
	if c.perProposal {
		if err := c.j.Err(); err != nil {
			return nil, false, nil, err
		}
	}
	if out, ok := c.Lookup(key); ok {
		return out, true, nil, nil
	}
	leave, err := c.gate.enter(ctx, key)
	if err != nil {
		return nil, false, nil, fmt.Errorf("claim idempotency key %s for tool '%s': %w", key, tool, err)
	}
	defer leave()
	if out, ok := c.Lookup(key); ok { // committed since the first look
		return out, true, nil, nil
	}
	r, _ := c.line(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	epoch := max(r.Epoch, c.latest[key], c.gen<<generationShift) + 1
	if epoch >= (c.gen+1)<<generationShift {
		return nil, false, nil, fmt.Errorf("claim idempotency key %s for tool '%s': this start has handed out every epoch of its range for the key; restart the daemon", key, tool)
	}
	c.latest[key] = epoch
	return nil, false, &localClaim{c: c, key: key, tool: tool, proposalID: proposalID, epoch: epoch}, nil
}

// localClaim is a claim of the file store: nothing is held, so Release has
// nothing to give up (the store remembers the epoch taken).
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
// epoch; it returns after the record is fsynced, or under journal_sync =
// proposal once it is written (Flush flushes it).
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
	} else {
		c.mu.Lock()
		latest := c.latest[key]
		c.mu.Unlock()
		if latest != epoch {
			r.Epoch = max(r.Epoch, latest)
			return superseded(key, tool, epoch, r)
		}
	}
	line, err := json.Marshal(idempotencyLine{Op: opPut, Key: key, Tool: tool, Output: out, ProposalID: proposalID, Epoch: epoch, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	write := c.j.Append
	if c.perProposal {
		write = func(line []byte) error { return c.j.Write([][]byte{line}) }
	}
	if err := write(line); err != nil {
		return err
	}
	if r.Op != opPut {
		c.results.Add(1)
	}
	c.mu.Lock()
	if c.latest[key] == epoch {
		delete(c.latest, key) // the result's line keeps the epoch now
	}
	c.mu.Unlock()
	return nil
}

// Flush returns once every result written before it is on disk, the
// proposal's and every other's (every Commit wrote its result or failed,
// so none is the proposal's error). Under journal_sync = full there is
// nothing to flush: every Commit flushed its own.
func (c *Idempotency) Flush(context.Context, string) error {
	if !c.perProposal {
		return nil
	}
	return c.j.Sync()
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
