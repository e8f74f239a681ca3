package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkIntegrityGates measures a 1,000-action independent proposal with
// the intent gate (an operator intent, one key already tainted, so every
// action's reads are looked up in the ledger) and the transaction check
// (warn, every action declaring a read and a write set) on, against the
// same proposal with both off. The two runtimes take turns within each
// iteration, so a busy machine slows both alike; on/off is the ratio
// BENCHMARKS.md reports.
func BenchmarkIntegrityGates(b *testing.B) {
	const n = 1000
	open := func(on bool) (*Runtime, *Session) {
		rt := newRuntime(b, Options{})
		s := rt.OpenSession("s", execFunc(func(context.Context, ToolCall) (any, error) {
			return map[string]any{"ok": true}, nil
		}))
		b.Cleanup(func() { rt.CloseSession(s) })
		if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "noop"}}); err != nil {
			b.Fatal(err)
		}
		if on {
			rt.SetOperatorIntent(&WorkIntent{Intent: "bench", AllowedTools: []string{"noop", "read_*"}, UntrustedTools: []string{"web_*"}})
			rt.integ.ledger.update(context.Background(), "", map[string]protocol.TaintEntry{"elsewhere": {Key: "elsewhere"}}, nil)
			s.SetTransactionCheck(protocol.TransactionCheckWarn)
		}
		return rt, s
	}
	proposal := func() *protocol.ActionProposal {
		p := &protocol.ActionProposal{}
		for i := 0; i < n; i++ {
			p.Actions = append(p.Actions, protocol.Action{ID: fmt.Sprint("a", i), Type: protocol.ActionToolCall, Tool: "noop", Parameters: map[string]any{"i": i},
				FailureBehavior: protocol.FailAbort, InvocationMode: protocol.ModeOneShot,
				ReadSet: []string{fmt.Sprint("r", i)}, WriteSet: []string{fmt.Sprint("w", i)}})
		}
		return p
	}
	rtOff, sOff := open(false)
	rtOn, sOn := open(true)
	var spent [2]time.Duration
	run := func(k int, rt *Runtime, s *Session) {
		p := proposal()
		start := time.Now()
		res, err := rt.Submit(context.Background(), &Submission{Proposal: p, Session: s})
		spent[k] += time.Since(start)
		if err != nil || res.Cost.ActionsExecuted != n || len(res.Warnings) != 0 {
			b.Fatalf("%v %+v %v", err, res.Cost, res.Warnings)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			run(0, rtOff, sOff)
			run(1, rtOn, sOn)
		} else {
			run(1, rtOn, sOn)
			run(0, rtOff, sOff)
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/off")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "ns/on")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "on/off")
}
