package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// Checkpoint is one saved copy of state.
type Checkpoint struct {
	ID        string  `json:"checkpoint_id"`
	Name      string  `json:"name,omitempty"`
	Tenant    *string `json:"tenant_id,omitempty"` // nil: every namespace was saved
	CreatedAt string  `json:"created_at"`
	// State maps a namespace ("" is the unscoped one) to its keys.
	State map[string]map[string]any `json:"state"`
}

// Keys is the number of keys saved, across namespaces.
func (c *Checkpoint) Keys() int {
	n := 0
	for _, ns := range c.State {
		n += len(ns)
	}
	return n
}

// Meta describes a checkpoint without its state.
type Meta struct {
	ID        string  `json:"checkpoint_id"`
	Name      string  `json:"name,omitempty"`
	Tenant    *string `json:"tenant_id,omitempty"`
	CreatedAt string  `json:"created_at"`
	Keys      int     `json:"keys"`
	Bytes     int64   `json:"bytes"`
	Corrupt   string  `json:"corrupt,omitempty"` // why the file cannot be restored
}

// ErrNotFound is a checkpoint id with no file.
var ErrNotFound = errors.New("no such checkpoint")

// idPattern is what a checkpoint id looks like; anything else is refused
// before it comes near a path.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// MaxConcurrentOps is how many checkpoint saves, restores and lists run at
// once; the rest wait their turn (Acquire). A save or restore holds a whole
// checkpoint decoded, up to max_checkpoint_bytes of JSON and several times
// that in memory, so the bound is what keeps a burst of them from holding
// many at once.
const MaxConcurrentOps = 2

// maxHeaderBytes bounds the header line List reads, and so a checkpoint's
// name.
const maxHeaderBytes = 16 << 10

// headerPrefix opens the header line of a checkpoint file: its metadata,
// so that List reads that line and never the state after it. A file that
// does not start with it was written before the header existed.
const headerPrefix = `{"car_checkpoint":1,`

// header is the first line of a checkpoint file.
type header struct {
	Format    int     `json:"car_checkpoint"`
	ID        string  `json:"checkpoint_id"`
	Name      string  `json:"name,omitempty"`
	Tenant    *string `json:"tenant_id,omitempty"`
	CreatedAt string  `json:"created_at"`
	Keys      int     `json:"keys"`
}

// Store is the checkpoint directory.
type Store struct {
	dir      string
	maxCount int
	maxBytes int64

	mu  sync.Mutex    // one save, delete or header upgrade at a time, so the count bound holds
	ops chan struct{} // a slot per operation running (Acquire)
}

// Open creates dir (0700) if needed. maxCount and maxBytes bound the number
// of checkpoints kept and the size of one file.
func Open(dir string, maxCount int, maxBytes int64) (*Store, error) {
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("create checkpoint directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict checkpoint directory %s to its owner: %w", dir, err)
	}
	return &Store{dir: dir, maxCount: maxCount, maxBytes: maxBytes, ops: make(chan struct{}, MaxConcurrentOps)}, nil
}

// Acquire waits for one of the MaxConcurrentOps slots; release gives it
// back. what names the operation for the error when ctx ends first.
func (s *Store) Acquire(ctx context.Context, what string) (release func(), err error) {
	select {
	case s.ops <- struct{}{}:
		return func() { <-s.ops }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s waited for one of the %d checkpoint operations that run at once, and gave up: %w; try again when fewer saves, restores and lists run",
			what, MaxConcurrentOps, context.Cause(ctx))
	}
}

// Dir is where the checkpoint files are.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("checkpoint id '%s' is not one this daemon issues (see checkpoint.list)", id)
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// Save writes cp atomically: its header line and its state in one temp
// file in the directory, fsynced, renamed over <id>.json, and the directory
// fsynced. A crash leaves the whole new file or none, never a header
// without its state.
func (s *Store) Save(cp *Checkpoint) (Meta, error) {
	path, err := s.path(cp.ID)
	if err != nil {
		return Meta{}, err
	}
	body, err := json.Marshal(cp)
	if err != nil {
		return Meta{}, fmt.Errorf("encode checkpoint: %w", err)
	}
	meta := Meta{ID: cp.ID, Name: cp.Name, Tenant: cp.Tenant, CreatedAt: cp.CreatedAt, Keys: cp.Keys()}
	data, err := withHeader(meta, body)
	if err != nil {
		return Meta{}, err
	}
	if int64(len(data)) > s.maxBytes {
		return Meta{}, fmt.Errorf("checkpoint would be %d bytes, over max_checkpoint_bytes (%d): save one tenant (tenant_id) or raise the limit", len(data), s.maxBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, err := s.ids()
	if err != nil {
		return Meta{}, err
	}
	if len(ids) >= s.maxCount {
		return Meta{}, fmt.Errorf("%d checkpoints are kept, the most max_checkpoints allows: delete one with checkpoint.delete first", len(ids))
	}
	if err := atomicfile.Write(path, data); err != nil {
		return Meta{}, fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	meta.Bytes = int64(len(data))
	return meta, nil
}

// withHeader is the content of a checkpoint file: the header line of meta,
// then body.
func withHeader(meta Meta, body []byte) ([]byte, error) {
	line, err := json.Marshal(header{Format: 1, ID: meta.ID, Name: meta.Name, Tenant: meta.Tenant, CreatedAt: meta.CreatedAt, Keys: meta.Keys})
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint header: %w", err)
	}
	if len(line) >= maxHeaderBytes {
		name, _ := json.Marshal(meta.Name)
		return nil, fmt.Errorf("checkpoint header would be %d bytes, and must be under %d: its name is %d bytes as JSON (a quote, a '<' or a control character is escaped, up to six bytes); save with a shorter name",
			len(line), maxHeaderBytes, len(name))
	}
	data := make([]byte, 0, len(line)+1+len(body))
	data = append(append(append(data, line...), '\n'), body...)
	return data, nil
}

// Load reads one checkpoint. A file that is too big, does not parse or is
// not a checkpoint is refused, naming it.
func (s *Store) Load(id string) (*Checkpoint, error) {
	path, err := s.path(id)
	if err != nil {
		return nil, err
	}
	cp, _, err := s.read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint '%s': %w (see checkpoint.list)", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if cp.ID != id {
		return nil, fmt.Errorf("checkpoint file %s is corrupt: it holds checkpoint '%s'; delete it with checkpoint.delete", path, cp.ID)
	}
	return cp, nil
}

// read decodes the file at path.
func (s *Store) read(path string) (*Checkpoint, int64, error) {
	data, err := s.readFile(path)
	if err != nil {
		return nil, int64(len(data)), err
	}
	cp, err := decode(path, data)
	return cp, int64(len(data)), err
}

// decode is the checkpoint in data, the file at path, numbers as
// json.Number like every value the daemon holds; the header line, when
// there is one, is skipped.
func decode(path string, data []byte) (*Checkpoint, error) {
	if bytes.HasPrefix(data, []byte(headerPrefix)) {
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			data = data[nl+1:]
		}
	}
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&cp); err != nil {
		return nil, fmt.Errorf("checkpoint file %s is corrupt: %v; delete it with checkpoint.delete", path, err)
	}
	if dec.More() || cp.ID == "" || cp.State == nil {
		return nil, fmt.Errorf("checkpoint file %s is corrupt: not one checkpoint with checkpoint_id and state; delete it with checkpoint.delete", path)
	}
	return &cp, nil
}

// readFile is the whole file at path, refused past max_checkpoint_bytes.
func (s *Store) readFile(path string) ([]byte, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint file %s: %w", path, err)
	}
	if int64(len(data)) > s.maxBytes {
		return data, fmt.Errorf("checkpoint file %s is larger than max_checkpoint_bytes (%d); raise the limit or delete it", path, s.maxBytes)
	}
	return data, nil
}

// List describes every checkpoint, oldest first, from the header line of
// each file: no state is read. A file without a header (written before
// there was one) is read once and rewritten with its header, atomically; a
// file that cannot be described is listed with the reason rather than
// hidden. A state damaged after its header is found by Load, at restore.
func (s *Store) List() ([]Meta, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	out := make([]Meta, 0, len(ids))
	for _, id := range ids {
		path := filepath.Join(s.dir, id+".json")
		meta, err := s.meta(id, path)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the directory was read
		}
		if err != nil {
			meta = Meta{ID: id, Bytes: meta.Bytes, Corrupt: err.Error()}
		}
		out = append(out, meta)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, nil
}

// Describe is the metadata of checkpoint id, from its header line as List
// reads it.
func (s *Store) Describe(id string) (Meta, error) {
	path, err := s.path(id)
	if err != nil {
		return Meta{}, err
	}
	meta, err := s.meta(id, path)
	if errors.Is(err, os.ErrNotExist) {
		return Meta{}, fmt.Errorf("checkpoint '%s': %w (see checkpoint.list)", id, ErrNotFound)
	}
	return meta, err
}

// meta describes checkpoint id from its file's header line, giving a file
// without one its header first (upgrade).
func (s *Store) meta(id, path string) (Meta, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Meta{}, fmt.Errorf("read checkpoint file %s: %w", path, err)
	}
	size := info.Size()
	if size > s.maxBytes {
		return Meta{Bytes: size}, fmt.Errorf("checkpoint file %s is larger than max_checkpoint_bytes (%d); raise the limit or delete it", path, s.maxBytes)
	}
	r := bufio.NewReaderSize(io.LimitReader(f, maxHeaderBytes), 4096)
	prefix, err := r.Peek(len(headerPrefix))
	if err != nil || !bytes.Equal(prefix, []byte(headerPrefix)) {
		return s.upgrade(id, path, info)
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return Meta{Bytes: size}, fmt.Errorf("checkpoint file %s is corrupt: its header line does not end within %d bytes; delete it with checkpoint.delete", path, maxHeaderBytes)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil || h.Format != 1 || h.ID != id {
		return Meta{Bytes: size}, fmt.Errorf("checkpoint file %s is corrupt: its header line is not the header of checkpoint '%s'; delete it with checkpoint.delete", path, id)
	}
	return Meta{ID: h.ID, Name: h.Name, Tenant: h.Tenant, CreatedAt: h.CreatedAt, Keys: h.Keys, Bytes: size}, nil
}

// upgrade reads a checkpoint file written before files had a header line
// (info is what it was when opened) and rewrites it with one, atomically,
// so that the next List reads only the header. A file that does not decode
// is left as it is, and reported.
func (s *Store) upgrade(id, path string, info os.FileInfo) (Meta, error) {
	body, err := s.readFile(path)
	if err != nil {
		return Meta{Bytes: int64(len(body))}, err
	}
	cp, err := decode(path, body)
	if err != nil {
		return Meta{Bytes: info.Size()}, err
	}
	if cp.ID != id {
		return Meta{Bytes: info.Size()}, fmt.Errorf("checkpoint file %s is corrupt: it holds checkpoint '%s'; delete it with checkpoint.delete", path, cp.ID)
	}
	meta := Meta{ID: id, Name: cp.Name, Tenant: cp.Tenant, CreatedAt: cp.CreatedAt, Keys: cp.Keys(), Bytes: int64(len(body))}
	data, err := withHeader(meta, body)
	if err != nil || int64(len(data)) > s.maxBytes {
		return meta, nil // listed from its state each time, as before headers
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now, err := os.Stat(path); err != nil || !os.SameFile(now, info) || now.Size() != info.Size() {
		return meta, nil // deleted or replaced meanwhile: nothing to upgrade
	}
	if err := atomicfile.Write(path, data); err != nil {
		return meta, nil // still readable without its header; the next List tries again
	}
	meta.Bytes = int64(len(data))
	return meta, nil
}

// Delete removes a checkpoint.
func (s *Store) Delete(id string) error {
	path, err := s.path(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint '%s': %w (see checkpoint.list)", id, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("delete checkpoint %s: %w", path, err)
	}
	return atomicfile.SyncDir(s.dir)
}

// ids are the checkpoint ids in the directory; temp files are not.
func (s *Store) ids() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint directory %s: %w", s.dir, err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && e.Type().IsRegular() && idPattern.MatchString(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
