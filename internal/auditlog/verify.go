package auditlog

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// VerifyOptions say what Verify checks.
type VerifyOptions struct {
	Dir    string            // the segments and the head file
	Public ed25519.PublicKey // the key every head and retention record must be signed with
	// CheckEvent recomputes an event's hash from its body and checks that
	// the line's columns agree with it; it returns why not.
	CheckEvent func(l *Line) error
	Witness    []Head // heads a witness kept (audit.head events)
}

// Report is what Verify checked.
type Report struct {
	Segments   int
	Events     int
	Heads      int // signed head lines
	Retentions int // signed retention records
	FirstSeq   uint64
	LastSeq    uint64
	HeadFile   *Head  // the newest signed head, as its file holds it
	Witnessed  int    // witness heads found in the log
	Retained   int    // witness heads older than the first event kept
	TornTail   string // the newest segment ends in a torn line (crash residue the daemon cuts at start)
}

// Failure is the first thing Verify found that does not hold: where, what,
// and what it means.
type Failure struct {
	Segment string
	Line    int
	What    string
	Means   string
}

func (f *Failure) Error() string {
	at := ""
	if f.Segment != "" {
		at = f.Segment
		if f.Line > 0 {
			at += fmt.Sprintf(" line %d", f.Line)
		}
		at += ": "
	}
	return at + f.What + " — " + f.Means
}

// Verify reads every segment of o.Dir in order and checks every event's
// hash (CheckEvent), every link, every signature, that each head names the
// event before it, that the first event kept is the one the newest
// retention record names (or the start of the chain), that the log still
// holds the event of the head file, and that it holds every witness head.
// It returns the first failure (a *Failure) or nil.
func Verify(o VerifyOptions) (Report, error) {
	var rep Report
	names, err := Segments(o.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("no event log in %s: a daemon with store file writes it there (is --home the daemon's state root?)", o.Dir)
	}
	if err != nil {
		return rep, fmt.Errorf("list the segments of %s: %w", o.Dir, err)
	}
	hf, haveHead, err := ReadHeadFile(filepath.Join(o.Dir, HeadFile))
	if err != nil {
		return rep, &Failure{Segment: HeadFile, What: err.Error(), Means: "the newest signed head cannot be read, so a truncation cannot be ruled out"}
	}
	want := map[uint64]string{} // seqs whose hash a head file or witness names -> the hash found
	if haveHead {
		rep.HeadFile = &hf
		if hl := hf.Line(); !VerifySignature(&hl, o.Public) {
			return rep, &Failure{Segment: HeadFile, What: fmt.Sprintf("the signature of the head at seq %d does not verify", hf.Seq), Means: "the head file was forged or edited, or it was signed with another key"}
		}
		want[hf.Seq] = ""
	}
	for i, w := range o.Witness {
		wl := w.Line()
		if !VerifySignature(&wl, o.Public) {
			return rep, &Failure{Segment: "witness", Line: i + 1, What: fmt.Sprintf("the witness head at seq %d is not signed by this key", w.Seq), Means: "the witness file is not of this daemon, or the key was replaced"}
		}
		want[w.Seq] = ""
	}
	var (
		lastSeq   uint64
		lastHash  string
		firstSeq  uint64
		firstPrev string
		haveEvent bool
		rets      []Line
	)
	for si, name := range names {
		path := filepath.Join(o.Dir, name)
		var fail *Failure
		err := ScanSegment(path, 0, func(_ int64, n int, b []byte) bool {
			at := func(what, means string) bool {
				fail = &Failure{Segment: name, Line: n, What: what, Means: means}
				return false
			}
			l, err := ParseLine(b)
			if err != nil {
				return at(err.Error(), "the segment was damaged or edited")
			}
			switch l.Op {
			case OpEvent:
				if o.CheckEvent != nil {
					if err := o.CheckEvent(&l); err != nil {
						return at(fmt.Sprintf("event %d: %v", l.Seq, err), "the event was edited after it was written")
					}
				}
				if haveEvent {
					switch {
					case l.Seq <= lastSeq:
						return at(fmt.Sprintf("event %d follows event %d", l.Seq, lastSeq), "events were reordered or duplicated")
					case l.Seq > lastSeq+1:
						return at(fmt.Sprintf("event %d follows event %d", l.Seq, lastSeq), fmt.Sprintf("events %d to %d are missing here: deleted, or moved elsewhere (reordered)", lastSeq+1, l.Seq-1))
					case l.PrevHash != lastHash:
						return at(fmt.Sprintf("event %d does not link to event %d", l.Seq, lastSeq), "the chain was broken: an event was edited or replaced")
					}
				} else {
					haveEvent, firstSeq, firstPrev = true, l.Seq, l.PrevHash
				}
				if _, ok := want[l.Seq]; ok {
					want[l.Seq] = l.Hash
				}
				lastSeq, lastHash = l.Seq, l.Hash
				rep.Events++
			case OpHead:
				if !VerifySignature(&l, o.Public) {
					return at(fmt.Sprintf("the signature of the head at seq %d does not verify", l.Seq), "the head was forged or edited")
				}
				if l.Seq != lastSeq || l.Hash != lastHash {
					return at(fmt.Sprintf("the head signs event %d with hash %.12s…, the log holds event %d with hash %.12s…", l.Seq, l.Hash, lastSeq, lastHash), "the events before this head were changed after it was signed")
				}
				rep.Heads++
			case OpRetention:
				if !VerifySignature(&l, o.Public) {
					return at(fmt.Sprintf("the signature of the retention record at seq %d does not verify", l.Seq), "the retention record was forged or edited")
				}
				rets = append(rets, l)
				rep.Retentions++
			}
			return true
		})
		if fail != nil {
			return rep, fail
		}
		if errors.Is(err, ErrTorn) && si == len(names)-1 {
			rep.TornTail = name
		} else if err != nil {
			return rep, &Failure{Segment: name, What: err.Error(), Means: "an older segment is damaged: it was cut or edited"}
		}
		rep.Segments++
	}
	rep.FirstSeq, rep.LastSeq = firstSeq, lastSeq
	if haveEvent {
		if err := checkStart(firstSeq, firstPrev, rets); err != nil {
			return rep, err
		}
	}
	if haveHead {
		if f := checkNamed(hf, HeadFile, lastSeq, firstSeq, haveEvent, want); f != nil {
			return rep, f
		}
	}
	for _, w := range o.Witness {
		if haveEvent && w.Seq < firstSeq {
			rep.Retained++
			continue
		}
		if f := checkNamed(w, "witness", lastSeq, firstSeq, haveEvent, want); f != nil {
			return rep, f
		}
		rep.Witnessed++
	}
	return rep, nil
}

// checkStart checks that the first event kept starts the chain or is the
// first event a signed retention record names.
func checkStart(firstSeq uint64, firstPrev string, rets []Line) error {
	if firstSeq == 1 && firstPrev == "" {
		return nil
	}
	for i := len(rets) - 1; i >= 0; i-- {
		if r := rets[i]; r.Seq == firstSeq {
			if r.PrevHash != firstPrev {
				return &Failure{What: fmt.Sprintf("the first event kept, %d, links to %.12s…, the retention record names %.12s…", firstSeq, firstPrev, r.PrevHash), Means: "the oldest events were replaced"}
			}
			return nil
		}
	}
	return &Failure{What: fmt.Sprintf("the log starts at event %d and no signed retention record names it", firstSeq), Means: "the oldest events were deleted by hand, not by retention"}
}

// checkNamed checks that the log holds the event h signs.
func checkNamed(h Head, where string, lastSeq, firstSeq uint64, haveEvent bool, found map[uint64]string) *Failure {
	if !haveEvent || h.Seq > lastSeq {
		return &Failure{Segment: where, What: fmt.Sprintf("the log ends at event %d, below the signed head at event %d", lastSeq, h.Seq), Means: "events were removed from the end of the log after they were signed (truncated), or the log was replaced by a shorter one"}
	}
	if h.Seq < firstSeq {
		return nil // retained away, as a signed retention record says
	}
	if found[h.Seq] != h.Hash {
		return &Failure{Segment: where, What: fmt.Sprintf("event %d has hash %.12s…, the signed head names %.12s…", h.Seq, found[h.Seq], h.Hash), Means: "the history was rewritten after the head was signed: the log was replaced by another chain"}
	}
	return nil
}

// ReadWitness reads a witness file: JSON lines, each a head ({seq, hash,
// time, node, signature}) or an audit.head event as events.subscribe
// delivers it (its "data" is the head, alone or inside "event").
func ReadWitness(path string) ([]Head, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the witness file: %w", err)
	}
	defer f.Close()
	var heads []Head
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var wrap struct {
			Event *struct {
				Data json.RawMessage `json:"data"`
			} `json:"event"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &wrap); err != nil {
			return nil, fmt.Errorf("witness file %s line %d: %w", path, n, err)
		}
		if wrap.Event != nil && len(wrap.Event.Data) > 0 {
			b = wrap.Event.Data
		} else if len(wrap.Data) > 0 {
			b = wrap.Data
		}
		var h Head
		if err := json.Unmarshal(b, &h); err != nil || h.Signature == "" {
			return nil, fmt.Errorf("witness file %s line %d: not a signed head (want {seq, hash, time, node, signature} or an audit.head event)", path, n)
		}
		heads = append(heads, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("witness file %s: %w", path, err)
	}
	return heads, nil
}
