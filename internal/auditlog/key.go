package auditlog

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// LoadOrCreateKey reads the daemon's audit key at path, or creates one
// (0600) when there is none.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	key, err := LoadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create the audit key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("create the audit key: %w", err)
	}
	if err := atomicfile.Write(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, fmt.Errorf("create the audit key: %w", err)
	}
	return key, nil
}

// LoadKey reads the audit key at path (PKCS #8, PEM). A key readable by
// others than its owner is refused.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	b, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no audit key at %s: a daemon with store file creates it at its first start (is this the daemon's state root?): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read the audit key: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the audit key %s is readable by others (mode %v); make it 0600 (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("the audit key %s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the audit key %s does not parse: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the audit key %s is not an Ed25519 key", path)
	}
	return key, nil
}

// PublicKeyPEM is the public half of key as a PEM block (PKIX), as
// `car-server audit pubkey` prints it.
func PublicKeyPEM(key ed25519.PrivateKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(key.Public()) // an Ed25519 key always encodes
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ParsePublicKeyPEM reads a public key as PublicKeyPEM writes it.
func ParsePublicKeyPEM(b []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an Ed25519 public key")
	}
	return pub, nil
}
