// Package approvals is the durable approval ledger: human decisions about
// operations, keyed by a fingerprint of the operation (action type, tool and
// canonical parameters). It is daemon-wide — a decision recorded on one
// connection is seen by every other — and survives restarts in a journal.
// The last decision for a fingerprint wins.
package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Decisions a record can carry.
const (
	Approved = "approved"
	Rejected = "rejected"
)

// Record is one decision, as stored and as returned by permission.approve.
type Record = protocol.ApprovalRecord

// line is a Record as a journal line.
type line struct {
	Op  string `json:"op"`
	Key string `json:"key"`
	Record
}

// Fingerprint identifies an operation: its type, tool and canonical
// parameters. The action's id is not part of it, so the same operation in
// a later proposal has the same fingerprint.
func Fingerprint(a *protocol.Action) string {
	bp := fingerprintBuffers.Get()
	defer fingerprintBuffers.Put(bp)
	b := append(*bp, a.Type...)
	b = append(b, 0)
	b = append(b, a.Tool...)
	b = append(b, 0)
	if params, err := jsonvalue.Append(b, a.Parameters); err == nil {
		b = params
	} else {
		b = append(b, jsonvalue.Canonical(a.Parameters)...)
	}
	*bp = b
	sum := sha256.Sum256(b)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return string(text[:32])
}

// fingerprintBuffers hold what Fingerprint hashes, reused.
var fingerprintBuffers = bufpool.New(512, 64<<10)

// Ledger is the approval ledger over its journal. A decision recorded
// through any door (permission.approve, host.resolve_approval, the CLI)
// wakes whoever watches its fingerprint: the ledger record is what releases
// a parked action.
type Ledger struct {
	j *journal.Journal
	Watchers
}

// Open replays the ledger at path.
func Open(path string, opts ...journal.Option) (*Ledger, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Ledger{j: j}, rep, nil
}

// Record stores a decision durably and returns it.
func (l *Ledger) Record(r Record) (Record, error) {
	if r.Decision != Approved && r.Decision != Rejected {
		return r, fmt.Errorf("decision must be %s or %s", Approved, Rejected)
	}
	r.RecordedAt = time.Now().UTC()
	b, err := json.Marshal(line{Op: "decision", Key: r.Fingerprint, Record: r})
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
func (l *Ledger) Decision(fingerprint string) (Record, bool) {
	b, ok := l.j.Get(fingerprint)
	if !ok {
		return Record{}, false
	}
	var ln line
	if err := json.Unmarshal(b, &ln); err != nil {
		return Record{}, false
	}
	return ln.Record, true
}

// Refresh has nothing to re-read: the journal is the ledger, and no other
// daemon writes it.
func (l *Ledger) Refresh(context.Context, ...string) error { return nil }

// List returns the current decision of every fingerprint, newest first.
func (l *Ledger) List() []Record {
	var out []Record
	l.j.Each(func(_ string, b []byte) {
		var ln line
		if json.Unmarshal(b, &ln) == nil {
			out = append(out, ln.Record)
		}
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].RecordedAt.After(out[j].RecordedAt) })
	return out
}

// Close closes the journal.
func (l *Ledger) Close() error { return l.j.Close() }
