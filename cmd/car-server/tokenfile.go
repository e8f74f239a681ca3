package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// ensureDir creates dir (and parents) and makes it 0700.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict %s to its owner: %w", dir, err)
	}
	return nil
}

// writeTokenFile publishes the token at path, 0600 in a 0700 directory,
// replacing any stale file atomically.
func writeTokenFile(path, token string) error {
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return err
	}
	if err := atomicfile.Write(path, []byte(token)); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	return nil
}
