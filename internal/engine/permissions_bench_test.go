package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkPermissionGate measures the admission gate's work per action:
// classification, fingerprint and ledger lookup.
func BenchmarkPermissionGate(b *testing.B) {
	rt := newRuntime(b, Options{})
	p := &protocol.ActionProposal{ID: "p"}
	for i := 0; i < 1000; i++ {
		p.Actions = append(p.Actions, protocol.Action{ID: fmt.Sprint("a", i), Type: protocol.ActionToolCall, Tool: "noop", Parameters: map[string]any{"i": i}})
	}
	s := rt.OpenSession("s", nil)
	g := permissionGate{rt}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.Admit(context.Background(), &Submission{Proposal: p, Session: s}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/action")
}
