package flow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// Step is one action of a proposal as the analysis sees it. The engine
// builds it: Refs and Deps are indexes into the same slice.
type Step struct {
	ID     string
	Tool   string   // "" for the engine's own action types
	Refs   []int    // actions whose output its parameters or effects reference
	Deps   []int    // every action it waits for (dependencies, references, state)
	Reads  []string // state keys it reads (state_read, state_dependencies)
	Writes []string // state keys it writes (state_write, expected_effects)
}

// Taint is what a state key carries from an earlier proposal.
type Taint struct {
	Labels []string `json:"labels"`
	Origin string   `json:"origin"` // how it got there, for the path: "proposal p1 action a1 (read_secret)"
}

// Input is everything one analysis looks at.
type Input struct {
	Steps   []Step
	Labels  *Labels
	Tainted map[string]Taint // state keys of the submitting connection that carry labels
	Ran     map[string]bool  // tools the connection ran in earlier proposals
}

// Leak is secret data reaching a sink.
type Leak struct {
	Sink int      // the step that would send it
	Path []string // source → … → sink, each hop named for a person
}

func (l Leak) String() string { return strings.Join(l.Path, " → ") }

// OrderingHit is a step that would run a tool after one it must not follow.
type OrderingHit struct {
	Step    int
	Rule    Ordering
	FirstAt string // the step id that runs First, or "an earlier proposal of this connection"
}

// Report is the outcome of one analysis.
type Report struct {
	Leaks     []Leak
	Orderings []OrderingHit
	labels    []map[string]bool // labels each step's output carries
}

// StepLabels are the labels step i's output carries, sorted.
func (r *Report) StepLabels(i int) []string {
	if r == nil || i >= len(r.labels) || len(r.labels[i]) == 0 {
		return nil
	}
	return jsonvalue.SortedKeys(r.labels[i])
}

// Labelled reports whether anything in the input carries a label, a
// labelled tool or a tainted key: with nothing labelled, no state key that
// is resolved later can carry data anywhere that matters.
func (in Input) Labelled() bool {
	for _, s := range in.Steps {
		if len(in.Labels.label(s.Tool).Labels) > 0 {
			return true
		}
	}
	for _, t := range in.Tainted {
		if len(t.Labels) > 0 {
			return true
		}
	}
	return false
}

// Analyze follows every label from where it enters (a source's output, a
// tainted state key) along references and state keys, and reports secret
// data that reaches a sink and the forbidden orderings the proposal holds.
func Analyze(in Input) *Report {
	n := len(in.Steps)
	rep := &Report{labels: make([]map[string]bool, n)}
	g := newFlowGraph(in.Steps)
	entries := map[string]bool{}
	for _, s := range in.Steps {
		for _, l := range in.Labels.label(s.Tool).Labels {
			entries[l] = true
		}
	}
	for _, t := range in.Tainted {
		for _, l := range t.Labels {
			entries[l] = true
		}
	}
	for _, label := range jsonvalue.SortedKeys(entries) {
		reached, prev := g.follow(in, label)
		for i, ok := range reached {
			if !ok {
				continue
			}
			if rep.labels[i] == nil {
				rep.labels[i] = map[string]bool{}
			}
			rep.labels[i][label] = true
			if label == Secret && in.Labels.label(in.Steps[i].Tool).Sink {
				rep.Leaks = append(rep.Leaks, Leak{Sink: i, Path: g.path(in, prev, i)})
			}
		}
	}
	rep.Orderings = orderings(in)
	return rep
}

// node is a step (id < n) or a state key (id ≥ n) of the flow graph.
type flowGraph struct {
	n     int
	keys  []string       // keys[id-n]
	keyID map[string]int // key → node id
	out   [][]int        // edges along which data moves
}

func newFlowGraph(steps []Step) *flowGraph {
	n := len(steps)
	g := &flowGraph{n: n, keyID: map[string]int{}, out: make([][]int, n)}
	key := func(k string) int {
		if id, ok := g.keyID[k]; ok {
			return id
		}
		id := n + len(g.keys)
		g.keys = append(g.keys, k)
		g.keyID[k] = id
		g.out = append(g.out, nil)
		return id
	}
	for i, s := range steps {
		for _, j := range s.Refs {
			g.out[j] = append(g.out[j], i)
		}
		for _, k := range s.Writes {
			g.out[i] = append(g.out[i], key(k))
		}
	}
	for i, s := range steps {
		for _, k := range s.Reads {
			id := key(k)
			g.out[id] = append(g.out[id], i)
		}
	}
	return g
}

// follow is a breadth-first walk from everything that carries label: the
// steps it reaches, and for each node the node it was reached from (-1 at an
// entry), so the shortest path can be named.
func (g *flowGraph) follow(in Input, label string) (reached []bool, prev []int) {
	prev = make([]int, len(g.out))
	seen := make([]bool, len(g.out))
	var queue []int
	enter := func(id int) {
		if !seen[id] {
			seen[id] = true
			prev[id] = -1
			queue = append(queue, id)
		}
	}
	for i, s := range in.Steps {
		if l := in.Labels.label(s.Tool); l.Source && slices.Contains(l.Labels, label) {
			enter(i)
		}
	}
	for k, t := range in.Tainted {
		if id, ok := g.keyID[k]; ok && slices.Contains(t.Labels, label) {
			enter(id)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.out[v] {
			if !seen[w] {
				seen[w] = true
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return seen[:g.n], prev
}

// path names the hops from an entry to node i.
func (g *flowGraph) path(in Input, prev []int, i int) []string {
	var rev []string
	for v := i; v != -1; v = prev[v] {
		if v < g.n {
			s := in.Steps[v]
			rev = append(rev, describe(s))
			continue
		}
		k := g.keys[v-g.n]
		if prev[v] == -1 {
			if t, ok := in.Tainted[k]; ok {
				rev = append(rev, fmt.Sprintf("state key '%s' (written by %s)", k, t.Origin))
				continue
			}
		}
		rev = append(rev, fmt.Sprintf("state key '%s'", k))
	}
	out := make([]string, len(rev))
	for j := range rev {
		out[j] = rev[len(rev)-1-j]
	}
	return out
}

// describe names a step for a person: its id and its tool.
func describe(s Step) string {
	if s.Tool == "" {
		return fmt.Sprintf("action '%s'", s.ID)
	}
	return fmt.Sprintf("action '%s' (%s)", s.ID, s.Tool)
}

// orderings finds each step that runs a rule's Then while its First ran in
// an earlier proposal of the connection, or runs in this one at a point the
// Then step is not required to precede.
func orderings(in Input) []OrderingHit {
	var hits []OrderingHit
	for _, rule := range in.Labels.orderingRules() {
		var firsts, thens []int
		for i, s := range in.Steps {
			switch s.Tool {
			case rule.First:
				firsts = append(firsts, i)
			case rule.Then:
				thens = append(thens, i)
			}
		}
		if len(thens) == 0 {
			continue
		}
		if in.Ran[rule.First] {
			for _, t := range thens {
				hits = append(hits, OrderingHit{Step: t, Rule: rule, FirstAt: "an earlier proposal of this connection"})
			}
			continue
		}
		hit := map[int]string{}
		for _, f := range firsts {
			before := ancestors(in.Steps, f)
			for _, t := range thens {
				if _, done := hit[t]; !done && !before[t] {
					hit[t] = in.Steps[f].ID
				}
			}
		}
		for _, t := range thens {
			if at, ok := hit[t]; ok {
				hits = append(hits, OrderingHit{Step: t, Rule: rule, FirstAt: fmt.Sprintf("action '%s'", at)})
			}
		}
	}
	return hits
}

// orderingRules are the declared orderings, none when there are no labels.
func (l *Labels) orderingRules() []Ordering {
	if l == nil {
		return nil
	}
	return l.Orderings
}

// ancestors are the steps that must finish before step i starts.
func ancestors(steps []Step, i int) map[int]bool {
	seen := map[int]bool{}
	queue := append([]int(nil), steps[i].Deps...)
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if seen[v] {
			continue
		}
		seen[v] = true
		queue = append(queue, steps[v].Deps...)
	}
	return seen
}
