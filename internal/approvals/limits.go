package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// The bounds of an approval's limits (docs/security.md, what a request may
// cost): an expiry within a year, and a use count within a million.
const (
	MaxExpiresIn = 365 * 24 * 3600 // seconds
	MaxUses      = 1_000_000
)

// CheckLimits refuses limits out of range, and any limit on a rejection.
func CheckLimits(l protocol.Limits, approved bool) error {
	if !approved && (l.ExpiresIn != 0 || l.Uses != 0) {
		return fmt.Errorf("a rejection takes neither expires_in nor uses: drop them")
	}
	if l.ExpiresIn < 0 || l.ExpiresIn > MaxExpiresIn {
		return fmt.Errorf("param 'expires_in' is %d; it must be 1 to %d seconds, or omitted for no expiry", l.ExpiresIn, MaxExpiresIn)
	}
	if l.Uses < 0 || l.Uses > MaxUses {
		return fmt.Errorf("param 'uses' is %d; it must be 1 to %d, or omitted for unlimited uses", l.Uses, MaxUses)
	}
	return nil
}

// Live reports whether r still counts at now: a rejection always does, an
// approval until it expires or its uses are spent.
func Live(r Record, now time.Time) bool {
	if r.Decision != Approved {
		return true
	}
	if r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) {
		return false
	}
	return r.Uses == 0 || r.Used < r.Uses
}

// Operation fills r's description of the operation a decides: its type,
// tool and the digest of its canonical parameters.
func Operation(r *Record, a *protocol.Action) {
	r.Type, r.Tool = string(a.Type), a.Tool
	sum := sha256.Sum256(jsonvalue.Canonical(a.Parameters))
	r.ParamsDigest = hex.EncodeToString(sum[:])
}
