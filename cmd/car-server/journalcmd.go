package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/parslee-ai/car-server/internal/journal"
)

const journalUsage = `usage: car-server journal verify FILE    check every line; exit 1 on corruption
       car-server journal compact FILE   rewrite FILE with its live records (daemon stopped)`

// runJournalCommand serves "car-server journal verify|compact FILE".
func runJournalCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || (args[0] != "verify" && args[0] != "compact") || strings.HasPrefix(args[1], "-") {
		fmt.Fprintln(stderr, journalUsage)
		return exitUsage
	}
	path := args[1]
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "car-server journal %s: %s does not exist\n", args[0], path)
		return exitFailed
	}
	switch args[0] {
	case "verify":
		rep, err := journal.Verify(path)
		if err != nil {
			fmt.Fprintln(stderr, "car-server:", err)
			fmt.Fprintf(stdout, "%s: CORRUPT after %d good records\n", path, rep.Lines)
			return 1
		}
		fmt.Fprintf(stdout, "%s: ok: %d records, %d live, %d dead\n", path, rep.Lines, rep.Live, rep.Lines-rep.Live)
		if rep.TruncatedBytes > 0 {
			fmt.Fprintf(stdout, "%s: it ends in a torn tail (%d bytes of crash residue, never acknowledged); the daemon cuts it off when it opens the file\n", path, rep.TruncatedBytes)
		}
		return 0
	default:
		if err := refuseWhileDaemonRuns(path); err != nil {
			fmt.Fprintln(stderr, "car-server:", err)
			return 1
		}
		j, before, err := journal.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "car-server:", err)
			return 1
		}
		defer j.Close()
		if err := j.Compact(); err != nil {
			fmt.Fprintln(stderr, "car-server:", err)
			return 1
		}
		lines, live := j.Stats()
		fmt.Fprintf(stdout, "%s: compacted: %d records -> %d (%d live)\n", path, before.Lines, lines, live)
		return 0
	}
}

// refuseWhileDaemonRuns fails when a daemon holds the lock of the state root
// the journal lives in: compacting under a running daemon would lose its
// appends.
func refuseWhileDaemonRuns(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	lockPath := filepath.Join(filepath.Dir(path), "run", "daemon.lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", lockPath, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("a car-server is running on %s (it holds %s); stop it before compacting its journal", filepath.Dir(path), lockPath)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return nil
}
