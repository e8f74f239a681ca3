package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// ensureDir creates dir (and parents) and makes it 0700.
func ensureDir(dir string) error {
	if err := atomicfile.MkdirAll(dir); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict %s to its owner: %w", dir, err)
	}
	return nil
}

// writeTokenFile publishes the token at path, 0600 in a 0700 directory,
// replacing any stale file atomically; a symbolic link at path is refused.
func writeTokenFile(path, token string) error {
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return err
	}
	if err := atomicfile.Write(path, []byte(token)); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	return nil
}

// readTokenFile reads a token the daemon wrote; a missing or empty file, or
// a symbolic link at path, is an error that says what to do.
func readTokenFile(path string) (string, error) {
	b, err := atomicfile.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no token at %s: is the daemon running with this --home? (start it with car-server)", path)
	}
	if err != nil {
		return "", fmt.Errorf("read the token at %s: %w", path, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the token file %s is empty: restart the daemon to write a new one", path)
	}
	return t, nil
}
