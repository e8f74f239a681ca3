package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// splitLines is what lineReader must return for data: its lines with their
// newlines, then what follows the last newline.
func splitLines(data []byte) (lines [][]byte, tail []byte) {
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return lines, data
		}
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
}

func TestLineReaderSplitsLikeTheData(t *testing.T) {
	long := bytes.Repeat([]byte("x"), chunkSize+17)
	inputs := map[string][]byte{
		"empty":           nil,
		"one line":        []byte("a\n"),
		"torn":            []byte("a\nbc"),
		"blank lines":     []byte("\n\n\na\n\n"),
		"many":            []byte(strings.Repeat("0123456789abcdef\n", 5000) + "tail"),
		"longer than one": append(append([]byte("a\n"), long...), "\nb\n"...),
		"long torn tail":  append([]byte("a\n"), long...),
	}
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(d []byte) io.Reader { return bytes.NewReader(d) },
		"halves":   func(d []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(d)) },
		"data+EOF": func(d []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(d)) },
		"one byte": func(d []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(d)) },
	}
	for name, data := range inputs {
		wantLines, wantTail := splitLines(data)
		for rname, reader := range readers {
			if rname == "one byte" && len(data) > 1<<16 {
				continue // the same splitting, too slow a byte at a time
			}
			for _, keep := range []bool{true, false} {
				for _, hint := range []int64{int64(len(data)), 0, 10 * int64(len(data))} {
					what := fmt.Sprintf("%s/%s/keep=%v/hint=%d", name, rname, keep, hint)
					lr := newLineReader(reader(data), hint, keep)
					var got [][]byte
					for {
						line, err := lr.next()
						if err == io.EOF {
							if !bytes.Equal(line, wantTail) {
								t.Errorf("%s: tail %d bytes, want %d", what, len(line), len(wantTail))
							}
							break
						}
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						if cap(line) != len(line) {
							t.Fatalf("%s: a line's capacity runs past it", what)
						}
						if !keep {
							line = bytes.Clone(line)
						}
						got = append(got, line)
					}
					// With keep, the lines kept are still intact at the end.
					if len(got) != len(wantLines) {
						t.Fatalf("%s: %d lines, want %d", what, len(got), len(wantLines))
					}
					for i := range got {
						if !bytes.Equal(got[i], wantLines[i]) {
							t.Fatalf("%s: line %d is %.40q, want %.40q", what, i+1, got[i], wantLines[i])
						}
					}
				}
			}
		}
	}
}

func TestScanHandsOverEveryRecordInBatches(t *testing.T) {
	var body []byte
	for i := 0; i < 3000; i++ {
		body = append(append(body, rec(fmt.Sprint("k", i), "put", i)...), '\n')
	}
	want, _ := splitLines(body)
	for _, tc := range []struct {
		keep bool
		r    io.Reader
		hint int64
	}{
		{true, bytes.NewReader(body), int64(len(body))}, // one read: batches end at batchSize
		{false, bytes.NewReader(body), int64(len(body))},
		{true, iotest.HalfReader(bytes.NewReader(body)), 0}, // no size hint: small reads, many within a batch
		{false, iotest.HalfReader(bytes.NewReader(body)), 0},
	} {
		keep := tc.keep
		var got []string
		lines, _, _, err := scan(tc.r, tc.hint, keep, "j.jsonl", func(batch []record) {
			if len(batch) == 0 || len(batch) > batchSize {
				t.Fatalf("keep=%v: a batch of %d records", keep, len(batch))
			}
			for _, r := range batch {
				if !strings.HasPrefix(string(r.rec), `{"key":"`+r.key+`"`) {
					t.Fatalf("keep=%v: key %q for the record %s", keep, r.key, r.rec)
				}
				got = append(got, string(r.rec)+"\n")
			}
		})
		if err != nil || lines != len(want) || len(got) != len(want) {
			t.Fatalf("keep=%v: %d lines, %d handed over, %v; want %d", keep, lines, len(got), err, len(want))
		}
		for i := range want {
			if got[i] != string(want[i]) {
				t.Fatalf("keep=%v: record %d is %q, want %q", keep, i+1, got[i], want[i])
			}
		}
	}
}

func TestScanHandsOverTheRecordsBeforeAReadError(t *testing.T) {
	broken := errors.New("the disk went away")
	body := string(rec("a", "put", 1)) + "\n" + string(rec("b", "put", 2)) + "\n" + `{"key":"c"`
	for _, keep := range []bool{true, false} {
		var keys []string
		lines, offset, _, err := scan(io.MultiReader(strings.NewReader(body), iotest.ErrReader(broken)), 0, keep, "j.jsonl", func(batch []record) {
			for _, r := range batch {
				keys = append(keys, r.key)
			}
		})
		if !errors.Is(err, broken) || !strings.Contains(err.Error(), "j.jsonl") {
			t.Errorf("keep=%v: want the read error naming the file, got %v", keep, err)
		}
		if lines != 2 || offset != int64(strings.LastIndexByte(body, '\n')+1) || strings.Join(keys, ",") != "a,b" {
			t.Errorf("keep=%v: %d lines to offset %d, keys %v", keep, lines, offset, keys)
		}
	}
}

// commonRecords are records as the journal's users write them
// (encoding/json, default settings): the fast decoder must read them all.
func commonRecords(t testing.TB) [][]byte {
	type idem struct {
		Op         string          `json:"op"`
		Key        string          `json:"key"`
		Tool       string          `json:"tool,omitempty"`
		Output     json.RawMessage `json:"output,omitempty"`
		ProposalID string          `json:"proposal_id,omitempty"`
		At         time.Time       `json:"at"`
	}
	type msg struct {
		Op        string    `json:"op"`
		Key       string    `json:"key"`
		Channel   string    `json:"channel"`
		MessageID *string   `json:"message_id"`
		At        time.Time `json:"at"`
	}
	at := time.Date(2026, 11, 30, 7, 0, 0, 123456789, time.UTC)
	var out [][]byte
	for _, v := range []any{
		idem{Op: "put", Key: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Tool: "fs.read",
			Output: json.RawMessage(`{"text":"caf\u00e9 \"quoted\"\n","lines":[1,2.5,-3e-2],"ok":true,"none":null,"deep":{"a":[{}]}}`), ProposalID: "p-1", At: at},
		idem{Op: OpTombstone, Key: "tool/ключ/键", At: at},
		msg{Op: "put", Key: "slack:#ops:42", Channel: "slack", At: at},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, rec("k0", "put", 0), rec("k1", OpTombstone, -7))
}

// sameAsJSON checks that parse reads line exactly as encoding/json does,
// and that whatever fastHeader accepts it reads as encoding/json does.
func sameAsJSON(t *testing.T, line []byte) (fast bool) {
	t.Helper()
	wantKey, wantTomb, wantErr := decodeHeader(line)
	key, tomb, err := parse(line)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || string(key) != string(wantKey) || tomb != wantTomb {
		t.Fatalf("%q: parse gives (%q, %v, %v), encoding/json (%q, %v, %v)", line, key, tomb, err, wantKey, wantTomb, wantErr)
	}
	fk, fop, ok := fastHeader(line)
	if !ok {
		return false
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil || h.Key == nil {
		t.Fatalf("%q: the fast decoder read key %q op %q; encoding/json: %v, key %v", line, fk, fop, err, h.Key)
	}
	if string(fk) != *h.Key || string(fop) != h.Op {
		t.Fatalf("%q: the fast decoder read key %q op %q; encoding/json key %q op %q", line, fk, fop, *h.Key, h.Op)
	}
	return true
}

func TestFastHeaderReadsTheCommonRecords(t *testing.T) {
	for _, line := range commonRecords(t) {
		if !sameAsJSON(t, line) {
			t.Errorf("%s: left to encoding/json", line)
		}
	}
}

// fastCases are records the fast decoder reads itself (and must read as
// encoding/json does).
var fastCases = []string{
	" \t{ \"key\" : \"a\" ,\"op\":\"tombstone\", \"x\" : [ 1 , -0.5e+3, 0, 1E9, {\"y\":\"\\u00e9\\n\\\"\"}, true, false, null, [], {} ] }\r ",
	`{"op":"put","key":"a","key":"b"}`,
	`{"key":"a","op":"tombstone","op":"put"}`,
	`{"key":"é ✓ 键","op":"put"}`,
	`{"key":"a","op":"put","K":1,"keys":2,"o":3,"opp":4,"":5}`,
	`{"key":"a","op":"Tombstone"}`,
	`{"key":"a","op":"put","s":"\ud83d\ude00 \ud800 \/ \b\f\r\t \uABCD"}`,
	"{\"key\":\"a\",\"op\":\"put\",\"s\":\"\xff\xed\xa0\x80\"}",
	// Deep nesting elsewhere in the record, checked as encoding/json checks it.
	`{"key":"a","op":"put","d":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
}

// slowCases are lines the fast decoder must leave to encoding/json.
var slowCases = []string{
	``,
	` `,
	"\v" + `{"key":"a","op":"put"}`,
	`null`,
	`[]`,
	`{}`,
	`{"key":"a","op":"put"`,
	`{"key":"a","op":"put"} x`,
	`{"key":"a","op":"put"}{}`,
	`{"key":"a","op":"put",}`,
	`{"key":"a" "op":"put"}`,
	`{"key":"a","op":"put","n":01}`,
	`{"key":"a","op":"put","n":-}`,
	`{"key":"a","op":"put","n":1.}`,
	`{"key":"a","op":"put","n":1e}`,
	`{"key":"a","op":"put","n":.5}`,
	`{"key":"a","op":"put","n":+1}`,
	`{"key":"a","op":"put","n":tru}`,
	`{"key":"a","op":"put","n":nul}`,
	`{"key":"a","op":"put","s":"\x}`,
	`{"key":"a","op":"put","s":"\u12G4"}`,
	"{\"key\":\"a\",\"op\":\"put\",\"s\":\"\x01\"}",
	"{\"key\":\"a\",\"op\":\"put\",\"s\":\"\x1f\"}",
	`{"key":"a","op":"put","s":"\u12`,
	`{"key":"a","op":"put","s":"\u12"}`,
	`{"key":"a","op":"put","s":"\`,
	`{"key":"a","op":"put","a":[1,]}`,
	`{"key":"a","op":"put","a":[1 2]}`,
	`{"key":"a","op":"put","o":{"x"}}`,
	`{"key":"a","op":"put","o":{1:2}}`,
	`{"KEY":"a","op":"put"}`,
	`{"key":"a","Op":"put"}`,
	`{"key":"a","oP":"tombstone","op":"put"}`,
	`{"key":"a","op":"put","Op":"tombstone"}`,
	`{"key":"a","op":"put","KEY":"b"}`,
	`{"\u006bey":"a","op":"put"}`,
	"{\"\u212aey\":\"a\",\"op\":\"put\"}",
	"{\"\u017f\":1,\"key\":\"a\",\"op\":\"put\"}",
	`{"key":"a\u0062","op":"put"}`,
	`{"key":"a\"","op":"put"}`,
	`{"key":"a","op":"tomb\u0073tone"}`,
	"{\"key\":\"\xff\",\"op\":\"put\"}",
	"{\"key\":\"\xed\xa0\x80\",\"op\":\"put\"}",
	`{"key":"a","op":"put","key":null}`,
	`{"key":"a","op":null}`,
	`{"key":1,"op":"put"}`,
	`{"key":"a","op":["put"]}`,
	`{"key":"","op":"put"}`,
	`{"key":"a","op":""}`,
	`{"op":"put"}`,
	`{"key":"a"}`,
}

func TestFastHeaderAgreesWithEncodingJSON(t *testing.T) {
	for _, line := range fastCases {
		if !sameAsJSON(t, []byte(line)) {
			t.Errorf("%q: left to encoding/json", line)
		}
	}
	for _, line := range slowCases {
		if sameAsJSON(t, []byte(line)) {
			t.Errorf("%q: the fast decoder read it", line)
		}
	}
}

func TestReplayOfMostlyDeadRecords(t *testing.T) {
	for _, dead := range []int{0, 5, 50} {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		var body []byte
		want := map[string]string{}
		for i := 0; i < 1000; i++ {
			k := fmt.Sprint("k", i%(1000/(dead+1)))
			r := rec(k, "put", i)
			if i%7 == 3 {
				r = rec(k, OpTombstone, i)
				delete(want, k)
			} else {
				want[k] = string(r)
			}
			body = append(append(body, r...), '\n')
		}
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		j, rep := mustOpen(t, path)
		if rep.Lines != 1000 || rep.Live != len(want) {
			t.Errorf("dead=%d: report %+v, want 1000 lines, %d live", dead, rep, len(want))
		}
		for k, w := range want {
			got, ok := j.Get(k)
			if !ok || string(got) != w {
				t.Errorf("dead=%d: %s is %q, want %q", dead, k, got, w)
			}
			if cap(got) != len(got) {
				t.Errorf("dead=%d: %s's record has room after it: an append would overwrite another", dead, k)
			}
		}
		sameRecords(t, fmt.Sprintf("dead=%d", dead), liveRecords(j), want)
		j.Close()
	}
}

func TestReadRecordsMayBeKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	var body []byte
	for i := 0; i < 3000; i++ {
		body = append(append(body, rec(fmt.Sprint("k", i), "put", i)...), '\n')
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	if _, err := Read(path, func(_ string, r []byte) { kept = append(kept, r) }); err != nil {
		t.Fatal(err)
	}
	if got := append(bytes.Join(kept, []byte("\n")), '\n'); !bytes.Equal(got, body) {
		t.Fatal("the records Read handed over changed after it returned")
	}
}
