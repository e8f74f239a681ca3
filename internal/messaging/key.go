package messaging

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/parslee-ai/car-server/internal/idempotency"
)

// ScopedKey is the dedup key of an idempotency_key sent by agent ("" for
// the plain principal every plain client shares) in tenant: the
// idempotency key of that explicit key for the built-in tool, so one
// principal can never mark another's message as delivered. The built-in's
// schema is the daemon's own and no registered tool may take its name, so
// its digest is left out: a daemon whose messaging schema grows still
// finds the keys its predecessor recorded.
func ScopedKey(agent, tenant, idempotencyKey string) string {
	return idempotency.Scope{Agent: agent, Tenant: tenant, Tool: ToolName}.Key(nil, idempotencyKey)
}

// Key is the dedup key an older daemon recorded, scoped to the tenant
// only. Its deliveries belong to the plain principal: the engine reads
// them back under this key for plain clients only.
func Key(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s", tenant, idempotencyKey)))
	return hex.EncodeToString(sum[:])
}
