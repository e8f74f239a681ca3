package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// Key is the cache key of a call: tenant, tool, and the explicit key when
// given, else the canonical JSON of the parameters.
func Key(tenant, tool string, params any, explicit string) string {
	h := sha256.New()
	if explicit != "" {
		fmt.Fprintf(h, "explicit\x00%s\x00%s\x00%s", tenant, tool, explicit)
	} else {
		fmt.Fprintf(h, "params\x00%s\x00%s\x00", tenant, tool)
		h.Write(jsonvalue.Canonical(params))
	}
	return hex.EncodeToString(h.Sum(nil))
}
