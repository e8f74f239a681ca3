package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// TestTrajectoryDaysOutsideTheWindowAreNotOpened: a day file before the
// window's first day is never read (one that cannot be read fails only a
// scan that reaches it), and a torn last line is skipped.
func TestTrajectoryDaysOutsideTheWindowAreNotOpened(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTrajectories(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)
	if err := s.Append(ctx, store.Trajectory{Tool: "t", Principal: "plain", Status: store.TrajectorySucceeded, DurationMs: 2, Attempt: 1, At: now}); err != nil {
		t.Fatal(err)
	}
	// Day 2026-06-01 holds a line longer than a reader takes: reading it fails.
	unreadable := filepath.Join(dir, "2026-06-01.jsonl")
	if err := os.WriteFile(unreadable, []byte(strings.Repeat("x", 2<<20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A torn line at the end of today's file.
	f, err := os.OpenFile(filepath.Join(dir, "2026-06-10.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"tool":"t","princ`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	n := 0
	if err := s.Scan(ctx, now.AddDate(0, 0, -5), func(store.Trajectory) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("scan of the last 6 days: %d records, %v; want 1 and no error (the unreadable day is outside)", n, err)
	}
	if err := s.Scan(ctx, now.AddDate(0, 0, -10), func(store.Trajectory) error { return nil }); err == nil {
		t.Fatal("a scan reaching the unreadable day read nothing of it: it cannot tell whether the window is honoured")
	}
}
