package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// Hostile inputs: requests of a few kilobytes that once cost seconds or
// gigabytes. BENCHMARKS.md reports these before and after their bounds.

// refAmplification: a 100 KB state_write, then one string of 1,000
// references to it.
func refAmplification() *protocol.ActionProposal {
	return &protocol.ActionProposal{Actions: []protocol.Action{
		{ID: "a", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "a", "value": strings.Repeat("x", 100_000)}},
		{ID: "b", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "b", "value": strings.Repeat("$a.output ", 1000)}},
	}}
}

// refDoubling: each action writes a value holding the previous output
// twice, so n actions build 2^n copies.
func refDoubling(n int) *protocol.ActionProposal {
	acts := []protocol.Action{{ID: "a0", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "k0", "value": "0123456789"}}}
	for i := 1; i < n; i++ {
		prev := fmt.Sprintf("$a%d.output", i-1)
		acts = append(acts, protocol.Action{ID: fmt.Sprintf("a%d", i), Type: protocol.ActionStateWrite,
			Parameters: map[string]any{"key": fmt.Sprintf("k%d", i), "value": map[string]any{"l": prev, "r": prev}}})
	}
	return &protocol.ActionProposal{Actions: acts}
}

// readersAndWriters: n actions that each read and write one key.
func readersAndWriters(n int) *protocol.ActionProposal {
	acts := make([]protocol.Action, n)
	for i := range acts {
		acts[i] = protocol.Action{ID: fmt.Sprintf("a%d", i), Type: protocol.ActionToolCall, Tool: "t",
			Parameters: map[string]any{}, StateDependencies: []string{"k"}, ExpectedEffects: map[string]any{"k": 1.0}}
	}
	return &protocol.ActionProposal{Actions: acts}
}

// writersOnAChain: a chain of n actions whose first and last each write the
// same n keys.
func writersOnAChain(n int) *protocol.ActionProposal {
	acts := make([]protocol.Action, n)
	keys := map[string]any{}
	for i := 0; i < n; i++ {
		keys[fmt.Sprintf("k%d", i)] = 1.0
	}
	for i := range acts {
		acts[i] = protocol.Action{ID: fmt.Sprintf("a%d", i), Type: protocol.ActionToolCall, Tool: "t", Parameters: map[string]any{}}
		if i > 0 {
			acts[i].Dependencies = []string{fmt.Sprintf("a%d", i-1)}
		}
	}
	acts[0].ExpectedEffects, acts[n-1].ExpectedEffects = keys, keys
	return &protocol.ActionProposal{Actions: acts}
}

func submitBench(b *testing.B, p func() *protocol.ActionProposal) {
	rt := newRuntime(b, Options{})
	s := rt.OpenSession("bench", nil)
	defer rt.CloseSession(s)
	for b.Loop() {
		if _, err := rt.Submit(context.Background(), &Submission{Proposal: p(), Session: s}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHostileRefAmplification(b *testing.B) { submitBench(b, refAmplification) }

func BenchmarkHostileRefDoubling22(b *testing.B) {
	submitBench(b, func() *protocol.ActionProposal { return refDoubling(22) })
}

func BenchmarkHostileStateDependencies4000(b *testing.B) {
	p := readersAndWriters(4000)
	for b.Loop() {
		Simulate(p, nil, nil)
	}
}

func BenchmarkHostileEquivalent1000x100(b *testing.B) {
	p := readersAndWriters(1000)
	states := make([]map[string]any, 100)
	for i := range states {
		states[i] = map[string]any{"k": float64(i)}
	}
	for b.Loop() {
		Equivalent(p, p, states, nil)
	}
}

func BenchmarkHostileWriteConflicts2000(b *testing.B) {
	p := writersOnAChain(2000)
	for b.Loop() {
		Verify(p, nil, nil, 0)
	}
}
