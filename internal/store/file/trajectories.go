package file

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// Trajectories is the file trajectory store: one JSON line per dispatched
// attempt, appended to <dir>/<YYYY-MM-DD>.jsonl for the UTC day the attempt
// ended. A reader of a window lists the directory and opens only the days
// in it; retention removes whole day files. A torn last line (a crash in
// the middle of an append) is skipped when read. It is safe for
// concurrent use.
type Trajectories struct {
	dir string

	mu   sync.Mutex // guards f and day
	f    *os.File   // the day file appended to
	day  string
	gone bool // closed
}

var _ store.Trajectories = (*Trajectories)(nil)

// OpenTrajectories makes dir (0700) when it is missing.
func OpenTrajectories(dir string) (*Trajectories, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("trajectory store: %w", err)
	}
	return &Trajectories{dir: dir}, nil
}

const trajectoryExt = ".jsonl"

// Append writes t as one line of its day's file.
func (s *Trajectories) Append(_ context.Context, t store.Trajectory) error {
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("trajectory store: %w", err)
	}
	line = append(line, '\n')
	day := store.TrajectoryDay(t.At)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return errors.New("trajectory store: closed (the daemon is shutting down); nothing was written")
	}
	if s.f == nil || s.day != day {
		if s.f != nil {
			_ = s.f.Close()
			s.f = nil
		}
		f, err := os.OpenFile(filepath.Join(s.dir, day+trajectoryExt), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("trajectory store: %w", err)
		}
		s.f, s.day = f, day
	}
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("trajectory store: %w", err)
	}
	return nil
}

// days lists the day files, each with its day.
func (s *Trajectories) days() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("trajectory store: %w", err)
	}
	var days []string
	for _, e := range entries {
		day, ok := strings.CutSuffix(e.Name(), trajectoryExt)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := time.Parse(time.DateOnly, day); err != nil {
			continue
		}
		days = append(days, day)
	}
	return days, nil
}

// Scan reads the day files from since's day on.
func (s *Trajectories) Scan(ctx context.Context, since time.Time, fn func(store.Trajectory) error) error {
	from := store.TrajectoryDay(since)
	days, err := s.days()
	if err != nil {
		return err
	}
	for _, day := range days {
		if day < from {
			continue // never opened
		}
		if err := s.scanDay(ctx, day, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Trajectories) scanDay(ctx context.Context, day string, fn func(store.Trajectory) error) error {
	f, err := os.Open(filepath.Join(s.dir, day+trajectoryExt))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // pruned meanwhile
	}
	if err != nil {
		return fmt.Errorf("trajectory store: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var t store.Trajectory
		if json.Unmarshal(sc.Bytes(), &t) != nil {
			continue // a torn line
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("trajectory store: read %s: %w", day, err)
	}
	return nil
}

// Prune removes the day files before before's day.
func (s *Trajectories) Prune(_ context.Context, before time.Time) (int, error) {
	cut := store.TrajectoryDay(before)
	days, err := s.days()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, day := range days {
		if day >= cut {
			continue
		}
		s.mu.Lock()
		if s.day == day && s.f != nil {
			_ = s.f.Close()
			s.f, s.day = nil, ""
		}
		err := os.Remove(filepath.Join(s.dir, day+trajectoryExt))
		s.mu.Unlock()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("trajectory store: %w", err)
		}
		n++
	}
	return n, nil
}

// Close closes the day file open for appends.
func (s *Trajectories) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
