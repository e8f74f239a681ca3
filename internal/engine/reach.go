package engine

// reachability answers "does b depend, directly or transitively, on a?" for
// a fixed set of target actions, from one pass over the graph: a bitset per
// component of the targets in it and among its dependents. It costs the
// graph's size times the number of targets / 64, instead of a walk of the
// graph per question.
type reachability struct {
	comp   []int      // action -> its component
	cyclic []bool     // component: on a cycle (more than one action, or a self-loop)
	target []int      // action -> its bit, or -1
	closed [][]uint64 // component -> the targets in it or depending on it
}

// newReachability prepares answers about paths that end at targets.
func newReachability(g *graph, targets []int) *reachability {
	n := len(g.actions)
	r := &reachability{comp: make([]int, n), target: make([]int, n)}
	for i := range r.target {
		r.target[i] = -1
	}
	bit := 0
	for _, t := range targets {
		if r.target[t] < 0 {
			r.target[t] = bit
			bit++
		}
	}
	words := (bit + 63) / 64
	comps := g.components()
	r.cyclic = make([]bool, len(comps))
	r.closed = make([][]uint64, len(comps))
	for c, members := range comps {
		for _, i := range members {
			r.comp[i] = c
		}
	}
	// components lists every component after those that depend on it, so
	// each one's dependents are closed before it.
	for c, members := range comps {
		set := make([]uint64, words)
		for _, i := range members {
			if t := r.target[i]; t >= 0 {
				set[t/64] |= 1 << (t % 64)
			}
			for _, d := range g.dependents[i] {
				dc := r.comp[d]
				if dc == c {
					r.cyclic[c] = true
					continue
				}
				for w, v := range r.closed[dc] {
					set[w] |= v
				}
			}
		}
		r.closed[c] = set
	}
	return r
}

// reaches reports whether b (a target) depends, directly or transitively,
// on a.
func (r *reachability) reaches(a, b int) bool {
	t := r.target[b]
	if t < 0 {
		return false
	}
	if r.comp[a] == r.comp[b] {
		return r.cyclic[r.comp[a]]
	}
	return r.closed[r.comp[a]][t/64]&(1<<(t%64)) != 0
}
