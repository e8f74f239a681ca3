package storetest

import (
	"fmt"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
)

func receipt(channel, id string) store.Receipt {
	r := store.Receipt{Channel: channel}
	if id != "" {
		r.MessageID = &id
	}
	return r
}

// show is a receipt as a failure names it.
func show(r store.Receipt) string {
	if r.MessageID == nil {
		return r.Channel + " (no message id)"
	}
	return r.Channel + " " + *r.MessageID
}

func sameReceipt(a, b store.Receipt) bool {
	if a.Channel != b.Channel || (a.MessageID == nil) != (b.MessageID == nil) {
		return false
	}
	return a.MessageID == nil || *a.MessageID == *b.MessageID
}

func delivered(t *testing.T, m store.Messages, key string) (store.Receipt, bool) {
	t.Helper()
	r, ok, err := m.Delivered(ctx(t), key)
	if err != nil {
		t.Fatalf("Delivered(%s): %v", key, err)
	}
	return r, ok
}

func testMessages(t *testing.T, open Open, opts Options) {
	t.Run("RecordDeliveredAgain", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		m := d.Messages
		if _, ok := delivered(t, m, "k1"); ok {
			t.Fatal("a key never recorded was delivered")
		}
		first, noID := receipt("slack", "m-1"), receipt("email", "")
		for key, r := range map[string]store.Receipt{"k1": first, "k2": noID} {
			if err := m.Record(ctx(t), key, r); err != nil {
				t.Fatal(err)
			}
			if got, ok := delivered(t, m, key); !ok || !sameReceipt(got, r) {
				t.Fatalf("Delivered(%s) = %s %v, want %s", key, show(got), ok, show(r))
			}
		}
		again := receipt("slack", "m-2")
		if err := m.Record(ctx(t), "k1", again); err != nil {
			t.Fatal(err)
		}
		want := first // the first delivery's receipt stays
		if got, _ := delivered(t, m, "k1"); !sameReceipt(got, want) {
			t.Fatalf("after a second Record of k1, Delivered = %s, want %s", show(got), show(want))
		}
		d = b.restart(d)
		if got, ok := delivered(t, d.Messages, "k1"); !ok || !sameReceipt(got, want) {
			t.Fatalf("after a restart, Delivered(k1) = %s %v, want %s", show(got), ok, show(want))
		}
		if got, ok := delivered(t, d.Messages, "k2"); !ok || !sameReceipt(got, noID) {
			t.Fatalf("after a restart, Delivered(k2) = %s %v, want %s", show(got), ok, show(noID))
		}
	})

	// Deliveries of one key that race: each Record succeeds and the key
	// ends with one of their receipts, which a later Record, in this run or
	// after a restart, does not replace.
	t.Run("RacingRecordsOfOneKey", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		m := d.Messages
		errs := make([]error, racers)
		race(racers, func(i int) { errs[i] = m.Record(ctx(t), "k", receipt("slack", fmt.Sprint(i))) })
		for i, err := range errs {
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		got, ok := delivered(t, m, "k")
		if !ok || got.Channel != "slack" || got.MessageID == nil {
			t.Fatalf("after the race Delivered = %s %v", show(got), ok)
		}
		var n int
		if _, err := fmt.Sscan(*got.MessageID, &n); err != nil || n < 0 || n >= racers {
			t.Fatalf("after the race the receipt is %q, none of the racers'", *got.MessageID)
		}
		if err := m.Record(ctx(t), "k", receipt("slack", "late")); err != nil {
			t.Fatal(err)
		}
		d = b.restart(d)
		if after, ok := delivered(t, d.Messages, "k"); !ok || !sameReceipt(after, got) {
			t.Fatalf("a later Record and a restart left %s, want the race's winner %s", show(after), show(got))
		}
	})
}
