package file

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/store"
)

// peopleFile is the people token file: per person, the SHA-256 of their
// host-role token (256-bit random values, so a fast hash is enough).
type peopleFile struct {
	People map[string]personEntry `json:"people"`
}

type personEntry struct {
	SHA256   string    `json:"sha256"`
	IssuedAt time.Time `json:"issued_at"`
}

// peopleStore is PeopleFile.
type peopleStore struct{ path string }

// PeopleFile is the store.People of a single daemon: the people token
// file at path (0600, hashes only), re-read on every Identify and changed
// under path + ".lock", like the agent token file.
func PeopleFile(path string) store.People { return peopleStore{path: path} }

func (f peopleStore) read() (peopleFile, error) {
	pf := peopleFile{People: map[string]personEntry{}}
	b, err := atomicfile.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return pf, nil
	}
	if err != nil {
		return pf, fmt.Errorf("people token file %s: %w", f.path, err)
	}
	if err := json.Unmarshal(b, &pf); err != nil {
		return pf, fmt.Errorf("people token file %s is not valid JSON (%v); reissue the tokens with car-server people issue-token", f.path, err)
	}
	if pf.People == nil {
		pf.People = map[string]personEntry{}
	}
	return pf, nil
}

// change applies fn to the file under its lock and writes it back when fn
// reports a change.
func (f peopleStore) change(ctx context.Context, fn func(*peopleFile) bool) error {
	unlock, err := lockFile(ctx, f.path)
	if err != nil {
		return err
	}
	defer unlock()
	pf, err := f.read()
	if err != nil {
		return err
	}
	if !fn(&pf) {
		return nil
	}
	b, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(f.path, append(b, '\n'))
}

func (f peopleStore) Issue(ctx context.Context, name, token string) error {
	return f.change(ctx, func(pf *peopleFile) bool {
		pf.People[name] = personEntry{SHA256: store.HashToken(token), IssuedAt: time.Now().UTC()}
		return true
	})
}

func (f peopleStore) Revoke(ctx context.Context, name string) (bool, error) {
	revoked := false
	err := f.change(ctx, func(pf *peopleFile) bool {
		_, revoked = pf.People[name]
		delete(pf.People, name)
		return revoked
	})
	return revoked, err
}

func (f peopleStore) List(context.Context) ([]store.IssuedPerson, error) {
	pf, err := f.read()
	if err != nil {
		return nil, err
	}
	out := make([]store.IssuedPerson, 0, len(pf.People))
	for name, e := range pf.People {
		out = append(out, store.IssuedPerson{Name: name, IssuedAt: e.IssuedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Identify compares every entry, in constant time each, so the time taken
// says nothing of which matched.
func (f peopleStore) Identify(_ context.Context, token string) (string, bool, error) {
	pf, err := f.read()
	if err != nil {
		return "", false, err
	}
	hash := store.HashToken(token)
	var name string
	found := false
	for n, e := range pf.People {
		if subtle.ConstantTimeCompare([]byte(e.SHA256), []byte(hash)) == 1 && token != "" {
			name, found = n, true
		}
	}
	return name, found, nil
}
