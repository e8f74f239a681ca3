package auditlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// SegmentExt ends the name of every segment: its first seq, 20 digits,
// then SegmentExt, so that names sort as the segments follow each other.
const SegmentExt = ".seg"

// SegmentName is the file name of the segment whose first event is seq.
func SegmentName(seq uint64) string {
	return fmt.Sprintf("%020d%s", seq, SegmentExt)
}

// Segments lists the segment files of dir, oldest first (by name).
func Segments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(n, SegmentExt) {
			continue
		}
		if _, err := strconv.ParseUint(strings.TrimSuffix(n, SegmentExt), 10, 64); err != nil || len(n) != 20+len(SegmentExt) {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// ErrTorn is returned by ScanSegment for a last line without its newline:
// crash residue of a write that never returned.
var ErrTorn = errors.New("the last line has no newline (a write cut short)")

// ScanSegment calls fn with every line of the segment at path from offset
// from on (without its newline), its offset and its number (1-based, from
// from), until fn returns false. A last line without its newline is not
// passed: ScanSegment returns ErrTorn, wrapped, after the others.
func ScanSegment(path string, from int64, fn func(off int64, n int, line []byte) bool) error {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if from > 0 {
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return err
		}
	}
	r := bufio.NewReaderSize(f, 256<<10)
	off, n := from, 0
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			if len(line) > 0 {
				return fmt.Errorf("%s at byte %d: %w", filepath.Base(path), off, ErrTorn)
			}
			return nil
		}
		if err != nil {
			return err
		}
		n++
		if !fn(off, n, bytes.TrimSuffix(line, []byte("\n"))) {
			return nil
		}
		off += int64(len(line))
	}
}

// ReadLineAt reads the one line that starts at off in f (without its
// newline).
func ReadLineAt(f io.ReaderAt, off int64, size int64) ([]byte, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), 4096)
	line, err := r.ReadBytes('\n')
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("byte %d: %w", off, ErrTorn)
		}
		return nil, err
	}
	return line[:len(line)-1], nil
}
