package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/allocs"
	"github.com/parslee-ai/car-server/protocol"
)

// The bounds on work per request: each test sends an input just past its
// bound and checks the error and what the request allocated.

func submitMeasured(t *testing.T, opts Options, p *protocol.ActionProposal) (*protocol.ProposalResult, uint64) {
	t.Helper()
	rt, s := openRuntime(t, opts, &countingExecutor{}, "t")
	var res *protocol.ProposalResult
	var err error
	used := allocs.Bytes(func() { res, err = rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s}) })
	if err != nil {
		t.Fatal(err)
	}
	return res, used
}

func TestResolvedActionBoundRejectsTheActionBeforeBuildingIt(t *testing.T) {
	// 1,000 references to a 100 KB output resolve to 100 MB.
	res, used := submitMeasured(t, Options{MaxResolvedActionBytes: 1 << 20}, refAmplification())
	b := resultByID(t, res, "b")
	if b.Status != protocol.StatusRejected || !strings.Contains(b.ErrorText(), "action 'b' would pass more than 1048576 bytes") ||
		!strings.Contains(b.ErrorText(), "max_resolved_action_bytes") {
		t.Fatalf("action b: %s %q", b.Status, b.ErrorText())
	}
	if used > 32<<20 { // about 0.5 MB; the race detector adds more; 1 GB before the bound
		t.Fatalf("the rejected proposal allocated %d bytes; the bound is 1 MiB", used)
	}
}

func TestChainedReferencesStopAtTheActionBound(t *testing.T) {
	// 40 doublings would be 2^40 copies; the bound stops the chain at 64 KiB.
	res, used := submitMeasured(t, Options{MaxResolvedActionBytes: 64 << 10}, refDoubling(40))
	rejected := 0
	for _, r := range res.Results {
		if r.Status == protocol.StatusRejected && strings.Contains(r.ErrorText(), "max_resolved_action_bytes") {
			rejected++
		}
	}
	if rejected != 1 {
		t.Fatalf("want the one action over 64 KiB rejected for its size (the rest cascade), got %d: %+v", rejected, res.Results)
	}
	if used > 32<<20 {
		t.Fatalf("the chain allocated %d bytes; the bound is 64 KiB per action", used)
	}
}

func TestResolvedProposalBoundNamesTheLimit(t *testing.T) {
	// Twenty actions each resolve one 100 KB output: 2 MB against a 1 MiB
	// proposal bound.
	acts := []protocol.Action{{ID: "a", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "a", "value": strings.Repeat("x", 100_000)}}}
	for i := 0; i < 20; i++ {
		acts = append(acts, protocol.Action{ID: fmt.Sprintf("r%d", i), Type: protocol.ActionStateWrite, FailureBehavior: protocol.FailSkip,
			Parameters: map[string]any{"key": fmt.Sprintf("r%d", i), "value": "$a.output"}})
	}
	res, _ := submitMeasured(t, Options{MaxResolvedProposalBytes: 1 << 20}, &protocol.ActionProposal{Actions: acts})
	over, ok := 0, 0
	for _, r := range res.Results[1:] {
		switch {
		case r.Status == protocol.StatusSucceeded:
			ok++
		case strings.Contains(r.ErrorText(), "past 1048576 resolved bytes (max_resolved_proposal_bytes)"):
			over++
		default:
			t.Fatalf("%s: %s %q", r.ActionID, r.Status, r.ErrorText())
		}
	}
	if ok == 0 || over == 0 || ok > 10 {
		t.Fatalf("%d resolved and %d refused; 1 MiB holds at most 10 of 100 KB", ok, over)
	}
}

func TestStateDependencyEdgesAreLinear(t *testing.T) {
	g := buildGraph(readersAndWriters(4000).Actions)
	edges := 0
	for _, d := range g.deps {
		edges += len(d)
	}
	if edges != 3999 {
		t.Fatalf("4,000 actions reading and writing one key made %d edges, want 3,999 (each after the last writer)", edges)
	}
	if lv := g.levels(); len(lv) != 4000 {
		t.Fatalf("the actions must still run one after another: %d levels", len(lv))
	}
}

func TestEquivalentBuildsEachGraphOnce(t *testing.T) {
	p := readersAndWriters(1000)
	states := make([]map[string]any, MaxTestStates)
	for i := range states {
		states[i] = map[string]any{"k": float64(i)}
	}
	var eq Equivalence
	used := allocs.Bytes(func() { eq = Equivalent(p, p, states, nil) })
	if !eq.Equivalent {
		t.Fatalf("equivalent(p, p) is false: %+v", eq.Differences)
	}
	if used > 64<<20 {
		t.Fatalf("1,000 actions x 100 states allocated %d bytes", used)
	}
}

func TestWriteConflictsOnALongChainAreCheap(t *testing.T) {
	p := writersOnAChain(2000)
	var res VerifyResult
	used := allocs.Bytes(func() { res = Verify(p, nil, nil, 0) })
	if len(res.Conflicts) != 0 {
		t.Fatalf("writers ordered by the chain reported as conflicts: %d", len(res.Conflicts))
	}
	if used > 32<<20 {
		t.Fatalf("verify of 2 writers x 2,000 keys on a 2,000-action chain allocated %d bytes", used)
	}
}

// The precomputed reachability agrees with a walk of the graph, cycles
// included.
func TestReachabilityAgreesWithAWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		n := 2 + rng.IntN(30)
		acts := make([]protocol.Action, n)
		for i := range acts {
			acts[i] = protocol.Action{ID: fmt.Sprintf("a%d", i), Type: protocol.ActionStateRead}
			for e := rng.IntN(3); e > 0; e-- {
				acts[i].Dependencies = append(acts[i].Dependencies, fmt.Sprintf("a%d", rng.IntN(n)))
			}
		}
		g := buildGraph(acts)
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		r := newReachability(g, all)
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if got, want := r.reaches(a, b), walkReaches(g, a, b); got != want {
					t.Fatalf("round %d: reaches(%d, %d) = %v, a walk says %v", round, a, b, got, want)
				}
			}
		}
	}
}

// walkReaches is the walk reachability replaced: b depends on a.
func walkReaches(g *graph, a, b int) bool {
	seen := map[int]bool{}
	stack := []int{a}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range g.dependents[x] {
			if d == b {
				return true
			}
			if !seen[d] {
				seen[d] = true
				stack = append(stack, d)
			}
		}
	}
	return false
}

// A chain of state writes whose keys come from references is judged again
// by the information-flow check as each key resolves; that must cost each
// action a constant share, not a rebuild of the whole proposal: doubling
// the chain may not quadruple what it allocates.
func TestResolvedKeysCostLinearWork(t *testing.T) {
	chain := func(n int) *protocol.ActionProposal {
		var b strings.Builder
		b.WriteString(`{"actions":[{"id":"a0","type":"state_write","parameters":{"key":"k0","value":"k1"}}`)
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, `,{"id":"a%d","type":"state_write","parameters":{"key":"$a%d.output","value":"k%d"}}`, i, i-1, i+1)
		}
		b.WriteString(`]}`)
		return decode(t, b.String())
	}
	_, small := submitMeasured(t, Options{}, chain(500))
	res, large := submitMeasured(t, Options{}, chain(1000))
	if res.Cost.ActionsExecuted != 1000 {
		t.Fatalf("%+v", res.Cost)
	}
	if large > 3*small {
		t.Fatalf("1,000 keyed writes allocated %d bytes, 500 allocated %d: more than linear", large, small)
	}
}
