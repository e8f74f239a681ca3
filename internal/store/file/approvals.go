package file

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// approvalLine is a decision as a journal line.
type approvalLine struct {
	Op  string `json:"op"`
	Key string `json:"key"`
	approvals.Record
}

// Approvals is the approval ledger of a single daemon, over its journal.
// A decision recorded through any door (permission.approve,
// host.resolve_approval, the CLI) wakes whoever watches its fingerprint:
// the ledger record is what releases a parked action.
type Approvals struct {
	j  *journal.Journal
	mu sync.Mutex // orders Record and Use, so a use is counted once
	store.ApprovalWatchers
}

var _ store.Approvals = (*Approvals)(nil)

// OpenApprovals replays the ledger at path.
func OpenApprovals(path string, opts ...journal.Option) (*Approvals, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Approvals{j: j}, rep, nil
}

// Record stores a decision durably and returns it.
func (l *Approvals) Record(r approvals.Record) (approvals.Record, error) {
	if err := approvals.CheckDecision(r.Decision); err != nil {
		return r, err
	}
	r.RecordedAt = time.Now().UTC()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.write(r)
}

// write appends r as fingerprint's current decision and wakes its watchers.
func (l *Approvals) write(r approvals.Record) (approvals.Record, error) {
	b, err := json.Marshal(approvalLine{Op: "decision", Key: r.Fingerprint, Record: r})
	if err != nil {
		return r, err
	}
	if err := l.j.Append(b); err != nil {
		return r, err
	}
	l.Wake(r)
	return r, nil
}

// Decision returns the last decision for a fingerprint.
func (l *Approvals) Decision(fingerprint string) (approvals.Record, bool) {
	b, ok := l.j.Get(fingerprint)
	if !ok {
		return approvals.Record{}, false
	}
	var ln approvalLine
	if err := json.Unmarshal(b, &ln); err != nil {
		return approvals.Record{}, false
	}
	return ln.Record, true
}

// Use takes one use of fingerprint's approval (store.Approvals).
func (l *Approvals) Use(_ context.Context, fingerprint string, now time.Time) (approvals.Record, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.Decision(fingerprint)
	if !ok || r.Decision != approvals.Approved || !approvals.Live(r, now) {
		return r, false, nil
	}
	if r.Uses == 0 {
		return r, true, nil
	}
	r.Used++
	if _, err := l.write(r); err != nil {
		return r, false, err
	}
	return r, true, nil
}

// Refresh has nothing to re-read: the journal is the ledger, and no other
// daemon writes it.
func (l *Approvals) Refresh(context.Context, ...string) error { return nil }

// List returns the current decision of every fingerprint, newest first.
func (l *Approvals) List() []approvals.Record {
	var out []approvals.Record
	l.j.Each(func(_ string, b []byte) {
		var ln approvalLine
		if json.Unmarshal(b, &ln) == nil {
			out = append(out, ln.Record)
		}
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].RecordedAt.After(out[j].RecordedAt) })
	return out
}

// Close closes the journal.
func (l *Approvals) Close() error { return l.j.Close() }
