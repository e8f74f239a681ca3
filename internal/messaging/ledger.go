package messaging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// Ledger remembers which idempotency keys were delivered, durably, so a
// repeat — in this run or after a restart — is not sent again. It is the
// file store's store.Messages; its methods fail only when the journal does.
type Ledger struct{ j *journal.Journal }

var _ store.Messages = (*Ledger)(nil)

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
func (l *Ledger) Delivered(_ context.Context, key string) (store.Receipt, bool, error) {
	b, ok := l.j.Get(key)
	if !ok {
		return store.Receipt{}, false, nil
	}
	var s sent
	if err := json.Unmarshal(b, &s); err != nil {
		return store.Receipt{}, false, nil
	}
	return store.Receipt{Channel: s.Channel, MessageID: s.MessageID}, true, nil
}

// Record stores a delivery durably; it returns after the fsync.
func (l *Ledger) Record(_ context.Context, key string, r store.Receipt) error {
	b, err := json.Marshal(sent{Op: "sent", Key: key, Channel: r.Channel, MessageID: r.MessageID, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	return l.j.Append(b)
}

// Close closes the journal.
func (l *Ledger) Close() error { return l.j.Close() }
