package file

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// Messages remembers which messaging idempotency keys were delivered,
// durably, so a repeat — in this run or after a restart — is not sent
// again. The first delivery recorded for a key stays. Its methods fail only
// when the journal does.
type Messages struct {
	j    *journal.Journal
	gate keyGate // the check for an earlier receipt and the append are one step
}

var _ store.Messages = (*Messages)(nil)

// sent is one journal line: a delivery.
type sent struct {
	Op        string    `json:"op"`
	Key       string    `json:"key"`
	Channel   string    `json:"channel"`
	MessageID *string   `json:"message_id,omitempty"`
	At        time.Time `json:"at"`
}

// OpenMessages replays the ledger at path.
func OpenMessages(path string, opts ...journal.Option) (*Messages, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Messages{j: j}, rep, nil
}

// Delivered returns the receipt of an earlier delivery under key.
func (l *Messages) Delivered(_ context.Context, key string) (store.Receipt, bool, error) {
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

// Record stores a delivery durably, unless an earlier delivery of key is
// recorded (that one stays); it returns after the fsync.
func (l *Messages) Record(ctx context.Context, key string, r store.Receipt) error {
	b, err := json.Marshal(sent{Op: "sent", Key: key, Channel: r.Channel, MessageID: r.MessageID, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	leave, err := l.gate.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("record the delivery of message key %s: %w", key, err)
	}
	defer leave()
	if _, ok := l.j.Get(key); ok {
		return nil
	}
	return l.j.Append(b)
}

// Close closes the journal.
func (l *Messages) Close() error { return l.j.Close() }
