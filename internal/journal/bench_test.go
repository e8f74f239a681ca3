package journal

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkAppend measures durable appends with 1, 16 and 64 concurrent
// writers. ns/op is per record; compare records/s across writer counts: with
// group commit, 64 writers share fsyncs.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			j, _, err := Open(filepath.Join(b.TempDir(), "j.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			var writes atomic.Int64
			j.mu.Lock()
			j.writing = func(int) { writes.Add(1) }
			j.mu.Unlock()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if err := j.Append(rec(fmt.Sprint("k", i), "put", int(i))); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(b.N)/float64(writes.Load()), "records/write")
		})
	}
}

// BenchmarkReplayMillion measures opening a journal of one million records.
func BenchmarkReplayMillion(b *testing.B) {
	path := filepath.Join(b.TempDir(), "j.jsonl")
	j, _, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	j.minDead = 1 << 30
	const n = 1_000_000
	batch := make([]byte, 0, 64<<20)
	for i := 0; i < n; i++ {
		batch = append(batch, rec(fmt.Sprint("k", i), "put", i)...)
		batch = append(batch, '\n')
	}
	j.f.Write(batch)
	j.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j, rep, err := Open(path)
		if err != nil || rep.Live != n {
			b.Fatal(err, rep)
		}
		j.Close()
	}
}

// BenchmarkAppendABatchOfLines appends a chain of 300's events (603 lines
// of about 500 bytes, the event log's batch when a reply waits) to an
// append-only journal, as the lines of AppendBatch (each read for its key
// and copied) and as one buffer of AppendLines. Each op is one write and
// one fsync; allocations and bytes per op are the part the disk does not
// move.
func BenchmarkAppendABatchOfLines(b *testing.B) {
	const n = 603
	pad := strings.Repeat("x", 440)
	var buf []byte
	recs := make([][]byte, n)
	for i := range n {
		at := len(buf)
		buf = fmt.Appendf(buf, `{"key":"e","op":"event","seq":%d,"data":%q}`, i, pad)
		recs[i] = buf[at:len(buf):len(buf)]
		buf = append(buf, '\n')
	}
	for _, c := range []struct {
		name   string
		append func(j *Journal) error
	}{
		{"AppendBatch", func(j *Journal) error { return j.AppendBatch(recs) }},
		{"AppendLines", func(j *Journal) error { return j.AppendLines(buf, n) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			j, _, err := Open(filepath.Join(b.TempDir(), "log.jsonl"), AppendOnly())
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if err := c.append(j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
