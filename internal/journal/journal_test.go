package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func rec(key, op string, v int) []byte {
	return []byte(fmt.Sprintf(`{"key":%q,"op":%q,"v":%d}`, key, op, v))
}

func mustOpen(t testing.TB, path string) (*Journal, Report) {
	t.Helper()
	j, rep, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return j, rep
}

func TestAppendReplayAndMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "j.jsonl")
	j, _ := mustOpen(t, path)
	for i := 0; i < 5; i++ {
		if err := j.Append(rec(fmt.Sprint("k", i%3), "put", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Append(rec("k0", OpTombstone, 0)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	st, _ := os.Stat(path)
	dst, _ := os.Stat(filepath.Dir(path))
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Fatalf("modes %v %v", st.Mode(), dst.Mode())
	}
	j, rep := mustOpen(t, path)
	defer j.Close()
	if rep.Lines != 6 || rep.Live != 2 {
		t.Fatalf("report %+v", rep)
	}
	if _, ok := j.Get("k0"); ok {
		t.Fatal("a tombstoned key came back")
	}
	if v, _ := j.Get("k1"); string(v) != `{"key":"k1","op":"put","v":4}` {
		t.Fatalf("last record wins: %s", v)
	}
}

func TestTornLastLineIsCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	body := string(rec("a", "put", 1)) + "\n" + `{"key":"b","op":"pu`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	j, rep := mustOpen(t, path)
	if rep.TruncatedBytes != len(`{"key":"b","op":"pu`) || rep.Live != 1 {
		t.Fatalf("report %+v", rep)
	}
	if err := j.Append(rec("c", "put", 2)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	data, _ := os.ReadFile(path)
	if string(data) != string(rec("a", "put", 1))+"\n"+string(rec("c", "put", 2))+"\n" {
		t.Fatalf("file after recovery:\n%s", data)
	}
}

func TestCorruptInteriorLineRefuses(t *testing.T) {
	cases := []struct{ line, want string }{
		{`not json`, "line 2: not a JSON object"},
		{`{"op":"put"}`, `line 2: record has no "key"`},
		{`{"key":"x"}`, `line 2: record has no "op"`},
		{``, "line 2: empty line"},
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		body := string(rec("a", "put", 1)) + "\n" + tc.line + "\n" + string(rec("b", "put", 2)) + "\n"
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want an error naming %s and %q, got %v", tc.line, path, tc.want, err)
		}
		data, _ := os.ReadFile(path)
		if string(data) != body {
			t.Errorf("a refused journal was modified")
		}
	}
}

func TestCompactionKeepsExactlyTheLiveRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, _ := mustOpen(t, path)
	j.minDead = 1 << 30 // only explicit compaction in this test
	want := map[string]string{}
	for i := 0; i < 200; i++ {
		k := fmt.Sprint("k", i%50)
		r := rec(k, "put", i)
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
		want[k] = string(r)
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprint("k", i)
		if err := j.Append(rec(k, OpTombstone, 0)); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
	}
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	if lines, live := j.Stats(); lines != 40 || live != 40 {
		t.Fatalf("after compaction: %d lines, %d live", lines, live)
	}
	if err := j.Append(rec("after", "put", 1)); err != nil {
		t.Fatal(err)
	}
	want["after"] = string(rec("after", "put", 1))
	j.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for _, l := range lines {
		k := l[strings.Index(l, `"key":"`)+7:]
		k = k[:strings.Index(k, `"`)]
		if want[k] != l {
			t.Fatalf("line %s, want %s", l, want[k])
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after compaction %v", st.Mode())
	}
}

func TestAutomaticCompactionWhenDeadOutnumberLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, _ := mustOpen(t, path)
	defer j.Close()
	for i := 0; i < 500; i++ {
		if err := j.Append(rec("same", "put", i)); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, j) // compaction runs beside the appends
	lines, live := j.Stats()
	if live != 1 || lines > 2*j.minDead {
		t.Fatalf("no automatic compaction: %d lines for %d live", lines, live)
	}
}

func TestConcurrentAppendsAllLand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, _ := mustOpen(t, path)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := j.Append(rec(fmt.Sprintf("w%d-%d", w, i), "put", i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	j.Close()
	j, rep := mustOpen(t, path)
	defer j.Close()
	if rep.Live != 800 {
		t.Fatalf("replayed %d live records, want 800", rep.Live)
	}
}

func TestAWriteFailureStopsEveryLaterAppend(t *testing.T) {
	j, _ := mustOpen(t, filepath.Join(t.TempDir(), "j.jsonl"))
	if err := j.Append(rec("a", "put", 1)); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.f.Close() // the disk goes away under the journal
	j.mu.Unlock()
	if err := j.Append(rec("b", "put", 2)); err == nil || !strings.Contains(err.Error(), "write failed") {
		t.Fatalf("first append after the failure: %v", err)
	}
	if err := j.Append(rec("c", "put", 3)); err == nil || !strings.Contains(err.Error(), "no further records are accepted") {
		t.Fatalf("later append: %v", err)
	}
	if _, ok := j.Get("b"); ok {
		t.Fatal("a record that was not written is served")
	}
	j.Close()
	if err := j.Append(rec("d", "put", 4)); err == nil {
		t.Fatal("append after Close succeeded")
	}
}

// TestAnEmptyBatchReturnsAtOnce: a batch of no records writes nothing and
// returns (it used to wait for a flush that never came); after Close it is
// refused like any append.
func TestAnEmptyBatchReturnsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, _ := mustOpen(t, path)
	for _, recs := range [][][]byte{nil, {}} {
		if err := j.AppendBatch(recs); err != nil {
			t.Fatalf("AppendBatch(%v): %v", recs, err)
		}
	}
	if err := j.Append(rec("a", "put", 1)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := j.AppendBatch(nil); err == nil {
		t.Fatal("an empty batch after Close succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != string(rec("a", "put", 1))+"\n" {
		t.Fatalf("the journal holds %q", b)
	}
}

func TestAppendRefusesBadRecords(t *testing.T) {
	j, _ := mustOpen(t, filepath.Join(t.TempDir(), "j.jsonl"))
	defer j.Close()
	for _, r := range []string{`{"op":"put"}`, `[]`, "{\"key\":\"a\",\"op\":\"put\",\n\"x\":1}"} {
		if err := j.Append([]byte(r)); err == nil {
			t.Errorf("accepted %q", r)
		}
	}
}

// TestAppendOnlyKeepsEveryRecord: a log journal keeps every record in its
// file across a reopen, however many share a key, and holds none in memory.
func TestAppendOnlyKeepsEveryRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	j, _, err := Open(path, AppendOnly())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := j.Append([]byte(fmt.Sprintf(`{"key":"e","op":"event","n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := j.Get("e"); ok {
		t.Error("an append-only journal kept a record in memory")
	}
	if err := j.Compact(); err == nil || !strings.Contains(err.Error(), "never compacted") {
		t.Fatalf("Compact of an append-only journal: %v, want it refused", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, rep, err := Open(path, AppendOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if rep.Lines != 200 {
		t.Fatalf("reopened with %d records, want all 200 (none compacted away)", rep.Lines)
	}
}

// Writes (some in the caller, some through the flusher), Appends, Syncs
// and compactions at once: every key ends with its writer's last record,
// in memory and after a reopen.
func TestWriteAppendSyncAndCompactAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, _ := mustOpen(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				r := rec(fmt.Sprintf("g%d-%d", g, i%7), "put", i)
				var err error
				switch {
				case g%3 == 0:
					err = j.Append(r)
				case i%50 == 49:
					err = j.Compact()
				default:
					err = j.Write([][]byte{r})
				}
				if err == nil && i%40 == 0 {
					err = j.Sync()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func(j *Journal, when string) {
		t.Helper()
		for g := range 6 {
			for k := range 7 {
				last := 299 - (299-k)%7
				if g%3 != 0 && last%50 == 49 {
					last -= 7 // that turn compacted instead of writing
				}
				want := string(rec(fmt.Sprintf("g%d-%d", g, k), "put", last))
				if got, ok := j.Get(fmt.Sprintf("g%d-%d", g, k)); !ok || string(got) != want {
					t.Fatalf("%s: g%d-%d = %s, want %s", when, g, k, got, want)
				}
			}
		}
	}
	check(j, "before close")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = mustOpen(t, path)
	defer j.Close()
	check(j, "after reopen")
}

// lines encodes records n .. n+count-1 of appender a as AppendLines takes
// them.
func lines(a, n, count int) []byte {
	var b []byte
	for i := range count {
		b = append(b, fmt.Sprintf(`{"key":"e","op":"event","a":%d,"n":%d}`+"\n", a, n+i)...)
	}
	return b
}

// TestAppendLinesWritesTheCallersLines: lines appended by AppendLines,
// some while other appends are on their way (the flusher's batches) and
// beside Appends, are in the file in each appender's order, counted as
// records, and the journal keeps none of the caller's buffers: each is
// overwritten as soon as AppendLines returns.
func TestAppendLinesWritesTheCallersLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	j, _, err := Open(path, AppendOnly())
	if err != nil {
		t.Fatal(err)
	}
	const appenders, rounds, per = 4, 50, 7
	var wg sync.WaitGroup
	errs := make(chan error, appenders+1)
	for a := range appenders {
		wg.Go(func() {
			for r := range rounds {
				buf := lines(a, r*per, per)
				if err := j.AppendLines(buf, per); err != nil {
					errs <- err
					return
				}
				for i := range buf {
					buf[i] = 'x'
				}
			}
		})
	}
	wg.Go(func() {
		for r := range rounds {
			if err := j.Append([]byte(fmt.Sprintf(`{"key":"e","op":"event","a":%d,"n":%d}`, appenders, r))); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := appenders*rounds*per + rounds
	if lines, _ := j.Stats(); lines != want {
		t.Errorf("Stats: %d records, want %d", lines, want)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, appenders+1)
	rep, err := Read(path, func(key string, rec []byte) {
		var a, n int
		if _, err := fmt.Sscanf(string(rec), `{"key":"e","op":"event","a":%d,"n":%d}`, &a, &n); err != nil || key != "e" {
			t.Fatalf("record %q (key %q): %v", rec, key, err)
		}
		if n != next[a] {
			t.Fatalf("appender %d: record %d where %d was next", a, n, next[a])
		}
		next[a]++
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != want || rep.TruncatedBytes != 0 {
		t.Fatalf("read %+v, want %d records and no torn tail", rep, want)
	}
}

// TestAppendLinesRefuses what it can check without reading JSON, and
// writes nothing of a refused buffer; so does WriteLines, naming itself.
func TestAppendLinesRefuses(t *testing.T) {
	keyed, _ := mustOpen(t, filepath.Join(t.TempDir(), "j.jsonl"))
	defer keyed.Close()
	if err := keyed.AppendLines(lines(0, 0, 1), 1); err == nil || !strings.Contains(err.Error(), "AppendLines is for an append-only journal") {
		t.Errorf("a journal kept by key took AppendLines: %v", err)
	}
	if err := keyed.WriteLines(lines(0, 0, 1), 1); err == nil || !strings.Contains(err.Error(), "WriteLines is for an append-only journal") {
		t.Errorf("a journal kept by key took WriteLines: %v", err)
	}
	path := filepath.Join(t.TempDir(), "log.jsonl")
	j, _, err := Open(path, AppendOnly())
	if err != nil {
		t.Fatal(err)
	}
	good := string(lines(0, 0, 2))
	for _, c := range []struct {
		buf string
		n   int
	}{
		{good, 1},                           // more lines than said
		{good, 3},                           // fewer
		{strings.TrimSuffix(good, "\n"), 2}, // the last line without its newline
		{good + "{\"key\":\"e\",\"op\":\"event\",\"z\":\"\x00\"}\n", 3}, // a zero byte
		{good + "[1]\n", 3}, // not an object
		{good + "\n", 3},
		{"", -1}, // an empty line
	} {
		if err := j.AppendLines([]byte(c.buf), c.n); err == nil {
			t.Errorf("took %q as %d records", c.buf, c.n)
		}
		if err := j.WriteLines([]byte(c.buf), c.n); err == nil || !strings.Contains(err.Error(), "refusing a bad record") {
			t.Errorf("WriteLines took %q as %d records: %v", c.buf, c.n, err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Fatalf("the log holds %q (%v), want nothing", b, err)
	}
}
