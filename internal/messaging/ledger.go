package messaging

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
)

// Ledger remembers which idempotency keys were delivered, durably, so a
// repeat — in this run or after a restart — is not sent again.
type Ledger struct{ j *journal.Journal }

type sent struct {
	Op        string    `json:"op"`
	Key       string    `json:"key"`
	Channel   string    `json:"channel"`
	MessageID *string   `json:"message_id,omitempty"`
	At        time.Time `json:"at"`
}

// OpenLedger replays the ledger at path.
func OpenLedger(path string, opts ...journal.Option) (*Ledger, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Ledger{j: j}, rep, nil
}

// Key scopes an idempotency key to its tenant.
func Key(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s", tenant, idempotencyKey)))
	return hex.EncodeToString(sum[:])
}

// Delivered returns the receipt of an earlier delivery under key.
func (l *Ledger) Delivered(key string) (Receipt, bool) {
	b, ok := l.j.Get(key)
	if !ok {
		return Receipt{}, false
	}
	var s sent
	if err := json.Unmarshal(b, &s); err != nil {
		return Receipt{}, false
	}
	return Receipt{Channel: s.Channel, MessageID: s.MessageID}, true
}

// Record stores a delivery durably; it returns after the fsync.
func (l *Ledger) Record(key string, r Receipt) error {
	b, err := json.Marshal(sent{Op: "sent", Key: key, Channel: r.Channel, MessageID: r.MessageID, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	return l.j.Append(b)
}

// Close closes the journal.
func (l *Ledger) Close() error { return l.j.Close() }
