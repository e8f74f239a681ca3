package file

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/store"
)

// The reads of the durable event log. Each first waits until what was
// appended before it is on disk (Sync), so a read sees the writes before
// it; then it reads the segments through their indexes: a read by
// proposal reads that proposal's lines only, a read of the newest records
// reads the segments from their ends, a mark (markEvery events) at a time,
// and a read by seq or time starts at the mark before its first record.

// segView is what a read needs of one segment, copied under the lock: the
// writer goes on appending to the active segment meanwhile.
type segView struct {
	name            string
	size            int64
	count           int
	firstSeq        uint64
	lastSeq         uint64
	firstAt, lastAt time.Time
	marks           []segMark
	offs            []uint32 // the proposal's lines, when a proposal was asked for
}

// views copies the segments' indexes (and the offsets of proposalID's
// lines, when set), oldest first.
func (e *Events) views(proposalID string) []segView {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]segView, 0, len(e.segs))
	for _, x := range e.segs {
		v := segView{name: x.Name, size: x.Size, count: x.Count, firstSeq: x.FirstSeq, lastSeq: x.LastSeq,
			firstAt: x.FirstAt, lastAt: x.LastAt, marks: x.Marks[:len(x.Marks):len(x.Marks)]}
		if proposalID != "" {
			offs := x.Proposals[proposalID]
			v.offs = offs[:len(offs):len(offs)]
		}
		out = append(out, v)
	}
	return out
}

// settle waits for the appended records to reach the disk; a failed
// writer leaves what is on disk to read.
func (e *Events) settle(ctx context.Context) error {
	if err := e.Sync(ctx); err != nil && ctx.Err() != nil {
		return store.Wrap("read the event log", err)
	}
	return nil
}

// record is the store's form of an event line.
func record(l *auditlog.Line) store.EventRecord {
	return store.EventRecord{Pos: int64(l.Seq), Node: l.Node, Seq: l.Seq, At: l.At, Kind: l.Kind,
		ProposalID: l.ProposalID, Hash: l.Hash, PrevHash: l.PrevHash, Body: l.Body}
}

// matches says whether r passes every set field of f (but Limit).
func matches(f *store.EventFilter, r *store.EventRecord) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, r.Kind) {
		return false
	}
	if f.ProposalID != "" && f.ProposalID != r.ProposalID {
		return false
	}
	if f.Node != "" && f.Node != r.Node {
		return false
	}
	if !f.Since.IsZero() && r.At.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !r.At.Before(f.Until) {
		return false
	}
	return true
}

// readRange calls fn with the events of segment v between offsets from and
// to (to 0: its end).
func (e *Events) readRange(v *segView, from, to int64, fn func(r store.EventRecord) bool) {
	if to == 0 {
		to = v.size
	}
	_ = auditlog.ScanSegment(filepath.Join(e.cfg.Dir, v.name), from, func(off int64, _ int, b []byte) bool {
		if off >= to {
			return false
		}
		l, err := auditlog.ParseLine(b)
		if err != nil || l.Op != auditlog.OpEvent {
			return true // a corrupt line is skipped: audit verify reports it
		}
		return fn(record(&l))
	})
}

// Query returns the records matching f, oldest first; with a Limit, the
// newest Limit of them.
func (e *Events) Query(ctx context.Context, f store.EventFilter) ([]store.EventRecord, error) {
	if err := e.settle(ctx); err != nil {
		return nil, err
	}
	var chunks [][]store.EventRecord // newest first
	found := 0
	full := func() bool { return f.Limit > 0 && found >= f.Limit }
	views := e.views(f.ProposalID)
	for i := len(views) - 1; i >= 0 && !full(); i-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v := &views[i]
		if v.count == 0 || (!f.Until.IsZero() && !v.firstAt.Before(f.Until)) || (!f.Since.IsZero() && v.lastAt.Before(f.Since)) {
			continue
		}
		if f.ProposalID != "" {
			recs := e.readAt(v, f)
			if f.Limit > 0 && len(recs) > f.Limit-found {
				recs = recs[len(recs)-(f.Limit-found):]
			}
			found += len(recs)
			chunks = append(chunks, recs)
			continue
		}
		// From the newest mark back, a mark's events at a time.
		for k := len(v.marks) - 1; k >= 0 && !full(); k-- {
			to := int64(0)
			if k+1 < len(v.marks) {
				to = v.marks[k+1].Off
			}
			var recs []store.EventRecord
			e.readRange(v, v.marks[k].Off, to, func(r store.EventRecord) bool {
				if matches(&f, &r) {
					recs = append(recs, r)
				}
				return true
			})
			if f.Limit > 0 && len(recs) > f.Limit-found {
				recs = recs[len(recs)-(f.Limit-found):]
			}
			found += len(recs)
			if len(recs) > 0 {
				chunks = append(chunks, recs)
			}
			if !f.Since.IsZero() && v.marks[k].At.Before(f.Since) {
				break
			}
		}
	}
	out := make([]store.EventRecord, 0, found)
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	return out, nil
}

// readAt reads the lines of v at v.offs that match f.
func (e *Events) readAt(v *segView, f store.EventFilter) []store.EventRecord {
	if len(v.offs) == 0 {
		return nil
	}
	file, err := atomicfile.OpenFile(filepath.Join(e.cfg.Dir, v.name), os.O_RDONLY, 0)
	if err != nil {
		return nil // deleted by the retention meanwhile
	}
	defer file.Close()
	var out []store.EventRecord
	for _, off := range v.offs {
		b, err := auditlog.ReadLineAt(file, int64(off), v.size)
		if err != nil {
			continue
		}
		l, err := auditlog.ParseLine(b)
		if err != nil || l.Op != auditlog.OpEvent {
			continue
		}
		if r := record(&l); matches(&f, &r) {
			out = append(out, r)
		}
	}
	return out
}

// Since returns up to limit records after cursor (a seq), of every node but
// skip, and the cursor to read on from.
func (e *Events) Since(ctx context.Context, cursor int64, limit int, skip string) ([]store.EventRecord, int64, error) {
	if err := e.settle(ctx); err != nil {
		return nil, cursor, err
	}
	if limit <= 0 {
		limit = 1000
	}
	var out []store.EventRecord
	next := cursor
	after := uint64(max(cursor, 0))
	for _, v := range e.views("") {
		if v.count == 0 || v.lastSeq <= after {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, cursor, err
		}
		e.readRange(&v, segMarkFrom(v.marks, after), 0, func(r store.EventRecord) bool {
			if r.Seq <= after {
				return true
			}
			next = int64(r.Seq)
			if r.Node != skip || skip == "" {
				out = append(out, r)
			}
			return len(out) < limit
		})
		if len(out) >= limit {
			break
		}
	}
	return out, next, nil
}

// segMarkFrom is the offset of the mark at or before the event after seq.
func segMarkFrom(marks []segMark, seq uint64) int64 {
	x := segIndex{Marks: marks}
	return x.from(seq)
}

// Count is the number of events kept.
func (e *Events) Count(ctx context.Context) (int, error) {
	if err := e.settle(ctx); err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count, nil
}

// LastOf is the seq and hash of the newest record appended: a daemon alone
// has one chain, whatever node asks.
func (e *Events) LastOf(context.Context, string) (uint64, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.appended, e.lastHash, nil
}

// Head is the seq of the newest record on disk.
func (e *Events) Head(ctx context.Context) (int64, error) {
	if err := e.settle(ctx); err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return int64(e.durable), nil
}

// EventsStats is what server.status and the benchmarks read of the log.
type EventsStats struct {
	Segments int
	Events   int
	Bytes    int64
	Heads    int // signed heads written since start
	Durable  uint64
}

// Stats reports the log's size now.
func (e *Events) Stats() EventsStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EventsStats{Segments: len(e.segs), Events: e.count, Bytes: e.bytes, Heads: e.heads, Durable: e.durable}
}
