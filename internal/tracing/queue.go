package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/metrics"
)

// The queue's counters in /metrics.
var (
	spansExported = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "car_trace_spans_exported_total", Help: "Spans the trace exporter delivered to the collector.",
	})
	spansDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_trace_spans_dropped_total", Help: "Spans not delivered: queue_full (the export queue was full) or export_failed (the collector did not take them).",
	}, []string{"reason"})
)

func init() { metrics.Registry.MustRegister(spansExported, spansDropped) }

// Reasons a span is dropped, the label of car_trace_spans_dropped_total.
const (
	DropQueueFull    = "queue_full"
	DropExportFailed = "export_failed"
)

// Timing of the queue; a test may shorten them.
var (
	exportInterval = time.Second      // how long an ended span may wait for a batch to fill
	exportTimeout  = 10 * time.Second // one export's deadline
	warnEvery      = time.Minute      // at most one warning per this
)

// queue is the span processor between the spans and the exporter: OnEnd
// never blocks (a full queue drops the span and counts it), and one
// goroutine exports batches, one attempt each under exportTimeout. The
// SDK's batch processor drops the same way but does not say how many, and
// an operator must see drops in /metrics.
//
// The goroutine is woken once a batch's worth of spans is queued (kick),
// at each exportInterval, or by a flush, never per span: waking it for
// each ended span cost the proposal more than queueing it.
type queue struct {
	exp   sdktrace.SpanExporter
	spans chan sdktrace.ReadOnlySpan
	kick  chan struct{} // a batch is waiting; holds at most one wake-up
	batch int
	log   *zap.Logger

	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	exported, dropped atomic.Int64
	warn              warnLimiter
}

func newQueue(exp sdktrace.SpanExporter, size int, log *zap.Logger) *queue {
	q := &queue{
		exp:     exp,
		spans:   make(chan sdktrace.ReadOnlySpan, size),
		kick:    make(chan struct{}, 1),
		batch:   min(DefaultBatchSpans, size),
		log:     log,
		flushes: make(chan chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go q.loop()
	return q
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it when the queue is full.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case <-q.stop:
		q.drop(DropQueueFull, 1, nil)
		return
	default:
	}
	select {
	case q.spans <- s:
	default:
		q.drop(DropQueueFull, 1, nil)
		return
	}
	if len(q.spans) >= q.batch {
		select {
		case q.kick <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// ForceFlush exports what is queued, waiting at most until ctx ends.
func (q *queue) ForceFlush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case q.flushes <- done:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, waiting at most until ctx ends, and
// shuts the exporter down.
func (q *queue) Shutdown(ctx context.Context) error {
	q.once.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}

func (q *queue) loop() {
	defer close(q.done)
	tick := time.NewTicker(exportInterval)
	defer tick.Stop()
	batch := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	send := func() {
		if len(batch) > 0 {
			q.export(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	// take exports the queued spans in batches: every one with all, else
	// only full batches, leaving the rest queued.
	take := func(all bool) {
		for all || len(batch)+len(q.spans) >= q.batch {
			select {
			case s := <-q.spans:
				if batch = append(batch, s); len(batch) == q.batch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case <-q.kick:
			take(false)
		case <-tick.C:
			take(true)
		case done := <-q.flushes:
			take(true)
			close(done)
		case <-q.stop:
			take(true)
			return
		}
	}
}

// export makes one attempt at a batch; a failure drops it, counted.
func (q *queue) export(batch []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
	defer cancel()
	if err := q.exp.ExportSpans(ctx, batch); err != nil {
		q.drop(DropExportFailed, len(batch), err)
		return
	}
	q.exported.Add(int64(len(batch)))
	spansExported.Add(float64(len(batch)))
}

// drop counts n spans dropped and warns, at most once a minute.
func (q *queue) drop(reason string, n int, err error) {
	q.dropped.Add(int64(n))
	spansDropped.WithLabelValues(reason).Add(float64(n))
	if total, ok := q.warn.due(time.Now(), n); ok {
		fields := []zap.Field{zap.String("reason", reason), zap.Int64("dropped_since_last_warning", total)}
		if err != nil {
			fields = append(fields, zap.String("error", err.Error()))
		}
		q.log.Warn("trace spans dropped: the collector is slow or unreachable; proposals are not affected (car_trace_spans_dropped_total counts them)", fields...)
	}
}

// warnLimiter lets one warning through per warnEvery, counting what it
// held back.
type warnLimiter struct {
	mu      sync.Mutex
	last    time.Time
	pending int64
}

func (w *warnLimiter) due(now time.Time, n int) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending += int64(n)
	if !w.last.IsZero() && now.Sub(w.last) < warnEvery {
		return 0, false
	}
	w.last = now
	total := w.pending
	w.pending = 0
	return total, true
}
