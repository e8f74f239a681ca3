package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkChain measures the engine's own work per action of a proposal
// whose 300 tool calls each depend on the one before, with an executor
// that answers at once: everything a chain step costs besides the wire.
func BenchmarkChain(b *testing.B) {
	const n = 300
	rt := newRuntime(b, Options{})
	s := rt.OpenSession("s", execFunc(func(context.Context, ToolCall) (any, error) {
		return map[string]any{"ok": true}, nil
	}))
	defer rt.CloseSession(s)
	if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "noop"}}); err != nil {
		b.Fatal(err)
	}
	proposal := func() *protocol.ActionProposal {
		p := &protocol.ActionProposal{}
		for i := 0; i < n; i++ {
			a := protocol.Action{ID: fmt.Sprint("a", i), Type: protocol.ActionToolCall, Tool: "noop", Parameters: map[string]any{"i": i},
				FailureBehavior: protocol.FailAbort, InvocationMode: protocol.ModeOneShot}
			if i > 0 {
				a.Dependencies = []string{fmt.Sprint("a", i-1)}
			}
			p.Actions = append(p.Actions, a)
		}
		return p
	}
	var ms runtime.MemStats
	var allocs uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := proposal()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		res, err := rt.Submit(context.Background(), &Submission{Proposal: p, Session: s})
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		allocs += ms.Mallocs - before
		if err != nil || res.Cost.ActionsExecuted != n {
			b.Fatalf("%v %+v", err, res.Cost)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/action")
	b.ReportMetric(float64(allocs)/float64(b.N*n), "allocs/action")
}
