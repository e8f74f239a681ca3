package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// AppendTraceparent writes what Inject gives, whatever the flags.
func TestAppendTraceparentIsInjects(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled, trace.FlagsRandom, 0xff} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 15: 0x36}, SpanID: trace.SpanID{0, 0xf0, 0x67, 7: 0xb7}, TraceFlags: flags,
		})
		want, _ := Inject(trace.ContextWithSpanContext(context.Background(), sc))
		if got := string(AppendTraceparent([]byte("x"), sc)); got != "x"+want {
			t.Errorf("flags %02x: %q, want x%q", byte(flags), got, want)
		}
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendTraceparent(buf[:0], sc) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
