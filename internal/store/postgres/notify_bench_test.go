package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

// BenchmarkIdempotencyCommitsAnnounced claims and commits fresh keys on one
// daemon from 1 and 8 goroutines per CPU (2 and 16 on two cores), while
// another daemon listens to the idempotency topic; it reports the share of
// the commits whose notification reached the listener (1 when none was
// dropped) beside the claim+commit time. Point CAR_TEST_POSTGRES_URL at a
// server with fsync on to see what a durable server does to them.
func BenchmarkIdempotencyCommitsAnnounced(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			url := pgtest.URL(b)
			db, listener := benchOpen(b, url, "a"), benchOpen(b, url, "b")
			var got atomic.Int64
			listening := make(chan struct{}, 1)
			cancel := listener.bus.Subscribe(idemTopic, func(p []byte) {
				if p == nil {
					select {
					case listening <- struct{}{}:
					default:
					}
					return
				}
				got.Add(1)
			})
			defer cancel()
			select {
			case <-listening:
			case <-time.After(30 * time.Second):
				b.Fatal("the listener never listened")
			}
			ctx := context.Background()
			var keys atomic.Int64
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Sprint("k", keys.Add(1))
					_, _, c, err := db.idem.Begin(ctx, key, "charge", "p")
					if err != nil {
						b.Error(err)
						return
					}
					if err := c.Commit(ctx, map[string]any{"ok": true}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			// Notifications are eventual: give the last ones a bounded while.
			for deadline := time.Now().Add(5 * time.Second); got.Load() < keys.Load() && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			b.ReportMetric(float64(got.Load())/float64(keys.Load()), "announced/commit")
		})
	}
}

func benchOpen(b *testing.B, url, node string) *DB {
	b.Helper()
	db, err := Open(context.Background(), Config{URL: url, Node: node})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}
