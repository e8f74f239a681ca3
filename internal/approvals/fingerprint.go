package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Decisions a record can carry.
const (
	Approved = "approved"
	Rejected = "rejected"
)

// Record is one decision, as stored and as returned by permission.approve.
type Record = protocol.ApprovalRecord

// CheckDecision refuses a decision that is neither Approved nor Rejected;
// every ledger checks a record with it before storing it.
func CheckDecision(d string) error {
	if d != Approved && d != Rejected {
		return fmt.Errorf("decision must be %s or %s", Approved, Rejected)
	}
	return nil
}

// Fingerprint identifies an operation: its type, tool and canonical
// parameters. The action's id is not part of it, so the same operation in
// a later proposal has the same fingerprint.
func Fingerprint(a *protocol.Action) string {
	bp := fingerprintBuffers.Get()
	defer fingerprintBuffers.Put(bp)
	b := append(*bp, a.Type...)
	b = append(b, 0)
	b = append(b, a.Tool...)
	b = append(b, 0)
	if params, err := jsonvalue.Append(b, a.Parameters); err == nil {
		b = params
	} else {
		b = append(b, jsonvalue.Canonical(a.Parameters)...)
	}
	*bp = b
	sum := sha256.Sum256(b)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return string(text[:32])
}

// fingerprintBuffers hold what Fingerprint hashes, reused.
var fingerprintBuffers = bufpool.New(512, 64<<10)
