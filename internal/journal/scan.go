package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// header is the part of a record the journal reads.
type header struct {
	Key *string `json:"key"`
	Op  string  `json:"op"`
}

// chunkSize is the most a line reader reads at once (more only for a longer
// line).
const chunkSize = 4 << 20

// lineReader splits r into lines without a copy or an allocation per line.
// With keep, no byte it returned is ever overwritten (a full buffer is
// followed by a new one), so the lines stay valid for as long as they are
// referenced; otherwise one buffer is reused and a line is valid until the
// next read (beforeFill).
type lineReader struct {
	r        io.Reader
	keep     bool
	remain   int64 // bytes the reader is expected still to hold: a hint for buffer sizes
	buf      []byte
	pos, end int // unread bytes: buf[pos:end]
	scanned  int // buf[pos:scanned] has no newline
	eof      bool

	beforeFill func() // called before each read: the lines returned so far may be overwritten (without keep)
}

// newLineReader reads r, which is expected to hold size bytes (a hint).
func newLineReader(r io.Reader, size int64, keep bool) *lineReader {
	return &lineReader{r: r, keep: keep, remain: size}
}

// next returns the next line with its newline. At the end it returns what
// follows the last newline (a torn line, or nothing) and io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.scanned:lr.end], '\n'); i >= 0 {
			e := lr.scanned + i + 1
			line := lr.buf[lr.pos:e:e]
			lr.pos, lr.scanned = e, e
			return line, nil
		}
		lr.scanned = lr.end
		if lr.eof {
			tail := lr.buf[lr.pos:lr.end:lr.end]
			lr.pos = lr.end
			return tail, io.EOF
		}
		if err := lr.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more after the unread bytes. When the buffer is full, it
// moves the unread bytes to the front to make room or, when lines must stay
// valid or there is no room that way, to a new buffer.
func (lr *lineReader) fill() error {
	if lr.beforeFill != nil {
		lr.beforeFill()
	}
	if lr.end == len(lr.buf) {
		tail := lr.end - lr.pos
		if !lr.keep && tail < len(lr.buf) {
			copy(lr.buf, lr.buf[lr.pos:lr.end])
		} else {
			var room int64
			switch {
			case lr.remain > 0:
				room = lr.remain + 1 // +1: the end shows in the same read
			case lr.remain == 0:
				room = 1 // the end is expected here
			default:
				room = 2 * int64(len(lr.buf)) // more than expected: twice the last read
			}
			room = min(max(room, 4096), chunkSize)
			nb := make([]byte, int64(tail)+max(room, int64(tail))) // a long line: double
			copy(nb, lr.buf[lr.pos:lr.end])
			lr.buf = nb
		}
		lr.scanned -= lr.pos
		lr.pos, lr.end = 0, tail
	}
	n, err := lr.r.Read(lr.buf[lr.end:])
	lr.end += n
	lr.remain -= int64(n)
	if err == io.EOF {
		lr.eof = true
		return nil
	}
	return err
}

// record is one line of a journal as scan hands it over.
type record struct {
	key  string
	rec  []byte // without its newline
	tomb bool
}

// batchSize is the most records scan hands over at once.
const batchSize = 1024

// scan reads records from r (expected to hold size bytes) and hands them
// to apply in batches, in file order. apply must not keep the slice; it may
// keep a record's key, and with keep its rec too, which stays valid and
// unchanged (its capacity ends with it); without keep a rec is valid only
// during the call. A batch's keys share one string. scan returns the number
// of records, the offset after the last record it handed over, and the
// length of the torn tail after it (0 when there is none; see tornTail).
func scan(r io.Reader, size int64, keep bool, path string, apply func([]record)) (lines int, offset int64, torn int, err error) {
	var (
		batch []record
		keys  []byte // the batch's keys, one after another
		ends  []int  // where each record's key ends in keys
	)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		all, start := string(keys), 0
		for i, end := range ends {
			batch[i].key = all[start:end]
			start = end
		}
		apply(batch)
		batch, keys, ends = batch[:0], keys[:0], ends[:0]
	}
	lr := newLineReader(r, size, keep)
	lr.beforeFill = flush // without keep, a fill overwrites the lines read
	defer flush()         // the records before a bad line are applied too
	var tail tornTail
	for n := 1; ; n++ {
		line, rerr := lr.next()
		if rerr == io.EOF {
			if tail.first > 0 && !tail.zero && len(line) > 0 {
				return lines, offset, 0, tail.corrupt(path)
			}
			return lines, offset, tail.bytes + len(line), nil
		}
		if rerr != nil {
			return lines, offset, 0, fmt.Errorf("journal %s: %w", path, rerr)
		}
		body := line[: len(line)-1 : len(line)-1]
		key, tomb, perr := parse(body)
		if tail.first > 0 || perr != nil {
			if err := tail.add(n, body, perr); err != nil {
				return lines, offset, 0, tail.corrupt(path)
			}
			tail.bytes += len(line)
			continue
		}
		offset += int64(len(line))
		keys = append(keys, key...)
		ends = append(ends, len(keys))
		batch = append(batch, record{rec: body, tomb: tomb})
		lines++
		if len(batch) == batchSize {
			flush()
		}
	}
}

// tornTail follows the lines from the first unreadable one to the end of
// the file, to tell a torn write from a corrupt record. An append returns
// only after its write is fsynced, and the next write starts only then; so
// a power loss can damage the last write only, and a file system that
// loses part of it leaves zero bytes where the lost pages were (a hole),
// never other bytes. A line holding a zero byte is therefore never JSON
// and never acknowledged, and neither is anything after it: the torn tail
// starts at the first unreadable line when that line holds a zero byte or
// is the last line of the file, and no unreadable line after it is free of
// zero bytes (the later pages of a write can survive without the earlier
// ones, so whole records after the hole are dropped with it). Bytes after
// the last newline are a torn tail too. Any other unreadable line is
// corrupt: the start is refused.
type tornTail struct {
	first int   // the first unreadable line, 0 while none was seen
	cause error // why it is unreadable
	zero  bool  // it holds a zero byte
	bytes int   // the bytes of the lines from the first unreadable one
}

// corrupt is the error of a tail that is no torn write.
func (t *tornTail) corrupt(path string) error {
	return fmt.Errorf("journal %s line %d: %v; the file is corrupt: move it aside, or repair the line, before starting (car-server journal verify %s)", path, t.first, t.cause, path)
}

// add takes line n (its body, and why it is unreadable, or nil) into the
// tail, and returns an error once the tail cannot be a torn write; the
// caller then reports the first unreadable line (corrupt), t.cause saying
// why, and why a later line is unreadable too when it is that line that
// makes the tail no torn write.
func (t *tornTail) add(n int, body []byte, perr error) error {
	hasZero := bytes.IndexByte(body, 0) >= 0
	if t.first == 0 {
		t.first, t.cause, t.zero = n, perr, hasZero
		return nil
	}
	if !t.zero {
		return t.cause // an unreadable line without a zero byte, followed by more: no torn write
	}
	if perr != nil && !hasZero {
		t.cause = fmt.Errorf("%v; line %d after it is unreadable too, without a zero byte: %v", t.cause, n, perr)
		return t.cause
	}
	return nil
}

// parse reads a record's key and whether it is a tombstone. body is the
// record without its newline; key may share its memory.
func parse(body []byte) (key []byte, tomb bool, err error) {
	if k, op, ok := fastHeader(body); ok {
		return k, string(op) == OpTombstone, nil
	}
	return decodeHeader(body)
}

// decodeHeader is parse through encoding/json: the definition fastHeader
// must agree with, and the path for every record fastHeader is not sure of.
func decodeHeader(body []byte) ([]byte, bool, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, false, errors.New("empty line")
	}
	var h header
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %v", err)
	}
	if h.Key == nil || *h.Key == "" {
		return nil, false, errors.New(`record has no "key"`)
	}
	if h.Op == "" {
		return nil, false, errors.New(`record has no "op"`)
	}
	return []byte(*h.Key), h.Op == OpTombstone, nil
}

// fastHeader reads the "key" and "op" of the records it is sure to read
// exactly as decodeHeader does, without allocating: b is one JSON object
// (JSON whitespace around it), its "key" and "op" members are non-empty
// strings without escapes and of valid UTF-8, spelled exactly so, and every
// other member has a name of printable ASCII without escapes that is not a
// case variant of "key" or "op", and a valid JSON value. A name repeated
// takes its last value, as in encoding/json. ok false means only that the
// record needs encoding/json, not that it is bad. key and op share b's
// memory.
func fastHeader(b []byte) (key, op []byte, ok bool) {
	i := jsonvalue.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil, false
	}
	i = jsonvalue.SkipSpace(b, i+1)
	for {
		name, j, ascii, plain := plainString(b, i)
		if !plain {
			return nil, nil, false
		}
		i = jsonvalue.SkipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, nil, false
		}
		i = jsonvalue.SkipSpace(b, i+1)
		switch {
		case string(name) == "key" || string(name) == "op":
			v, j, ascii, plain := plainString(b, i)
			if !plain || !ascii && !utf8.Valid(v) {
				return nil, nil, false
			}
			if name[0] == 'k' {
				key = v
			} else {
				op = v
			}
			i = j
		case !ascii || foldsTo(name, "key") || foldsTo(name, "op"):
			return nil, nil, false
		default:
			if i, ok = jsonvalue.ValueEnd(b, i); !ok {
				return nil, nil, false
			}
		}
		i = jsonvalue.SkipSpace(b, i)
		if i >= len(b) {
			return nil, nil, false
		}
		if b[i] == '}' {
			break
		}
		if b[i] != ',' {
			return nil, nil, false
		}
		i = jsonvalue.SkipSpace(b, i+1)
	}
	if jsonvalue.SkipSpace(b, i+1) != len(b) || len(key) == 0 || len(op) == 0 {
		return nil, nil, false
	}
	return key, op, true
}

// plainString reads the JSON string at b[i] when it has no escape: its
// content, the index after its closing quote, and whether it is all ASCII.
// plain is false for anything else (not a string, an escape, a control
// character, no end).
func plainString(b []byte, i int) (s []byte, next int, ascii, plain bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false, false
	}
	var seen byte
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return b[i+1 : j : j], j + 1, seen < utf8.RuneSelf, true
		}
		if c == '\\' || c < 0x20 {
			return nil, 0, false, false
		}
		seen |= c
	}
	return nil, 0, false, false
}

// foldsTo says whether the ASCII name is lower (all lower case ASCII
// letters) in some mix of cases: the names encoding/json would also match.
func foldsTo(name []byte, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	for i, c := range name {
		if c|0x20 != lower[i] {
			return false
		}
	}
	return true
}
