package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/allocs"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// The bounds on work per request: each test sends an input just past its
// bound and checks the error and what the request allocated.

func submitMeasured(t *testing.T, opts Options, p *protocol.ActionProposal) (*protocol.ProposalResult, uint64) {
	t.Helper()
	res, used, _ := submitMeasuredOn(t, opts, p)
	return res, used
}

// submitMeasuredOn is submitMeasured that also returns the Runtime, for
// its state.
func submitMeasuredOn(t *testing.T, opts Options, p *protocol.ActionProposal) (*protocol.ProposalResult, uint64, *Runtime) {
	t.Helper()
	rt, s := openRuntime(t, opts, &countingExecutor{}, "t")
	var res *protocol.ProposalResult
	var err error
	used := allocs.Bytes(func() { res, err = rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s}) })
	if err != nil {
		t.Fatal(err)
	}
	return res, used, rt
}

// refusedWhole checks that every action of res was rejected, none run,
// with the one refusal that names the action, and returns its text.
func refusedWhole(t *testing.T, res *protocol.ProposalResult, want ...string) string {
	t.Helper()
	first := res.Results[0].ErrorText()
	for _, w := range append(want, "proposal refused before any action ran") {
		if !strings.Contains(first, w) {
			t.Fatalf("the refusal %q does not say %q", first, w)
		}
	}
	for _, r := range res.Results {
		if r.Status != protocol.StatusRejected || r.ErrorText() != first {
			t.Fatalf("action %s: %s %q; every action must be rejected with %q", r.ActionID, r.Status, r.ErrorText(), first)
		}
	}
	if res.Cost.ActionsExecuted != 0 || res.Cost.ToolCalls != 0 {
		t.Fatalf("a refused proposal ran: %+v", res.Cost)
	}
	return first
}

// 1,000 references to a 100 KB literal resolve to 100 MB: known from the
// proposal, so it is refused whole, nothing built.
func TestResolvedActionBoundRejectsTheActionBeforeBuildingIt(t *testing.T) {
	res, used, rt := submitMeasuredOn(t, Options{MaxResolvedActionBytes: 1 << 20}, refAmplification())
	refusedWhole(t, res, "action 'b' would pass more than 1048576 bytes", "max_resolved_action_bytes")
	if keys := stateKeys(t, rt, ""); len(keys) != 0 {
		t.Fatalf("the refused proposal wrote %v", keys)
	}
	if used > 32<<20 { // about 0.5 MB; the race detector adds more; 1 GB before the bound
		t.Fatalf("the rejected proposal allocated %d bytes; the bound is 1 MiB", used)
	}
}

// The same amplification of a tool's output, whose size only running
// tells: the run rejects the action before building it.
func TestResolvedActionBoundAtRunTimeRejectsTheActionBeforeBuildingIt(t *testing.T) {
	p := refAmplification()
	p.Actions[0] = protocol.Action{ID: "a", Type: protocol.ActionToolCall, Tool: "t", Parameters: map[string]any{"v": strings.Repeat("x", 100_000)}}
	res, used := submitMeasured(t, Options{MaxResolvedActionBytes: 1 << 20}, p)
	if a := resultByID(t, res, "a"); a.Status != protocol.StatusSucceeded {
		t.Fatalf("action a: %s %q", a.Status, a.ErrorText())
	}
	b := resultByID(t, res, "b")
	if b.Status != protocol.StatusRejected || !strings.Contains(b.ErrorText(), "action 'b' would pass more than 1048576 bytes") ||
		!strings.Contains(b.ErrorText(), "max_resolved_action_bytes") || strings.Contains(b.ErrorText(), "before any action ran") {
		t.Fatalf("action b: %s %q", b.Status, b.ErrorText())
	}
	if used > 32<<20 {
		t.Fatalf("the rejected proposal allocated %d bytes; the bound is 1 MiB", used)
	}
}

// 40 doublings would be 2^40 copies. The sizes are known from the
// proposal alone, so the whole proposal is refused before any action
// runs, naming the first action past 1 MiB: nothing is written, and the
// actions within the bound are not run only to be rolled back. The run
// itself would refuse that action: the actions before it, on their own,
// run and leave an output that the named action holds twice, past the
// bound.
func TestChainedReferencesAreRefusedBeforeAnyActionRuns(t *testing.T) {
	const limit = 1 << 20
	res, used, rt := submitMeasuredOn(t, Options{MaxResolvedActionBytes: limit}, refDoubling(40))
	msg := refusedWhole(t, res, "max_resolved_action_bytes", fmt.Sprintf("would pass more than %d bytes", limit))
	if keys := stateKeys(t, rt, ""); len(keys) != 0 {
		t.Fatalf("the refused proposal wrote %v", keys)
	}
	var named int
	if _, err := fmt.Sscanf(msg[strings.Index(msg, "action 'a")+len("action 'a"):], "%d'", &named); err != nil || named < 1 {
		t.Fatalf("no action of the chain named in %q", msg)
	}

	before, ran := submitMeasured(t, Options{MaxResolvedActionBytes: limit}, refDoubling(named))
	t.Logf("refused: %d bytes allocated; the %d actions before a%d, run: %d", used, named, named, ran)
	if used >= ran {
		t.Fatalf("the refused chain allocated %d bytes, the actions within the bound alone %d: they were run", used, ran)
	}
	for _, r := range before.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("the chain before a%d, alone: %s %s %q", named, r.ActionID, r.Status, r.ErrorText())
		}
	}
	last := jsonvalue.Size(before.Results[named-1].Output, math.MaxInt64)
	if 2*last <= limit-64 || last > limit {
		t.Fatalf("a%d was named with the last output at %d bytes; it holds it twice, the bound is %d", named, last, limit)
	}
}

// Twenty actions each resolve one 100 KB output: 2 MB against a 1 MiB
// proposal bound. When the output is a literal's, the proposal is refused
// whole, naming the action that passes the bound; when it is a tool's,
// the run refuses the actions past it.
func TestResolvedProposalBoundNamesTheLimit(t *testing.T) {
	readers := func(first protocol.Action) *protocol.ActionProposal {
		acts := []protocol.Action{first}
		for i := 0; i < 20; i++ {
			acts = append(acts, protocol.Action{ID: fmt.Sprintf("r%d", i), Type: protocol.ActionStateWrite, FailureBehavior: protocol.FailSkip,
				Parameters: map[string]any{"key": fmt.Sprintf("r%d", i), "value": "$a.output"}})
		}
		return &protocol.ActionProposal{Actions: acts}
	}
	t.Run("known", func(t *testing.T) {
		p := readers(protocol.Action{ID: "a", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "a", "value": strings.Repeat("x", 100_000)}})
		res, _, rt := submitMeasuredOn(t, Options{MaxResolvedProposalBytes: 1 << 20}, p)
		// r0 to r9 resolve 10 × (100,002 + the parameters' 26 bytes).
		refusedWhole(t, res, "action 'r10' takes the proposal past 1048576 resolved bytes (max_resolved_proposal_bytes)")
		if keys := stateKeys(t, rt, ""); len(keys) != 0 {
			t.Fatalf("the refused proposal wrote %v", keys)
		}
	})
	t.Run("at run time", func(t *testing.T) {
		p := readers(protocol.Action{ID: "a", Type: protocol.ActionToolCall, Tool: "t", Parameters: map[string]any{"v": strings.Repeat("x", 100_000)}})
		res, _ := submitMeasured(t, Options{MaxResolvedProposalBytes: 1 << 20}, p)
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
	})
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
