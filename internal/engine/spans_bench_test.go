package engine

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/protocol"
)

// discard is a span processor that keeps nothing: what starting and ending
// the spans costs, without an exporter.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkSpans is a 1,000-action proposal in process, tracing off and
// on (spans started and ended, none exported): the engine's own share of
// what tracing costs.
func BenchmarkSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
	for _, tc := range []struct {
		name   string
		tracer trace.Tracer
	}{{"off", nil}, {"on", tp.Tracer("bench")}} {
		b.Run(tc.name, func(b *testing.B) {
			rt, s := openBench(b, Options{Tracer: tc.tracer})
			actions := make([]protocol.Action, 1000)
			for i := range actions {
				actions[i] = protocol.Action{ID: fmt.Sprintf("a%d", i), Type: protocol.ActionToolCall, Tool: "t", Parameters: map[string]any{"i": i}}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p := &protocol.ActionProposal{ID: "p", Actions: actions}
				if _, err := rt.Submit(context.Background(), &Submission{Proposal: p, Session: s}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func openBench(b *testing.B, opts Options) (*Runtime, *Session) {
	rt := newRuntime(b, opts)
	s := rt.OpenSession("s1", &countingExecutor{})
	b.Cleanup(func() { rt.CloseSession(s) })
	if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "t"}}); err != nil {
		b.Fatal(err)
	}
	return rt, s
}
