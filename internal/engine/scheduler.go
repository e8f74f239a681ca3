package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// graph is a proposal's dependency graph over action indexes. Edges come
// from three sources:
//   - dependencies: the listed actions run first;
//   - state_dependencies: an action reading key K runs after the last
//     earlier action (in proposal order) that writes K, through
//     expected_effects or a state_write's key. Only the last writer: edges
//     stay linear in the proposal, and writers of one key that are ordered
//     among themselves (verify reports those that are not) all run first;
//   - references: $<id>.output in parameters or expected_effects makes <id>
//     a dependency;
//   - await: the listed detached actions run first, and the action waits
//     for their streams to end; $<id>.result reads what one ended with.
type graph struct {
	actions    []protocol.Action
	deps       [][]int // deps[i]: actions i waits for (deduplicated)
	dependents [][]int // dependents[i]: actions waiting for i
	hasRefs    []bool  // parameters or effects contain $<id>.output or $<id>.result
	refs       [][]int // refs[i]: actions whose output i's parameters or effects reference
	rejected   []string
}

// buildGraph wires the edges and rejects what cannot run: duplicate ids,
// dependencies and references on unknown ids, and cycles. Dependents of a
// rejected action are rejected too.
func buildGraph(actions []protocol.Action) *graph {
	n := len(actions)
	edges := make([][]int, 3*n) // deps, dependents and refs, in one allocation
	g := &graph{
		actions:    actions,
		deps:       edges[:n:n],
		dependents: edges[n : 2*n : 2*n],
		hasRefs:    make([]bool, n),
		refs:       edges[2*n:],
		rejected:   make([]string, n),
	}
	byID := make(map[string]int, n)
	dup := make(map[string]bool)
	for i, a := range actions {
		if _, seen := byID[a.ID]; seen {
			dup[a.ID] = true
		}
		byID[a.ID] = i
	}
	for i, a := range actions {
		if dup[a.ID] {
			g.rejected[i] = fmt.Sprintf("duplicate action id '%s': ids must be unique within a proposal", a.ID)
		}
	}
	lastWriter := make(map[string]int) // key -> the latest earlier writer
	for i := range actions {
		a := &actions[i]
		seen := make(map[int]bool)
		add := func(j int) {
			if !seen[j] {
				seen[j] = true
				g.deps[i] = append(g.deps[i], j)
				g.dependents[j] = append(g.dependents[j], i)
			}
		}
		for _, d := range a.Dependencies {
			j, ok := byID[d]
			if !ok {
				g.reject(i, fmt.Sprintf("depends on unknown action '%s'", d))
				continue
			}
			add(j)
		}
		refs := make(map[string]bool)
		referencedIDs(a.Parameters, refs)
		referencedIDs(a.ExpectedEffects, refs)
		g.hasRefs[i] = len(refs) > 0
		for _, id := range jsonvalue.SortedKeys(refs) {
			j, ok := byID[id]
			if !ok {
				g.reject(i, fmt.Sprintf("parameters reference unknown action '%s' ($%s.output)", id, id))
				continue
			}
			g.refs[i] = append(g.refs[i], j)
			add(j)
		}
		g.addAwaits(i, byID, refs, add)
		for _, k := range a.StateDependencies {
			if j, ok := lastWriter[k]; ok {
				add(j)
			}
		}
		for _, k := range writtenKeys(a) {
			lastWriter[k] = i
		}
	}
	g.rejectCycles()
	g.cascade()
	return g
}

// addAwaits wires action i's await list: each entry is a detached
// tool_call that runs first, and a $<id>.result reference needs one.
func (g *graph) addAwaits(i int, byID map[string]int, refs map[string]bool, add func(int)) {
	a := &g.actions[i]
	if a.Detached() && a.Idempotent {
		g.reject(i, detachedIdempotent(a))
	}
	awaited := make(map[string]bool, len(a.Await))
	for _, id := range a.Await {
		j, ok := byID[id]
		switch {
		case !ok:
			g.reject(i, fmt.Sprintf("awaits unknown action '%s'", id))
			continue
		case !g.actions[j].Detached():
			g.reject(i, fmt.Sprintf("awaits action '%s', which is not a streaming or long_running tool_call; list it in dependencies instead", id))
			continue
		}
		awaited[id] = true
		add(j)
	}
	for _, id := range jsonvalue.SortedKeys(refs) {
		if refs[id] && !awaited[id] {
			g.reject(i, fmt.Sprintf("parameters read $%s.result, which needs await: [\"%s\"]", id, id))
		}
	}
}

// detachedIdempotent is the refusal of a detached action that is idempotent,
// by its own flag or by its tool's schema.
func detachedIdempotent(a *protocol.Action) string {
	return fmt.Sprintf("action '%s' is %s and idempotent: a stream cannot be replayed from the idempotency cache; drop idempotent", a.ID, a.InvocationMode)
}

func (g *graph) reject(i int, reason string) {
	if g.rejected[i] == "" {
		g.rejected[i] = reason
	}
}

// writtenKeys are the state keys an action declares it writes.
func writtenKeys(a *protocol.Action) []string {
	keys := jsonvalue.SortedKeys(a.ExpectedEffects)
	if a.Type == protocol.ActionStateWrite {
		if k, ok := a.Parameters["key"].(string); ok && k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// rejectCycles rejects every action on a dependency cycle, naming the cycle.
func (g *graph) rejectCycles() {
	for _, comp := range g.components() {
		selfLoop := false
		if len(comp) == 1 {
			for _, d := range g.deps[comp[0]] {
				if d == comp[0] {
					selfLoop = true
				}
			}
			if !selfLoop {
				continue
			}
		}
		sorted := append([]int(nil), comp...)
		sort.Ints(sorted)
		ids := make([]string, len(sorted))
		for k, i := range sorted {
			ids[k] = g.actions[i].ID
		}
		msg := fmt.Sprintf("dependency cycle among actions %s", strings.Join(ids, ", "))
		if selfLoop {
			msg = fmt.Sprintf("action '%s' depends on itself", ids[0])
		}
		for _, i := range comp {
			g.reject(i, msg)
		}
	}
}

// components are the graph's strongly connected components (Tarjan's
// algorithm), each one after every component that depends on it: the order
// in which reachability can be summed up from the dependents back.
func (g *graph) components() [][]int {
	n := len(g.actions)
	t := tarjan{
		g:       g,
		marks:   make([]tarjanMark, n),
		stack:   make([]int, 0, n),
		members: make([]int, 0, n),
		out:     make([][]int, 0, n),
	}
	for i := range t.marks {
		t.marks[i].index = -1
	}
	for i := 0; i < n; i++ {
		if t.marks[i].index < 0 {
			t.strong(i)
		}
	}
	return t.out
}

// tarjan is the working state of components. Every action is in one
// component, so the components are consecutive runs of members, and there
// are at most as many as actions: nothing grows while it runs.
type tarjan struct {
	g       *graph
	marks   []tarjanMark
	stack   []int
	members []int
	out     [][]int
	next    int
}

type tarjanMark struct {
	index, low int
	onStack    bool
}

func (t *tarjan) strong(v int) {
	mv := &t.marks[v]
	mv.index, mv.low = t.next, t.next
	t.next++
	t.stack = append(t.stack, v)
	mv.onStack = true
	for _, w := range t.g.dependents[v] {
		if t.marks[w].index < 0 {
			t.strong(w)
			mv.low = min(mv.low, t.marks[w].low)
		} else if t.marks[w].onStack {
			mv.low = min(mv.low, t.marks[w].index)
		}
	}
	if mv.low != mv.index {
		return
	}
	start := len(t.members)
	for {
		w := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.marks[w].onStack = false
		t.members = append(t.members, w)
		if w == v {
			break
		}
	}
	t.out = append(t.out, t.members[start:len(t.members):len(t.members)])
}

// cascade rejects every action downstream of a rejected one (car#622).
func (g *graph) cascade() {
	var queue []int
	for i, r := range g.rejected {
		if r != "" {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, d := range g.dependents[i] {
			if g.rejected[d] == "" {
				g.rejected[d] = fmt.Sprintf("depends on rejected action '%s'", g.actions[i].ID)
				queue = append(queue, d)
			}
		}
	}
}

// levels layers the actions that are not rejected: level 0 has no
// dependencies, level k depends only on earlier levels. Actions in one level
// are independent of each other.
func (g *graph) levels() [][]string {
	n := len(g.actions)
	level := make([]int, n)
	indeg := make([]int, n)
	var queue []int
	for i := 0; i < n; i++ {
		if g.rejected[i] != "" {
			continue
		}
		indeg[i] = len(g.deps[i])
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	var out [][]string
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for len(out) <= level[i] {
			out = append(out, nil)
		}
		out[level[i]] = append(out[level[i]], g.actions[i].ID)
		for _, d := range g.dependents[i] {
			if g.rejected[d] != "" {
				continue
			}
			level[d] = max(level[d], level[i]+1)
			if indeg[d]--; indeg[d] == 0 {
				queue = append(queue, d)
			}
		}
	}
	return out
}
