package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/store"
)

// Harness keeps the harness config in one file, replaced atomically (a
// temporary file renamed over it), so a crash leaves the old document or
// the new one, never a torn one.
type Harness struct {
	mu   sync.Mutex
	path string
}

var _ store.Harness = (*Harness)(nil)

// NewHarness returns the harness config kept at path.
func NewHarness(path string) *Harness { return &Harness{path: path} }

func (h *Harness) Load(context.Context) (json.RawMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the harness config: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("the harness config %s is not JSON: fix or remove the file", h.path)
	}
	return b, nil
}

func (h *Harness) Save(_ context.Context, doc json.RawMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := atomicfile.Write(h.path, doc); err != nil {
		return fmt.Errorf("save the harness config: %w", err)
	}
	return nil
}
