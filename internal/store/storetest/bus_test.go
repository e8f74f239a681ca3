package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestEverySubscriptionGetsEveryPayloadInOrder(t *testing.T) {
	b := NewBus()
	got := [2]chan string{make(chan string, 100), make(chan string, 100)}
	for i := range got {
		cancel := b.Subscribe("t", func(p []byte) { got[i] <- string(p) })
		defer cancel()
	}
	other := b.Subscribe("other", func(p []byte) { t.Errorf("another topic's subscriber got %s", p) })
	defer other()
	var want []string
	for i := range 50 {
		want = append(want, fmt.Sprint(i))
		if err := b.Publish(context.Background(), "t", []byte(want[i])); err != nil {
			t.Fatal(err)
		}
	}
	for i := range got {
		var seen []string
		for range want {
			select {
			case p := <-got[i]:
				seen = append(seen, p)
			case <-time.After(10 * time.Second):
				t.Fatalf("subscription %d got %v", i, seen)
			}
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("subscription %d got %v", i, seen)
		}
	}
}

func TestPublishRefusesWhatANotificationCannotCarryAndAFailingStore(t *testing.T) {
	b := NewBus()
	if err := b.Publish(context.Background(), "t", make([]byte, MaxPayload+1)); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("an oversized payload: %v", err)
	}
	b.Fail(errors.New("connection refused"))
	if err := b.Publish(context.Background(), "t", nil); err == nil {
		t.Fatal("a failing bus published")
	}
	b.Fail(nil)
	if err := b.Publish(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
}

func TestCancelStopsDelivery(t *testing.T) {
	b := NewBus()
	calls := make(chan struct{}, 10)
	cancel := b.Subscribe("t", func([]byte) { calls <- struct{}{} })
	if err := b.Publish(context.Background(), "t", []byte("x")); err != nil {
		t.Fatal(err)
	}
	<-calls
	cancel() // returns once the subscription's goroutine has
	if err := b.Publish(context.Background(), "t", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if n := len(calls); n != 0 {
		t.Fatalf("%d calls after cancel", n)
	}
}
