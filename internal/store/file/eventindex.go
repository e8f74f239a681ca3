package file

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/auditlog"
)

// markEvery is how many events lie between two marks of a segment's index:
// a read by seq or time starts at most this many events before its first.
const markEvery = 64

// segIndex is what the event log knows of one segment without reading it:
// its events' range of seq and time, a mark every markEvery events, and
// where each proposal's events are. A sealed segment's index is kept in a
// file beside it (.idx), written when it is sealed; the active segment's
// is in memory only and rebuilt at start.
type segIndex struct {
	Name      string              `json:"name"`
	Size      int64               `json:"size"` // bytes indexed: the file's size when sealed
	Count     int                 `json:"count"`
	FirstSeq  uint64              `json:"first_seq"`
	LastSeq   uint64              `json:"last_seq"`
	FirstPrev string              `json:"first_prev"`
	LastHash  string              `json:"last_hash"`
	FirstAt   time.Time           `json:"first_at"`
	LastAt    time.Time           `json:"last_at"`
	Marks     []segMark           `json:"marks"`
	Proposals map[string][]uint32 `json:"proposals"` // offsets of each proposal's events (a segment stays below 4 GiB)
}

// segMark is where one event starts: every markEvery-th event of a segment.
type segMark struct {
	Seq uint64    `json:"s"`
	At  time.Time `json:"t"`
	Off int64     `json:"o"`
}

// add indexes the event line l at off.
func (x *segIndex) add(off int64, seq uint64, at time.Time, proposalID, hash, prev string) {
	if x.Count == 0 {
		x.FirstSeq, x.FirstAt, x.FirstPrev = seq, at, prev
	}
	if x.Count%markEvery == 0 {
		x.Marks = append(x.Marks, segMark{Seq: seq, At: at, Off: off})
	}
	x.Count++
	x.LastSeq, x.LastAt, x.LastHash = seq, at, hash
	if proposalID != "" {
		if x.Proposals == nil {
			x.Proposals = map[string][]uint32{}
		}
		x.Proposals[proposalID] = append(x.Proposals[proposalID], uint32(off))
	}
}

// from is the offset to start reading at for the events after seq.
func (x *segIndex) from(seq uint64) int64 {
	var off int64
	for _, m := range x.Marks {
		if m.Seq > seq+1 {
			break
		}
		off = m.Off
	}
	return off
}

// indexPath is the index file of the segment at path.
func indexPath(segPath string) string {
	return strings.TrimSuffix(segPath, auditlog.SegmentExt) + ".idx"
}

// writeIndex keeps x beside its segment.
func writeIndex(dir string, x *segIndex) error {
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return atomicfile.Write(indexPath(filepath.Join(dir, x.Name)), b)
}

// readIndex reads the index of the segment name, and says whether it still
// describes the file (its size unchanged).
func readIndex(dir, name string) (*segIndex, bool) {
	path := filepath.Join(dir, name)
	b, err := atomicfile.ReadFile(indexPath(path))
	if err != nil {
		return nil, false
	}
	var x segIndex
	if json.Unmarshal(b, &x) != nil || x.Name != name {
		return nil, false
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != x.Size {
		return nil, false
	}
	return &x, true
}

// scanIndex builds the index of the segment name by reading it. It returns
// the index of every line that parses, the seq and hash of its newest head
// line, and an error naming the first line that does not parse (the
// segment is corrupt) or ErrTorn for a torn last line.
func scanIndex(dir, name string) (*segIndex, error) {
	x := &segIndex{Name: name}
	var bad error
	err := auditlog.ScanSegment(filepath.Join(dir, name), 0, func(off int64, n int, b []byte) bool {
		x.Size = off + int64(len(b)) + 1
		l, err := auditlog.ParseLine(b)
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("segment %s line %d: %w", name, n, err)
			}
			return true
		}
		if l.Op == auditlog.OpEvent {
			x.add(off, l.Seq, l.At, l.ProposalID, l.Hash, l.PrevHash)
		}
		return true
	})
	if bad != nil {
		return x, bad
	}
	return x, err
}
