package journal

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/internal/powerfs"
)

// On a file system that keeps only what was made durable, every appended
// record survives a power cut: the journal's name (and its new directory's)
// was made durable when it opened, and a compaction's rename when it ended.
func TestAppendedRecordsSurviveAPowerCut(t *testing.T) {
	fs := powerfs.MountForTest(t)
	path := filepath.Join(fs.Dir(), "sub", "j.jsonl")
	rng := rand.New(rand.NewSource(1))
	for round, compact := range []bool{false, true} {
		j, _ := mustOpen(t, path)
		t.Cleanup(func() { j.Close() }) // before the unmount, should the test fail
		for i := range 200 {
			// Few keys: most records die, and compaction runs on its own too.
			if err := j.Append(rec(fmt.Sprint("k", i%10), "put", 1000*round+i)); err != nil {
				t.Fatal(err)
			}
		}
		if compact {
			if err := j.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		// The power goes with the journal open, as under a running daemon;
		// its file is closed before the cut (the daemon is dead by then).
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Cut(powerfs.LoseAll, rng); err != nil {
			t.Fatal(err)
		}
		j, rep := mustOpen(t, path)
		t.Cleanup(func() { j.Close() })
		if rep.Live != 10 {
			t.Fatalf("round %d: %d keys after the cut, want 10", round, rep.Live)
		}
		for k := range 10 {
			want := string(rec(fmt.Sprint("k", k), "put", 1000*round+190+k))
			if got, _ := j.Get(fmt.Sprint("k", k)); string(got) != want {
				t.Fatalf("round %d: k%d = %s after the cut, want %s", round, k, got, want)
			}
		}
		j.Close()
	}
}

// die closes j as a killed process leaves it: what Write left unflushed is
// not flushed (Close would flush it), and nothing else is written.
func die(t *testing.T, j *Journal) {
	t.Helper()
	j.mu.Lock()
	j.dirty = false
	j.mu.Unlock()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// Records from Write are lost at a power cut until a Sync; those before
// the Sync survive it, and a Close flushes what is left.
func TestWrittenRecordsNeedASyncToSurviveAPowerCut(t *testing.T) {
	fs := powerfs.MountForTest(t)
	path := filepath.Join(fs.Dir(), "j.jsonl")
	rng := rand.New(rand.NewSource(1))
	j, _ := mustOpen(t, path)
	t.Cleanup(func() { j.Close() })
	for i := range 5 {
		if err := j.Write([][]byte{rec(fmt.Sprint("k", i), "put", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 10; i++ {
		if err := j.Write([][]byte{rec(fmt.Sprint("k", i), "put", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := j.Get("k9"); !ok || string(got) != string(rec("k9", "put", 9)) {
		t.Fatalf("Get after Write = %s, %v: a written record is to be seen at once", got, ok)
	}
	die(t, j)
	// A killed process's written records are in the file: only the power
	// loss can take them.
	if rep, err := Verify(path); err != nil || rep.Live != 10 {
		t.Fatalf("before the cut: %+v, %v; want the 10 written records in the file", rep, err)
	}
	if _, err := fs.Cut(powerfs.LoseAll, rng); err != nil {
		t.Fatal(err)
	}
	j, rep := mustOpen(t, path)
	t.Cleanup(func() { j.Close() })
	if rep.Live != 5 {
		t.Fatalf("%d keys after the cut, want the 5 synced", rep.Live)
	}
	for i := range 10 {
		if _, ok := j.Get(fmt.Sprint("k", i)); ok != (i < 5) {
			t.Fatalf("k%d present=%v after the cut; only k0..k4 were synced", i, ok)
		}
	}
	// Written, then closed: Close flushes.
	if err := j.Write([][]byte{rec("closed", "put", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Cut(powerfs.LoseAll, rng); err != nil {
		t.Fatal(err)
	}
	j, _ = mustOpen(t, path)
	t.Cleanup(func() { j.Close() })
	if _, ok := j.Get("closed"); !ok {
		t.Fatal("a record written before Close was lost at the cut: Close is to flush it")
	}
	// An Append flushes the Writes before it.
	if err := j.Write([][]byte{rec("w", "put", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(rec("a", "put", 1)); err != nil {
		t.Fatal(err)
	}
	die(t, j)
	if _, err := fs.Cut(powerfs.LoseAll, rng); err != nil {
		t.Fatal(err)
	}
	j, _ = mustOpen(t, path)
	defer j.Close()
	if _, ok := j.Get("w"); !ok {
		t.Fatal("a record written before an Append was lost at the cut: the Append's flush is to cover it")
	}
}

// A Sync covers every Write that returned before it, while Appends keep the
// flusher writing and fsyncing at the same time: each record written and
// then synced survives a power cut.
func TestSyncedWritesSurviveAPowerCutBesideAppends(t *testing.T) {
	fs := powerfs.MountForTest(t)
	path := filepath.Join(fs.Dir(), "j.jsonl")
	rng := rand.New(rand.NewSource(1))
	j, _ := mustOpen(t, path)
	t.Cleanup(func() { j.Close() })
	stop := make(chan struct{})
	var appenders sync.WaitGroup
	for a := range 3 {
		appenders.Add(1)
		go func() {
			defer appenders.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := j.Append(rec(fmt.Sprintf("a%d-%d", a, i%5), "put", i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var synced []string
	for i := range 300 {
		k := fmt.Sprint("w", i)
		if err := j.Write([][]byte{rec(k, "put", i)}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
			for n := i - 2; n <= i; n++ {
				synced = append(synced, fmt.Sprint("w", n))
			}
		}
	}
	close(stop)
	appenders.Wait()
	die(t, j)
	if _, err := fs.Cut(powerfs.LoseAll, rng); err != nil {
		t.Fatal(err)
	}
	j, _ = mustOpen(t, path)
	defer j.Close()
	for _, k := range synced {
		if _, ok := j.Get(k); !ok {
			t.Fatalf("%s was written and synced, and lost at the cut", k)
		}
	}
}

// Lines appended with AppendLines survive a power cut as Append's records
// do: AppendLines returns after their fsync.
func TestAppendedLinesSurviveAPowerCut(t *testing.T) {
	fs := powerfs.MountForTest(t)
	path := filepath.Join(fs.Dir(), "sub", "log.jsonl")
	j, _, err := Open(path, AppendOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	for r := range 40 {
		if err := j.AppendLines(lines(0, 5*r, 5), 5); err != nil {
			t.Fatal(err)
		}
	}
	die(t, j) // nothing flushed at Close: the lines were, each before AppendLines returned
	if _, err := fs.Cut(powerfs.LoseAll, rand.New(rand.NewSource(1))); err != nil {
		t.Fatal(err)
	}
	n := 0
	rep, err := Read(path, func(_ string, rec []byte) {
		if want := fmt.Sprintf(`{"key":"e","op":"event","a":0,"n":%d}`, n); string(rec) != want {
			t.Fatalf("record %d is %s after the cut, want %s", n, rec, want)
		}
		n++
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 200 || rep.TruncatedBytes != 0 {
		t.Fatalf("after the cut: %+v, want all 200 records and no torn tail", rep)
	}
}

// Lines from WriteLines are in the file at once (a killed process keeps
// them) and need an fsync to survive a power cut: an AppendLines's covers
// the WriteLines before it. A cut that keeps some of their pages and not
// others leaves a tail the next Open cuts off, down to what was synced.
func TestWrittenLinesNeedAnFsyncToSurviveAPowerCut(t *testing.T) {
	fs := powerfs.MountForTest(t)
	path := filepath.Join(fs.Dir(), "log.jsonl")
	rng := rand.New(rand.NewSource(1))
	open := func() *Journal {
		t.Helper()
		j, _, err := Open(path, AppendOnly())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		return j
	}
	count := func(stage string) int {
		t.Helper()
		n := 0
		_, err := Read(path, func(_ string, rec []byte) {
			if want := fmt.Sprintf(`{"key":"e","op":"event","a":0,"n":%d}`, n); string(rec) != want {
				t.Fatalf("%s: record %d is %s, want %s", stage, n, rec, want)
			}
			n++
		})
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		return n
	}

	// Written then synced by an AppendLines, then written only.
	j := open()
	if err := j.WriteLines(lines(0, 0, 50), 50); err != nil {
		t.Fatal(err)
	}
	if err := j.AppendLines(lines(0, 50, 50), 50); err != nil {
		t.Fatal(err)
	}
	for r := range 40 { // 40 writes of 100 lines (about 160 KiB), never synced
		if err := j.WriteLines(lines(0, 100+100*r, 100), 100); err != nil {
			t.Fatal(err)
		}
	}
	die(t, j)
	if n := count("before the cut"); n != 4100 {
		t.Fatalf("before the cut the file holds %d records, want all 4100 written: a killed process keeps what was written", n)
	}
	if _, err := fs.Cut(powerfs.LoseAll, rng); err != nil {
		t.Fatal(err)
	}
	if n := count("after the cut"); n != 100 {
		t.Fatalf("after the cut the file holds %d records, want the 100 synced", n)
	}

	// Written only, and a cut that keeps pages at random: Open cuts the
	// damaged tail off, and keeps every synced record.
	for seed := range int64(10) {
		j = open()
		for r := range 40 {
			if err := j.WriteLines(lines(0, 100+100*r, 100), 100); err != nil {
				t.Fatal(err)
			}
		}
		die(t, j)
		if _, err := fs.Cut(powerfs.KeepSomePages, rand.New(rand.NewSource(seed))); err != nil {
			t.Fatal(err)
		}
		j = open() // cuts the torn tail
		n := count(fmt.Sprintf("cut %d", seed))
		if n < 100 || n > 4100 {
			t.Fatalf("cut %d: %d records kept, want the 100 synced and a prefix of the rest", seed, n)
		}
		t.Logf("cut %d kept %d records", seed, n)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		// Back to the synced 100 for the next round.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(int64(len(lines(0, 0, 100)))); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			t.Fatal(err)
		}
	}
}
