package auditlog

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeyIsCreatedOnceAndPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit-key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", st.Mode(), err)
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("a second start made another key: %v", err)
	}
	pub, err := ParsePublicKeyPEM(PublicKeyPEM(k1))
	if err != nil || !pub.Equal(k1.Public()) {
		t.Fatalf("the printed public key reads back as another: %v", err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key readable by others: %v", err)
	}
}

func TestSignaturesCoverEveryField(t *testing.T) {
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 1, 0, 0, 5, time.UTC)
	for _, op := range []string{OpHead, OpRetention} {
		l := Line{Op: op, Seq: 7, Hash: "h", PrevHash: "p", At: at, Node: "n"}
		Sign(&l, key)
		pub := key.Public().(ed25519.PublicKey)
		if !VerifySignature(&l, pub) {
			t.Fatalf("%s: its own signature does not verify", op)
		}
		for name, edit := range map[string]func(*Line){
			"seq":  func(x *Line) { x.Seq++ },
			"time": func(x *Line) { x.At = x.At.Add(time.Nanosecond) },
			"node": func(x *Line) { x.Node = "m" },
			"op":   func(x *Line) { x.Op = map[string]string{OpHead: OpRetention, OpRetention: OpHead}[x.Op] },
			"hash": func(x *Line) { x.Hash, x.PrevHash = "x", "x" },
		} {
			c := l
			edit(&c)
			if VerifySignature(&c, pub) {
				t.Errorf("%s: a signature still verifies with its %s changed", op, name)
			}
		}
	}
}

func TestReadWitnessTakesHeadsAndEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	os.WriteFile(path, []byte(`{"seq":3,"hash":"a","time":"2026-12-02T01:00:00Z","node":"n","signature":"s1"}

{"seq":5,"kind":"audit.head","data":{"seq":5,"hash":"b","time":"2026-12-02T01:00:01Z","node":"n","signature":"s2"}}
{"cursor":9,"event":{"kind":"audit.head","data":{"seq":9,"hash":"c","time":"2026-12-02T01:00:02Z","node":"n","signature":"s3"}}}
`), 0o600)
	heads, err := ReadWitness(path)
	if err != nil || len(heads) != 3 || heads[0].Seq != 3 || heads[1].Hash != "b" || heads[2].Signature != "s3" {
		t.Fatalf("witness heads %+v %v", heads, err)
	}
	os.WriteFile(path, []byte(`{"seq":3}`+"\n"), 0o600)
	if _, err := ReadWitness(path); err == nil || !strings.Contains(err.Error(), "not a signed head") {
		t.Fatalf("an unsigned line: %v", err)
	}
}
