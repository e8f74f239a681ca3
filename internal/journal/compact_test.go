package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parslee-ai/car-server/internal/metrics"
)

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 10 * time.Second

// openT opens a journal that is closed when the test ends.
func openT(t *testing.T, path string, opts ...Option) *Journal {
	t.Helper()
	j, _, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// holdRewrite stops j's compactions mid-rewrite: entered receives when one
// stops there, and it goes on when release is called (at the latest when the
// test ends, before the journal is closed).
func holdRewrite(t *testing.T, j *Journal) (entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 1)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	j.mu.Lock()
	j.midRewrite = func() error {
		in <- struct{}{}
		<-gate
		return nil
	}
	j.mu.Unlock()
	return in, release
}

// wait fails the test when ch does not deliver within testTimeout.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("still waiting after %v for %s", testTimeout, what)
		panic("unreachable")
	}
}

// compactAsync runs Compact in a goroutine and delivers its error.
func compactAsync(j *Journal) <-chan error {
	done := make(chan error, 1)
	go func() { done <- j.Compact() }()
	return done
}

// liveRecords is every live record of j, by key.
func liveRecords(j *Journal) map[string]string {
	got := map[string]string{}
	j.Each(func(key string, rec []byte) { got[key] = string(rec) })
	return got
}

func sameRecords(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d live records, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: key %s is %q, want %q", what, k, got[k], w)
		}
	}
}

// settle waits until no compaction is in progress.
func settle(t *testing.T, j *Journal) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		j.mu.Lock()
		defer j.mu.Unlock()
		for j.compaction != nil {
			j.idle.Wait()
		}
	}()
	wait(t, done, "the compaction in progress to end")
}

func TestGetAndAppendDoNotWaitForACompaction(t *testing.T) {
	j := openT(t, filepath.Join(t.TempDir(), "j.jsonl"))
	j.minDead = 1 << 30 // only explicit compaction in this test
	for i := 0; i < 20; i++ {
		if err := j.Append(rec("a", "put", i)); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := holdRewrite(t, j)
	compacted := compactAsync(j)
	wait(t, entered, "the compaction to reach its rewrite")

	got := make(chan string, 1)
	go func() {
		v, _ := j.Get("a")
		got <- string(v)
	}()
	if v := wait(t, got, "Get while a compaction is held mid-rewrite"); v != string(rec("a", "put", 19)) {
		t.Fatalf("Get during the compaction: %s", v)
	}
	appended := make(chan error, 1)
	go func() { appended <- j.Append(rec("b", "put", 1)) }()
	if err := wait(t, appended, "Append while a compaction is held mid-rewrite"); err != nil {
		t.Fatal(err)
	}
	release()
	if err := wait(t, compacted, "the compaction to finish"); err != nil {
		t.Fatal(err)
	}
}

func TestAppendsDuringACompactionAreCarriedOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j := openT(t, path)
	j.minDead = 1 << 30 // only explicit compaction in this test
	want := map[string]string{}
	for i := 0; i < 100; i++ {
		r := rec(fmt.Sprint("k", i%10), "put", i)
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprint("k", i%10)] = string(r)
	}
	entered, release := holdRewrite(t, j)
	compacted := compactAsync(j)
	wait(t, entered, "the compaction to reach its rewrite")

	// Written while the snapshot is being written: a new key, a new value
	// for a key in the snapshot, a tombstone for another, the new key again.
	during := [][]byte{rec("new", "put", 1), rec("k1", "put", 1000), rec("k2", OpTombstone, 0), rec("new", "put", 2)}
	appended := make(chan error, 1)
	go func() {
		for _, r := range during {
			if err := j.Append(r); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	if err := wait(t, appended, "appends while a compaction is held mid-rewrite"); err != nil {
		t.Fatal(err)
	}
	want["new"] = string(rec("new", "put", 2))
	want["k1"] = string(rec("k1", "put", 1000))
	delete(want, "k2")
	release()
	if err := wait(t, compacted, "the compaction to finish"); err != nil {
		t.Fatal(err)
	}

	if lines, live := j.Stats(); lines != 10+len(during) || live != len(want) {
		t.Fatalf("after compaction: %d lines, %d live; want %d lines (the snapshot and what was carried over), %d live", lines, live, 10+len(during), len(want))
	}
	sameRecords(t, "after the swap", liveRecords(j), want)
	if err := j.Append(rec("after", "put", 1)); err != nil {
		t.Fatal(err)
	}
	want["after"] = string(rec("after", "put", 1))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	tail := append(during, rec("after", "put", 1))
	if len(lines) != 10+len(tail) {
		t.Fatalf("the new file has %d lines, want %d:\n%s", len(lines), 10+len(tail), data)
	}
	for i, r := range tail {
		if lines[10+i] != string(r) {
			t.Fatalf("line %d is %s, want %s (carried over in order)", 11+i, lines[10+i], r)
		}
	}
	j2, rep := mustOpen(t, path)
	defer j2.Close()
	if rep.Live != len(want) || rep.TruncatedBytes != 0 {
		t.Fatalf("replay: %+v, want %d live", rep, len(want))
	}
	sameRecords(t, "after replay", liveRecords(j2), want)
}

func TestAutomaticCompactionsUnderConcurrentAppendsLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, _ := mustOpen(t, path)
	j.minDead = 8
	const writers, keys, rounds = 8, 4, 60
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := j.Append(rec(fmt.Sprintf("w%d-%d", w, i%keys), "put", i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	settle(t, j)
	want := map[string]string{}
	for w := 0; w < writers; w++ {
		for i := rounds - keys; i < rounds; i++ {
			want[fmt.Sprintf("w%d-%d", w, i%keys)] = string(rec(fmt.Sprintf("w%d-%d", w, i%keys), "put", i))
		}
	}
	sameRecords(t, "in memory", liveRecords(j), want)
	lines, _ := j.Stats()
	if lines >= writers*rounds {
		t.Fatalf("%d lines for %d appends: no compaction ran", lines, writers*rounds)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, rep := mustOpen(t, path)
	defer j2.Close()
	if rep.Lines != lines {
		t.Fatalf("replayed %d lines, Stats said %d", rep.Lines, lines)
	}
	sameRecords(t, "after replay", liveRecords(j2), want)
}

func TestAFailedCompactionIsLoggedCountedAndHarmless(t *testing.T) {
	logged := make(chan error, 16)
	path := filepath.Join(t.TempDir(), "failing.jsonl")
	j := openT(t, path, WithErrorLog(func(err error) { logged <- err }))
	j.minDead = 4
	j.midRewrite = func() error { return errors.New("no space left on device") }
	failures := metrics.JournalCompactionFailures.WithLabelValues(filepath.Base(path))
	before := testutil.ToFloat64(failures)

	for i := 0; i < 5; i++ { // the fifth leaves 4 dead records to 1 live one
		if err := j.Append(rec("same", "put", i)); err != nil {
			t.Fatal(err)
		}
	}
	err := wait(t, logged, "the failed automatic compaction to be logged")
	if !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), path) {
		t.Fatalf("logged %q, want the cause and the file", err)
	}
	if n := testutil.ToFloat64(failures) - before; n != 1 {
		t.Fatalf("counted %v failures, want 1", n)
	}

	if err := j.Append(rec("same", "put", 99)); err != nil {
		t.Fatalf("append after a failed compaction: %v", err)
	}
	if v, _ := j.Get("same"); string(v) != string(rec("same", "put", 99)) {
		t.Fatalf("Get after a failed compaction: %s", v)
	}
	if err := j.Compact(); err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("explicit compaction: %v, want the failure", err)
	}
	if n := testutil.ToFloat64(failures) - before; n != 2 {
		t.Fatalf("counted %v failures, want 2", n)
	}
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(path), ".failing.jsonl.compact-*"))
	if err != nil || len(matches) != 0 {
		t.Fatalf("temp files left behind: %v %v", matches, err)
	}

	j.mu.Lock()
	j.midRewrite = nil
	j.mu.Unlock()
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	if lines, live := j.Stats(); lines != 1 || live != 1 {
		t.Fatalf("after a good compaction: %d lines, %d live", lines, live)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, rep := mustOpen(t, path)
	defer j2.Close()
	if v, _ := j2.Get("same"); rep.Lines != 1 || string(v) != string(rec("same", "put", 99)) {
		t.Fatalf("replay %+v, same=%s", rep, v)
	}
}
