package tracing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeExporter fails every export, or holds each until released.
type fakeExporter struct {
	fail      error
	exporting chan struct{} // receives one value per export begun, when set
	release   chan struct{} // an export waits for it, when set
	mu        sync.Mutex
	got       int
}

func (e *fakeExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.exporting != nil {
		e.exporting <- struct{}{}
	}
	if e.release != nil {
		<-e.release
	}
	if e.fail != nil {
		return e.fail
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *fakeExporter) Shutdown(context.Context) error { return nil }

func endSpans(tp *sdktrace.TracerProvider, n int) {
	for range n {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
}

func TestQueueCountsFailedExportsAndWarnsOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	exp := &fakeExporter{fail: errors.New("connection refused")}
	q := newQueue(exp, 16, zap.New(core))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	before := testutil.ToFloat64(spansDropped.WithLabelValues(DropExportFailed))

	endSpans(tp, 3)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(tp, 2)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := q.dropped.Load(); got != 5 {
		t.Fatalf("dropped %d spans, want 5", got)
	}
	if got := testutil.ToFloat64(spansDropped.WithLabelValues(DropExportFailed)) - before; got != 5 {
		t.Fatalf("car_trace_spans_dropped_total{reason=export_failed} rose by %v, want 5", got)
	}
	if n := logs.FilterMessageSnippet("trace spans dropped").Len(); n != 1 {
		t.Fatalf("%d warnings within a minute, want 1", n)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestQueueDropsWhenFullWithoutBlocking(t *testing.T) {
	exp := &fakeExporter{exporting: make(chan struct{}, 1), release: make(chan struct{})}
	q := newQueue(exp, 2, zap.NewNop())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	before := testutil.ToFloat64(spansDropped.WithLabelValues(DropQueueFull))

	endSpans(tp, 1)
	flushed := make(chan error, 1)
	go func() { flushed <- tp.ForceFlush(context.Background()) }()
	select { // the exporter now holds the first span; the queue is empty
	case <-exp.exporting:
	case <-time.After(10 * time.Second):
		t.Fatal("the first export never began")
	}
	endSpans(tp, 2) // fill the queue (capacity 2)
	endSpans(tp, 3) // and past it: each returns at once, dropped
	if got := q.dropped.Load(); got != 3 {
		t.Fatalf("dropped %d spans, want 3", got)
	}
	if got := testutil.ToFloat64(spansDropped.WithLabelValues(DropQueueFull)) - before; got != 3 {
		t.Fatalf("car_trace_spans_dropped_total{reason=queue_full} rose by %v, want 3", got)
	}
	close(exp.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.got != 3 || q.exported.Load() != 3 {
		t.Fatalf("exported %d (counted %d), want the 3 that fit", exp.got, q.exported.Load())
	}
}

// A batch's worth of queued spans is exported at once, not at the next
// interval; fewer wait for it (or a flush).
func TestQueueExportsAFullBatchWithoutWaiting(t *testing.T) {
	interval := exportInterval
	exportInterval = time.Hour
	t.Cleanup(func() { exportInterval = interval })
	exp := &fakeExporter{exporting: make(chan struct{}, 4)}
	q := newQueue(exp, 4, zap.NewNop()) // a batch is the whole queue: 4
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	defer tp.Shutdown(context.Background())

	endSpans(tp, 3)
	endSpans(tp, 1) // the fourth fills a batch
	select {
	case <-exp.exporting:
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch was not exported before the interval")
	}
	endSpans(tp, 2)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	got := exp.got
	exp.mu.Unlock()
	if got != 6 || q.exported.Load() != 6 {
		t.Fatalf("exported %d (counted %d), want 6", got, q.exported.Load())
	}
}

func TestWarnLimiterOncePerInterval(t *testing.T) {
	var w warnLimiter
	t0 := time.Unix(1000, 0)
	if n, ok := w.due(t0, 2); !ok || n != 2 {
		t.Fatalf("first: %d %v", n, ok)
	}
	if _, ok := w.due(t0.Add(warnEvery-time.Nanosecond), 3); ok {
		t.Fatal("a second warning within the interval")
	}
	if n, ok := w.due(t0.Add(warnEvery), 4); !ok || n != 7 {
		t.Fatalf("after the interval: %d %v, want the 7 held back", n, ok)
	}
}
