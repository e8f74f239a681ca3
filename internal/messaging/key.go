package messaging

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Key scopes an idempotency key to its tenant.
func Key(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s", tenant, idempotencyKey)))
	return hex.EncodeToString(sum[:])
}
