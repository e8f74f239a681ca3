package postgres

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/store"
)

// spool keeps the events the writer could not put in the database: JSON
// lines appended and fsynced one batch at a time, read back in order once
// the database answers again, and truncated when all of them are in. It is
// bounded: a batch that does not fit is cut where the bound falls, and the
// writer counts and logs what was cut. Only the writer's goroutine uses it
// once it is open.
//
// Without a path it lives in memory: nothing survives the process then, so
// the daemon always gives one ($CAR_HOME/events-spool.jsonl).
type spool struct {
	path string
	f    *os.File // nil: in memory
	mem  []byte
	size int64 // bytes held
	done int64 // bytes already in the database
	max  int64
}

// spoolLine is one spooled record. Body is the event's JSON text, kept as a
// string so it comes back byte for byte.
type spoolLine struct {
	Node       string    `json:"node"`
	Seq        uint64    `json:"seq"`
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	ProposalID string    `json:"proposal_id,omitempty"`
	Hash       string    `json:"hash,omitempty"`
	PrevHash   string    `json:"prev_hash,omitempty"`
	Body       string    `json:"body"`
}

func encodeSpoolLine(r *store.EventRecord) []byte {
	b, _ := json.Marshal(spoolLine{Node: r.Node, Seq: r.Seq, At: r.At, Kind: r.Kind, ProposalID: r.ProposalID,
		Hash: r.Hash, PrevHash: r.PrevHash, Body: string(r.Body)})
	return append(b, '\n')
}

func decodeSpoolLine(line []byte) (store.EventRecord, error) {
	var l spoolLine
	if err := json.Unmarshal(line, &l); err != nil {
		return store.EventRecord{}, err
	}
	if l.Node == "" || !json.Valid([]byte(l.Body)) {
		return store.EventRecord{}, errors.New("a spooled event without a node or a JSON body")
	}
	return store.EventRecord{Node: l.Node, Seq: l.Seq, At: l.At, Kind: l.Kind, ProposalID: l.ProposalID,
		Hash: l.Hash, PrevHash: l.PrevHash, Body: json.RawMessage(l.Body)}, nil
}

// spoolScan is what openSpool found in a spool left by an earlier run.
type spoolScan struct {
	records int
	bad     int                          // lines that do not decode (kept; skipped when drained)
	torn    int64                        // bytes of a torn last line, cut off
	last    map[string]store.EventRecord // each node's newest record
}

// openSpool opens (or creates) the spool at path and reads what an earlier
// run left in it. A last line cut short by a crash is cut off.
func openSpool(path string, maxBytes int64) (*spool, spoolScan, error) {
	s := &spool{path: path, max: maxBytes}
	scan := spoolScan{last: make(map[string]store.EventRecord)}
	if path == "" {
		return s, scan, nil
	}
	f, err := atomicfile.OpenDurable(path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, scan, fmt.Errorf("open the event spool: %w; check that its directory can be created and written", err)
	}
	s.f = f
	br := bufio.NewReaderSize(f, 64<<10)
	var good int64
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			good += int64(len(line))
			r, derr := decodeSpoolLine(line)
			if derr != nil {
				scan.bad++
			} else {
				scan.records++
				if r.Seq >= scan.last[r.Node].Seq {
					scan.last[r.Node] = r
				}
			}
			continue
		}
		if err == io.EOF {
			scan.torn = int64(len(line))
			break
		}
		if err != nil {
			f.Close()
			return nil, scan, fmt.Errorf("read the event spool %s: %w", path, err)
		}
	}
	if scan.torn > 0 {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, scan, fmt.Errorf("cut the torn last line of the event spool %s: %w", path, err)
		}
	}
	s.size = good
	return s, scan, nil
}

func (s *spool) pending() bool { return s.size > s.done }

// append writes the records that fit under the bound, in order, and fsyncs
// them; it returns how many it wrote. On an error none is kept.
func (s *spool) append(recs []store.EventRecord) (int, error) {
	var buf bytes.Buffer
	n := 0
	for i := range recs {
		line := encodeSpoolLine(&recs[i])
		if s.size+int64(buf.Len()+len(line)) > s.max {
			break
		}
		buf.Write(line)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if s.f == nil {
		s.mem = append(s.mem, buf.Bytes()...)
		s.size += int64(buf.Len())
		return n, nil
	}
	if _, err := s.f.Write(buf.Bytes()); err != nil {
		return 0, s.undo(fmt.Errorf("write the event spool %s: %w", s.path, err))
	}
	if err := s.f.Sync(); err != nil {
		return 0, s.undo(fmt.Errorf("fsync the event spool %s: %w", s.path, err))
	}
	s.size += int64(buf.Len())
	return n, nil
}

// undo cuts a failed write off, so the spool holds whole lines only.
func (s *spool) undo(err error) error {
	if terr := s.f.Truncate(s.size); terr != nil {
		return fmt.Errorf("%w; and cutting it back failed: %w", err, terr)
	}
	return err
}

// next reads up to n records from where the database's copy ends. end is
// the offset after them; bad counts lines that did not decode (skipped).
func (s *spool) next(n int) (recs []store.EventRecord, end int64, bad int, err error) {
	var src io.ReaderAt = bytes.NewReader(s.mem)
	if s.f != nil {
		src = s.f
	}
	br := bufio.NewReaderSize(io.NewSectionReader(src, s.done, s.size-s.done), 64<<10)
	end = s.done
	for len(recs) < n && end < s.size {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return recs, end, bad, fmt.Errorf("read the event spool %s: %w", s.path, err)
		}
		end += int64(len(line))
		r, derr := decodeSpoolLine(line)
		if derr != nil {
			bad++
			continue
		}
		recs = append(recs, r)
	}
	return recs, end, bad, nil
}

// advance records that everything before end is in the database; once all
// is, the spool is emptied.
func (s *spool) advance(end int64) error {
	s.done = end
	if s.done < s.size {
		return nil
	}
	if s.f == nil {
		s.mem = nil
		s.size, s.done = 0, 0
		return nil
	}
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("empty the drained event spool %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync the emptied event spool %s: %w", s.path, err)
	}
	s.size, s.done = 0, 0
	return nil
}

func (s *spool) close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}
