package journal

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/metrics"
)

// compaction is one rewrite of the journal: a snapshot of the live records
// taken under the lock and written to a temp file outside it, then the lines
// flushed to the old file meanwhile, appended by the flusher before it
// renames the new file over the journal.
type compaction struct {
	explicit bool       // Compact asked for it: its error goes to the caller
	snapshot int        // records in the snapshot
	carry    [][]byte   // lines flushed since the snapshot, in order
	written  bool       // the rewrite has ended: tmp holds the synced snapshot, or err says why not
	tmp      *os.File   // open, at its end
	err      error      // the rewrite's failure
	done     chan error // the outcome (buffered)
}

// entry is one live record of a snapshot.
type entry struct {
	key string
	rec []byte // without its newline
}

// snapshotWritten says whether a compaction waits for the flusher to finish
// it. Called with mu held.
func (j *Journal) snapshotWritten() bool {
	return j.compaction != nil && j.compaction.written
}

// maybeCompact starts a compaction when dead records outnumber live ones
// and are at least minDead. Called with mu held.
func (j *Journal) maybeCompact() {
	dead := j.lines - len(j.live)
	if j.appendOnly || j.broken != nil || j.closing || j.compaction != nil || dead <= len(j.live) || dead < j.minDead || j.lines < j.retryAt {
		return
	}
	j.startCompaction(false)
}

// Compact rewrites the journal with its live records only, now. It returns
// once the new file has replaced the old one; Get and Append go on meanwhile.
// An append-only journal keeps no records by key, so it is refused: its
// rewrite would be empty.
func (j *Journal) Compact() error {
	if j.appendOnly {
		return fmt.Errorf("journal %s: an append-only journal is never compacted", j.path)
	}
	j.mu.Lock()
	for j.compaction != nil {
		j.idle.Wait()
	}
	if err := j.unusable(); err != nil {
		j.mu.Unlock()
		return err
	}
	c := j.startCompaction(true)
	j.mu.Unlock()
	return <-c.done // the flusher finishes every compaction, even when closing
}

// startCompaction takes a snapshot of the live records and writes it in a
// goroutine of its own, which Close waits for. Called with mu held and no
// compaction in progress.
func (j *Journal) startCompaction(explicit bool) *compaction {
	snap := make([]entry, 0, len(j.live))
	for k, rec := range j.live {
		snap = append(snap, entry{k, rec}) // records are never modified in place
	}
	c := &compaction{explicit: explicit, snapshot: len(snap), done: make(chan error, 1)}
	j.compaction = c
	j.rewrites.Add(1)
	go j.rewrite(c, snap, j.midRewrite)
	return c
}

// rewrite writes the snapshot to a temp file beside the journal and hands
// it to the flusher.
func (j *Journal) rewrite(c *compaction, snap []entry, hook func() error) {
	defer j.rewrites.Done()
	tmp, err := writeSnapshot(filepath.Dir(j.path), "."+filepath.Base(j.path)+".compact-*", snap, hook)
	j.mu.Lock()
	c.tmp, c.err, c.written = tmp, err, true
	j.work.Signal()
	j.mu.Unlock()
}

// writeSnapshot writes the records in key order to a new 0600 temp file and
// syncs it. The file is left open for the records to carry over.
func writeSnapshot(dir, pattern string, snap []entry, hook func() error) (*os.File, error) {
	slices.SortFunc(snap, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	for _, e := range snap {
		w.Write(e.rec)
		w.WriteByte('\n')
	}
	err = w.Flush()
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil && hook != nil {
		err = hook()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// finishCompaction swaps in the new file of a compaction whose snapshot is
// written. Appends wait for it as for a flush; Get does not. A failure
// before the rename leaves the journal as it was; one after it stops
// appends. Called by the flusher with mu held; it unlocks for the I/O.
func (j *Journal) finishCompaction(c *compaction) {
	carry, old, broken := c.carry, j.f, j.broken
	j.mu.Unlock()
	var f *os.File
	renamed, err := false, c.err
	switch {
	case broken != nil: // a write failed meanwhile: nothing more is written
		if c.tmp != nil {
			c.tmp.Close()
			os.Remove(c.tmp.Name())
		}
		err = broken
	case err == nil:
		if f, renamed, err = j.install(c.tmp, carry); err == nil {
			old.Close()
		}
	}
	if err != nil && broken == nil {
		err = fmt.Errorf("journal %s: compact: %w", j.path, err)
		metrics.JournalCompactionFailures.WithLabelValues(filepath.Base(j.path)).Inc()
		if !c.explicit {
			j.logError(err)
		}
	}
	j.mu.Lock()
	switch {
	case err == nil:
		j.f = f
		j.lines = c.snapshot + len(carry)
		j.dirty = false // the new file holds every record written, synced
		j.retryAt = 0
	case renamed:
		j.broken = err
	case !c.explicit && broken == nil:
		j.retryAt = 2 * j.lines // once per doubling, not once per flush
	}
	j.compaction = nil
	c.done <- err
	j.idle.Broadcast()
	j.maybeCompact()
}

// install appends the carried-over lines to the synced snapshot in tmp,
// syncs it, renames it over the journal, syncs the directory and opens the
// new file for appending. renamed says whether it replaced the old one.
func (j *Journal) install(tmp *os.File, carry [][]byte) (f *os.File, renamed bool, err error) {
	if len(carry) > 0 {
		_, err = tmp.Write(slices.Concat(carry...))
		if err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), j.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, false, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(j.path)); err != nil {
		return nil, true, err
	}
	if f, err = atomicfile.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, true, fmt.Errorf("reopen: %w", err)
	}
	return f, true, nil
}
