// Package idempotency is the durable idempotency cache: the result of every
// successful idempotent tool call, keyed by what was called, journaled before
// the proposal's result is returned, so a re-submission after a crash gets
// the stored result instead of running the tool again.
//
// Keys hash the tenant, the tool and either the canonical JSON of the
// resolved parameters or an explicit key the caller chose
// (metadata.idempotency_key). Rollback invalidates a proposal's results with
// tombstones.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// record is one journal line.
type record struct {
	Op         string          `json:"op"` // "put" or "tombstone"
	Key        string          `json:"key"`
	Tool       string          `json:"tool,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ProposalID string          `json:"proposal_id,omitempty"`
	At         time.Time       `json:"at"`
}

// Cache is the idempotency cache over its journal. It is the file store's
// store.Idempotency: its claims are local, so two identical calls in flight
// at once both dispatch (the cache does not merge in-flight duplicates).
type Cache struct {
	j *journal.Journal
}

var _ store.Idempotency = (*Cache)(nil)

// Open replays the journal at path. The report says how many results are
// live and whether a torn last line was cut off.
func Open(path string, opts ...journal.Option) (*Cache, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Cache{j: j}, rep, nil
}

// Key is the cache key of a call: tenant, tool, and the explicit key when
// given, else the canonical JSON of the parameters.
func Key(tenant, tool string, params any, explicit string) string {
	h := sha256.New()
	if explicit != "" {
		fmt.Fprintf(h, "explicit\x00%s\x00%s\x00%s", tenant, tool, explicit)
	} else {
		fmt.Fprintf(h, "params\x00%s\x00%s\x00", tenant, tool)
		h.Write(jsonvalue.Canonical(params))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Lookup returns the stored output of key.
func (c *Cache) Lookup(key string) (any, bool) {
	line, ok := c.j.Get(key)
	if !ok {
		return nil, false
	}
	var r record
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
func (c *Cache) Begin(_ context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
	if out, ok := c.Lookup(key); ok {
		return out, true, nil, nil
	}
	return nil, false, &claim{c: c, key: key, tool: tool, proposalID: proposalID}, nil
}

// claim is a local claim: nothing is held, so Release has nothing to give up.
type claim struct {
	c                     *Cache
	key, tool, proposalID string
}

func (cl *claim) Commit(_ context.Context, output any) error {
	return cl.c.Record(cl.key, cl.tool, cl.proposalID, output)
}

func (*claim) Release() {}

// Record stores a result durably; it returns after the record is fsynced.
func (c *Cache) Record(key, tool, proposalID string, output any) error {
	out, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode result of tool '%s': %w", tool, err)
	}
	line, err := json.Marshal(record{Op: "put", Key: key, Tool: tool, Output: out, ProposalID: proposalID, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	return c.j.Append(line)
}

// Invalidate tombstones keys (a proposal that recorded them rolled back).
// The tombstones are appended concurrently and share fsyncs.
func (c *Cache) Invalidate(_ context.Context, keys []string, proposalID string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, _ := json.Marshal(record{Op: journal.OpTombstone, Key: k, ProposalID: proposalID, At: time.Now().UTC()})
			errs[i] = c.j.Append(line)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Len is the number of live results.
func (c *Cache) Len() int {
	_, live := c.j.Stats()
	return live
}

// Close closes the journal.
func (c *Cache) Close() error { return c.j.Close() }
