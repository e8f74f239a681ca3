package postgres

import (
	"errors"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

func strp(s string) *string { return &s }

// The first delivery's receipt stays: a later Record does not overwrite
// it, and says which receipt won.
func TestMessagesFirstDeliveryWins(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ctx := ctxT(t)
	if _, ok, err := b.messages.Delivered(ctx, "k1"); ok || err != nil {
		t.Fatalf("an unknown key: %v %v", ok, err)
	}
	first := store.Receipt{Channel: "slack", MessageID: strp("m-1")}
	if err := a.Store().Messages.Record(ctx, "k1", first); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.messages.Delivered(ctx, "k1")
	if err != nil || !ok || got.Channel != "slack" || got.MessageID == nil || *got.MessageID != "m-1" {
		t.Fatalf("b reads %+v %v %v", got, ok, err)
	}
	held, won, err := b.messages.RecordFirst(ctx, "k1", store.Receipt{Channel: "email"})
	if err != nil || won || held.Channel != "slack" {
		t.Fatalf("a second delivery: held %+v won %v %v, want the first kept", held, won, err)
	}
	if err := b.messages.Record(ctx, "k2", store.Receipt{Channel: "email"}); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := a.messages.Delivered(ctx, "k2"); !ok || got.MessageID != nil || got.Channel != "email" {
		t.Fatalf("a receipt without a message id: %+v %v", got, ok)
	}
}

// Racing deliveries of one key on two daemons: exactly one wins, and every
// racer learns the winner's receipt.
func TestMessagesRacingDeliveries(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	dbs := []*DB{openNode(t, url, "a"), openNode(t, url, "b")}
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	helds := map[string]bool{}
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, won, err := dbs[i%2].messages.RecordFirst(ctx, "race", store.Receipt{Channel: string(rune('a' + i))})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if won {
				winners++
			}
			helds[held.Channel] = true
		}()
	}
	wg.Wait()
	if winners != 1 || len(helds) != 1 {
		t.Fatalf("%d winners, receipts reported %v: want one of each", winners, helds)
	}
}

func TestMessagesUnavailable(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	db := openNode(t, srv.NewDatabase(t), "a")
	ctx := ctxT(t)
	srv.Stop(t)
	if _, _, err := db.messages.Delivered(ctx, "k"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Delivered: %v", err)
	}
	if err := db.messages.Record(ctx, "k", store.Receipt{Channel: "c"}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Record: %v", err)
	}
}
