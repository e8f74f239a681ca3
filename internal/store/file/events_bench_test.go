package file

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// BenchmarkEventsMillion writes a log of 1,000,000 events (proposals of
// 10 events, 200 bytes of data each; about 540 MB), then measures what a
// restart costs (OpenEvents: every sealed segment's index read, the newest
// segment scanned) and a query by one proposal. Run it alone:
//
//	go test -run '^$' -bench EventsMillion -benchtime 1x ./internal/store/file/
func BenchmarkEventsMillion(b *testing.B) {
	const events, perProposal = 1_000_000, 10
	dir := b.TempDir()
	cfg := func() EventsConfig {
		return EventsConfig{Dir: filepath.Join(dir, "events"), KeyPath: filepath.Join(dir, "audit-key"), Node: "n1", MaxAge: 100 * 365 * 24 * time.Hour}
	}
	e, err := OpenEvents(cfg())
	if err != nil {
		b.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	pad := make([]byte, 200)
	for i := range pad {
		pad[i] = 'x'
	}
	prev := ""
	for seq := uint64(1); seq <= events; seq++ {
		h := testHash(seq, prev, pad)
		body := fmt.Appendf(nil, `{"seq":%d,"node":"n1","kind":"action_succeeded","data":{"pad":%q},"prev_hash":%q,"hash":%q}`, seq, pad, prev, h)
		e.Append(store.EventRecord{Node: "n1", Seq: seq, At: base.Add(time.Duration(seq) * time.Millisecond), Kind: "action_succeeded",
			ProposalID: fmt.Sprint("p", (seq-1)/perProposal), Hash: h, PrevHash: prev, Body: body})
		prev = h
		if seq%10_000 == 0 {
			if err := e.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var open, query time.Duration
	for range b.N {
		start := time.Now()
		e, err := OpenEvents(cfg())
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(start)
		start = time.Now()
		recs, err := e.Query(context.Background(), store.EventFilter{ProposalID: "p4321"})
		query += time.Since(start)
		if err != nil || len(recs) != perProposal {
			b.Fatalf("query by proposal: %d records, %v", len(recs), err)
		}
		if st := e.Stats(); st.Events != events {
			b.Fatalf("%d events after the restart", st.Events)
		}
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(open.Milliseconds())/float64(b.N), "ms/open")
	b.ReportMetric(float64(query.Microseconds())/float64(b.N), "µs/query-by-proposal")
}
