package journal

import (
	"fmt"
	"math/rand"
	"path/filepath"
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
