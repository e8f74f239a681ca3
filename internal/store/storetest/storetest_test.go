package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

const testTimeout = 10 * time.Second

func TestBusDeliversInOrderUntilCancel(t *testing.T) {
	b := NewBus()
	got := make(chan string, 100)
	cancel := b.Subscribe("t", func(p []byte) { got <- string(p) })
	other := b.Subscribe("u", func(p []byte) { t.Errorf("topic u got %q", p) })
	defer other()
	for _, p := range []string{"1", "2", "3"} {
		if err := b.Publish(context.Background(), "t", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"1", "2", "3"} {
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("got %q, want %q", p, want)
			}
		case <-time.After(testTimeout):
			t.Fatalf("%q never arrived", want)
		}
	}
	cancel()
	cancel() // a second cancel does nothing
	_ = b.Publish(context.Background(), "t", []byte("after"))
	if len(got) != 0 {
		t.Fatalf("delivered after cancel: %q", <-got)
	}
}

func TestEventsSelectsTheNewestAndFailsWhenDown(t *testing.T) {
	f := NewEvents(nil)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, node := range []string{"a", "b", "a", "b", "a"} {
		f.Append(store.EventRecord{Node: node, Seq: uint64(i/2 + 1), At: at.Add(time.Duration(i) * time.Second), Kind: "k", Hash: node + string(rune('0'+i))})
	}
	ctx := context.Background()
	got, err := f.Query(ctx, store.EventFilter{Node: "a", Limit: 2})
	if err != nil || len(got) != 2 || got[0].Hash != "a2" || got[1].Hash != "a4" {
		t.Fatalf("newest two of a, oldest first: %+v, %v", got, err)
	}
	if got, _ := f.Query(ctx, store.EventFilter{Since: at.Add(time.Second), Until: at.Add(3 * time.Second)}); len(got) != 2 {
		t.Fatalf("since is inclusive, until exclusive: %+v", got)
	}
	recs, next, err := f.Since(ctx, 3, 10, "")
	if err != nil || len(recs) != 2 || next != 5 {
		t.Fatalf("since 3: %d records, next %d, %v", len(recs), next, err)
	}
	if recs, next, err := f.Since(ctx, 0, 10, "a"); err != nil || len(recs) != 2 || recs[0].Hash != "b1" || recs[1].Hash != "b3" || next != 5 {
		t.Fatalf("since 0 skipping a: %+v, next %d, %v; want b1, b3 and past a4", recs, next, err)
	}
	if recs, next, err := f.Since(ctx, 0, 1, "a"); err != nil || len(recs) != 1 || recs[0].Hash != "b1" || next != 2 {
		t.Fatalf("one record skipping a: %+v, next %d, %v; want b1, next 2", recs, next, err)
	}
	if seq, hash, _ := f.LastOf(ctx, "b"); seq != 2 || hash != "b3" {
		t.Fatalf("last of b: %d %q", seq, hash)
	}
	f.SetUnavailable(true)
	if _, err := f.Count(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("count while down: %v", err)
	}
}
