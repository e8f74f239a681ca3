package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen: any file either opens (and Verify agrees) or gives an error
// naming the file; an append to an opened journal survives a reopen.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{
		"",
		`{"key":"k0","op":"put","n":0}` + "\n",
		`{"key":"k0","op":"put","n":0}` + "\n" + `{"key":"k0","op":"tombstone"}` + "\n",
		`{"key":"k0","op":"put"}` + "\n" + `{"key":"k1","op":"put"`,
		"not json\n",
		`{"op":"put"}` + "\n",
		`{"key":"k0","op":"put"}` + "\n\x00\x00\x00\n" + `{"key":"k1","op":"put"}` + "\n",
		`{"key":"k0","op":"put"}` + "\n\x00\x00\x00\nnot json\n",
		`{"key":"k0","op":"put"}` + "\nnot json\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		_, verr := Verify(path)
		j, _, err := Open(path)
		if err != nil {
			if verr == nil {
				t.Fatalf("Verify accepted %q but Open refused it: %v", content, err)
			}
			return
		}
		rec := []byte(`{"key":"fuzz","op":"put","v":1}`)
		if err := j.Append(rec); err != nil {
			j.Close()
			t.Fatalf("append to an opened journal: %v", err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j2, _, err := Open(path)
		if err != nil {
			t.Fatalf("reopen after an append: %v", err)
		}
		defer j2.Close()
		if got, ok := j2.Get("fuzz"); !ok || !bytes.Equal(got, rec) {
			t.Fatalf("the appended record did not survive a reopen: %q %v", got, ok)
		}
	})
}

// FuzzHeader: the fast decoder of a record's key and op reads every line it
// accepts exactly as encoding/json does, and parse (the fast decoder, else
// encoding/json) gives encoding/json's answer, error included, for any line.
func FuzzHeader(f *testing.F) {
	for _, line := range commonRecords(f) {
		f.Add(line)
	}
	for _, line := range append(fastCases, slowCases...) {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		sameAsJSON(t, line)
	})
}
