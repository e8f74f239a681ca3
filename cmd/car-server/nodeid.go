package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// maxNodeID bounds a member id read from the node-id file.
const maxNodeID = 128

// nodeID returns the member id of this state root: the one kept at path,
// or a new one, written there (0600) before it is returned, so that a
// restarted daemon keeps its id. The caller holds the state root's lock.
// A new id is the host's name and 12 random hex digits, so an operator can
// tell the members apart and two hosts never collide.
func nodeID(path string) (string, error) {
	b, err := atomicfile.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !validNodeID(id) {
			return "", fmt.Errorf("%s does not hold a member id (%d bytes; want 1 to %d letters, digits, '.', '_' or '-'): remove it, and the daemon writes a new one (the old id then shows as a dead member until it is forgotten)", path, len(b), maxNodeID)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read the member id: %w", err)
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("generate a member id: %w", err)
	}
	id := hostLabel() + "-" + hex.EncodeToString(r[:])
	if err := atomicfile.Write(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("keep the member id: %w", err)
	}
	return id, nil
}

// hostLabel is the host's name cut to what a member id holds: lower-case
// letters, digits and '-', at most 32 of them; "car" when there is none.
func hostLabel() string {
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(strings.ToLower(h), ".")
	var sb strings.Builder
	for _, r := range h {
		if sb.Len() == 32 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			sb.WriteRune(r)
		}
	}
	if s := strings.Trim(sb.String(), "-"); s != "" {
		return s
	}
	return "car"
}

func validNodeID(id string) bool {
	if id == "" || len(id) > maxNodeID {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
