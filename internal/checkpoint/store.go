package checkpoint

import (
	"bytes"
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

// Store is the checkpoint directory.
type Store struct {
	dir      string
	maxCount int
	maxBytes int64

	mu sync.Mutex // one save or delete at a time, so the count bound holds
}

// Open creates dir (0700) if needed. maxCount and maxBytes bound the number
// of checkpoints kept and the size of one file.
func Open(dir string, maxCount int, maxBytes int64) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create checkpoint directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict checkpoint directory %s to its owner: %w", dir, err)
	}
	return &Store{dir: dir, maxCount: maxCount, maxBytes: maxBytes}, nil
}

// Dir is where the checkpoint files are.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("checkpoint id '%s' is not one this daemon issues (see checkpoint.list)", id)
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// Save writes cp atomically: a temp file in the directory, fsynced, renamed
// over <id>.json, and the directory fsynced.
func (s *Store) Save(cp *Checkpoint) (Meta, error) {
	path, err := s.path(cp.ID)
	if err != nil {
		return Meta{}, err
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return Meta{}, fmt.Errorf("encode checkpoint: %w", err)
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
	return Meta{ID: cp.ID, Name: cp.Name, Tenant: cp.Tenant, CreatedAt: cp.CreatedAt, Keys: cp.Keys(), Bytes: int64(len(data))}, nil
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

// read decodes the file at path, numbers as json.Number like every value
// the daemon holds.
func (s *Store) read(path string) (*Checkpoint, int64, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.maxBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read checkpoint file %s: %w", path, err)
	}
	size := int64(len(data))
	if size > s.maxBytes {
		return nil, size, fmt.Errorf("checkpoint file %s is larger than max_checkpoint_bytes (%d); raise the limit or delete it", path, s.maxBytes)
	}
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&cp); err != nil {
		return nil, size, fmt.Errorf("checkpoint file %s is corrupt: %v; delete it with checkpoint.delete", path, err)
	}
	if dec.More() || cp.ID == "" || cp.State == nil {
		return nil, size, fmt.Errorf("checkpoint file %s is corrupt: not one checkpoint with checkpoint_id and state; delete it with checkpoint.delete", path)
	}
	return &cp, size, nil
}

// List describes every checkpoint, oldest first; a corrupt file is listed
// with the reason rather than hidden.
func (s *Store) List() ([]Meta, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	out := make([]Meta, 0, len(ids))
	for _, id := range ids {
		path := filepath.Join(s.dir, id+".json")
		cp, size, err := s.read(path)
		if err != nil {
			out = append(out, Meta{ID: id, Bytes: size, Corrupt: err.Error()})
			continue
		}
		out = append(out, Meta{ID: id, Name: cp.Name, Tenant: cp.Tenant, CreatedAt: cp.CreatedAt, Keys: cp.Keys(), Bytes: size})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, nil
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
