package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// probeBlock is the size of one probe write: a PostgreSQL page, the unit
// pg_test_fsync times, and about what one journal record of a small result
// takes on disk.
const probeBlock = 8 << 10

// fsyncProbe times the flushes of the disk that holds a directory: it is
// what a durable step cannot go below. It keeps two files there:
//   - an 8 kB block rewritten in place and flushed with fdatasync, which
//     changes no metadata: the disk's own flush;
//   - an 8 kB record appended and flushed with fsync, which also writes the
//     file's new size: what an append-only journal pays per record.
type fsyncProbe struct {
	dir            string
	inPlace, apnd  *os.File
	block          []byte
	flush, appends []time.Duration
}

func newFsyncProbe(dir string) (*fsyncProbe, error) {
	p := &fsyncProbe{dir: dir, block: make([]byte, probeBlock)}
	var err error
	if p.inPlace, err = os.CreateTemp(dir, "car-bench-fsync-*"); err != nil {
		return nil, fmt.Errorf("fsync probe in %s: %w", dir, err)
	}
	if p.apnd, err = os.CreateTemp(dir, "car-bench-append-*"); err != nil {
		p.close()
		return nil, fmt.Errorf("fsync probe in %s: %w", dir, err)
	}
	// The in-place block exists and is on disk before it is timed.
	if _, err := p.inPlace.WriteAt(p.block, 0); err != nil {
		p.close()
		return nil, err
	}
	if err := p.inPlace.Sync(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// measure times one of each flush.
func (p *fsyncProbe) measure() error {
	p.block[0]++
	t0 := time.Now()
	if _, err := p.inPlace.WriteAt(p.block, 0); err != nil {
		return err
	}
	if err := fdatasync(p.inPlace); err != nil {
		return err
	}
	p.flush = append(p.flush, time.Since(t0))
	t0 = time.Now()
	if _, err := p.apnd.Write(p.block); err != nil {
		return err
	}
	if err := p.apnd.Sync(); err != nil {
		return err
	}
	p.appends = append(p.appends, time.Since(t0))
	return nil
}

// close removes the probe's files.
func (p *fsyncProbe) close() {
	for _, f := range []*os.File{p.inPlace, p.apnd} {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}

// probeDir is the directory whose disk the durable chain is set against:
// the one given, else the spawned daemon's state root, where its journals
// are.
func probeDir(o options) string {
	if o.FsyncDir != "" {
		return filepath.Clean(o.FsyncDir)
	}
	return o.Home
}
