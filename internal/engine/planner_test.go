package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/allocs"
	"github.com/parslee-ai/car-server/protocol"
)

// unorderedWriters is a candidate of n state_writes of one key with no
// ordering between them: the shape whose write-conflict check costs more
// than its size (every writer against every other).
func unorderedWriters(t testing.TB, n int) *protocol.ActionProposal {
	var b strings.Builder
	b.WriteString(`{"id":"c","actions":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"w%d","type":"state_write","parameters":{"key":"k","value":%d}}`, i, i)
	}
	b.WriteString(`]}`)
	return decode(t, b.String())
}

// TestScoringCostIsLinearInTheCandidates: twice the actions cost at most
// about twice the memory to score, on the shape that makes verify's
// write-conflict check grow with the square of the writers.
func TestScoringCostIsLinearInTheCandidates(t *testing.T) {
	rt := NewRuntime(Options{MaxActions: 20000})
	defer rt.Close()
	w, _ := ResolvePlanWeights(nil)
	s := rt.OpenSession("scorer", nil)
	s.Tools = registry(t)
	cost := func(n int) uint64 {
		cands := []*protocol.ActionProposal{unorderedWriters(t, n)}
		return allocs.Bytes(func() {
			scores, ranking, err := rt.ScoreCandidates(t.Context(), cands, s, "", w, nil)
			if err != nil || len(ranking) != 1 || !scores[0].Valid {
				t.Fatalf("scores %+v, ranking %v, err %v", scores, ranking, err)
			}
		})
	}
	small, large := cost(4000), cost(16000)
	t.Logf("scoring allocated %d bytes for 4,000 actions, %d for 16,000", small, large)
	if ratio := float64(large) / float64(small); ratio > 5 {
		t.Fatalf("scoring 4,000 actions allocated %d bytes, 16,000 %d: %.1f×, want about 4×", small, large, ratio)
	}
}

// TestScoringReadsAtMostMaxPlanStateKeys: candidates naming exactly
// MaxPlanStateKeys distinct keys are scored; one more is refused, naming
// the bound, before it is read.
func TestScoringReadsAtMostMaxPlanStateKeys(t *testing.T) {
	rt := NewRuntime(Options{MaxActions: 2 * MaxPlanStateKeys})
	defer rt.Close()
	s := rt.OpenSession("scorer", nil)
	s.Tools = registry(t)
	w, _ := ResolvePlanWeights(nil)
	keys := func(n int) []*protocol.ActionProposal {
		var b strings.Builder
		b.WriteString(`{"actions":[{"id":"a","type":"state_write","parameters":{"key":"k","value":1},"state_dependencies":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"key-%d"`, i)
		}
		b.WriteString(`]}]}`)
		return []*protocol.ActionProposal{decode(t, b.String())}
	}
	if _, _, err := rt.ScoreCandidates(t.Context(), keys(MaxPlanStateKeys), s, "", w, nil); err != nil {
		t.Fatalf("%d keys: %v", MaxPlanStateKeys, err)
	}
	_, _, err := rt.ScoreCandidates(t.Context(), keys(MaxPlanStateKeys+1), s, "", w, nil)
	var limit *LimitError
	if !errors.As(err, &limit) || !strings.Contains(err.Error(), "more than 10000 distinct state keys") {
		t.Fatalf("%d keys: %v", MaxPlanStateKeys+1, err)
	}
}

// TestPlanOutcome: a rejection stops the plan, a failure that aborted falls
// back, a failure under failure_behavior skip does not.
func TestPlanOutcome(t *testing.T) {
	p := decode(t, `{"actions":[{"id":"a","type":"tool_call","tool":"deploy"},{"id":"b","type":"tool_call","tool":"test","failure_behavior":"skip"}]}`)
	res := func(a, b protocol.ActionStatus) *protocol.ProposalResult {
		return &protocol.ProposalResult{Results: []protocol.ActionResult{{ActionID: "a", Status: a}, {ActionID: "b", Status: b}}}
	}
	for _, tc := range []struct {
		a, b protocol.ActionStatus
		want string
	}{
		{protocol.StatusSucceeded, protocol.StatusSucceeded, protocol.PlanSucceeded},
		{protocol.StatusSucceeded, protocol.StatusFailed, protocol.PlanSucceeded},
		{protocol.StatusFailed, protocol.StatusSkipped, protocol.PlanFailed},
		{protocol.StatusFailed, protocol.StatusRejected, protocol.PlanRejected},
		{protocol.StatusRejected, protocol.StatusRejected, protocol.PlanRejected},
	} {
		if got, _ := planOutcome(res(tc.a, tc.b), p); got != tc.want {
			t.Errorf("%s, %s: %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

// BenchmarkScoreUnorderedWriters scores one candidate of n unordered
// writers of one key, beside verify of the same proposal as the baseline:
// scoring grows with n, verify's write-conflict check with n².
func BenchmarkScoreUnorderedWriters(b *testing.B) {
	rt := NewRuntime(Options{MaxActions: 100_000})
	defer rt.Close()
	s := rt.OpenSession("scorer", nil)
	s.Tools = registry(b)
	w, _ := ResolvePlanWeights(nil)
	for _, n := range []int{2000, 8000} {
		cands := []*protocol.ActionProposal{unorderedWriters(b, n)}
		b.Run(fmt.Sprintf("score/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := rt.ScoreCandidates(b.Context(), cands, s, "", w, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("verify/%d", n), func(b *testing.B) {
			for b.Loop() {
				Verify(cands[0], nil, s.Tools, 100_000)
			}
		})
	}
}
