package store

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// HashToken is what a store keeps of an agent's token: its SHA-256, in
// hex. The tokens are 256-bit random values, so a fast hash is enough.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// VerifyHash reports whether token hashes to hash, in constant time.
func VerifyHash(hash, token string) bool {
	return subtle.ConstantTimeCompare([]byte(hash), []byte(HashToken(token))) == 1
}
