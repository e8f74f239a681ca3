package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// resolvedSizeGate refuses a proposal whose resolved parameters, as far as
// the proposal alone tells their sizes, would certainly pass
// max_resolved_action_bytes or max_resolved_proposal_bytes. The refusal
// comes before any action runs: a chain of state_writes that each hold the
// last output twice costs a pass over its text, not the running of the
// actions within the bound, their fingerprints and a reply of their
// outputs. What only running tells (a tool's output) is counted as
// nothing here, so this refuses only what the run would refuse; the run
// still checks every size as it resolves it.
type resolvedSizeGate struct{ rt *Runtime }

func (resolvedSizeGate) Name() string { return "resolved_size" }

func (g resolvedSizeGate) Admit(_ context.Context, sub *Submission) error {
	return knownSizes(sub.graph, g.rt.opts.MaxResolvedActionBytes, g.rt.opts.MaxResolvedProposalBytes)
}

// knownSizes walks the actions the validation kept, each after the actions
// it depends on, and sums what each one's references would resolve to from
// the sizes known before running: literals, and the outputs of state_writes
// (their values, and the fields of them) and assertions (true), built from
// literals and from earlier such outputs. Each part of the proposal is
// visited once (a field's part at most once per level it nests in) and
// each reference is a lookup, so the walk costs the proposal's size,
// whatever the sizes it sums; they saturate at the largest int64. It
// returns the refusal of the first action past a bound, or nil.
func knownSizes(g *graph, actionLimit, proposalLimit int64) error {
	if !slices.Contains(g.hasRefs, true) {
		return nil // the run charges nothing
	}
	k := newKnownSizer(g, actionLimit)
	sorted, _ := g.order()
	var total int64
	for _, i := range sorted {
		charge := k.action(i)
		if charge > actionLimit {
			return fmt.Errorf("proposal refused before any action ran: with its references resolved, action '%s' would pass more than %d bytes of parameters and expected_effects (max_resolved_action_bytes): at least %d, known from the proposal alone; refer to smaller outputs (a field: $id.output.field) or raise the limit",
				g.actions[i].ID, actionLimit, charge)
		}
		if total = satAdd(total, charge); total > proposalLimit {
			return fmt.Errorf("proposal refused before any action ran: with its references resolved, action '%s' takes the proposal past %d resolved bytes (max_resolved_proposal_bytes): at least %d, known from the proposal alone; split the proposal or refer to smaller outputs",
				g.actions[i].ID, proposalLimit, total)
		}
	}
	return nil
}

func newKnownSizer(g *graph, actionLimit int64) *knownSizer {
	k := &knownSizer{
		g:      g,
		limit:  actionLimit,
		byID:   make(map[string]int, len(g.actions)),
		output: make([]int64, len(g.actions)),
	}
	for i := range g.actions {
		k.byID[g.actions[i].ID] = i
	}
	return k
}

// action returns a lower bound of what the run charges action i's
// resolved parameters and effects (0 for an action without references,
// which the run does not charge) and records its output's known size.
// Every action i depends on must have been sized first.
func (k *knownSizer) action(i int) (charge int64) {
	a := &k.g.actions[i]
	valueSize := int64(-1)
	if k.g.hasRefs[i] {
		_, params, value := k.object(a.Parameters, "value")
		_, effects := k.value(any(a.ExpectedEffects))
		charge, valueSize = satAdd(params, effects), value
	}
	switch a.Type {
	case protocol.ActionStateWrite:
		// The output is the value; one without references is counted
		// when it is first referred to (outputSize).
		switch {
		case valueSize >= 0:
			k.output[i] = valueSize
		case k.g.hasRefs[i]:
			k.output[i] = jsonvalue.Size(nil, math.MaxInt64)
		default:
			k.output[i] = unsized
		}
	case protocol.ActionAssertion:
		k.output[i] = jsonvalue.Size(true, math.MaxInt64)
	}
	return charge
}

// knownSizer holds the known output sizes of the actions walked so far.
type knownSizer struct {
	g      *graph
	limit  int64 // max_resolved_action_bytes, how far a value without references is counted
	byID   map[string]int
	output []int64            // a lower bound of each action's output size; 0 when only running it tells
	fields map[fieldKey]int64 // the same of the fields referred to, once each
}

// unsized is the output size of a state_write whose value has no
// references, until it is first referred to.
const unsized = -1

// fieldKey names a field of an action's output: its index and path.
type fieldKey struct {
	action int
	path   string
}

// value returns lower bounds of what resolveValue returns for v and of
// what it charges: the size of what it builds, and what it charges, which
// for a string embedding references may be more. A whole $id.output
// counts the output's known size, $id.output.field the known size of that
// part of a state_write's value; a stream's result and an output only
// running tells count nothing.
func (k *knownSizer) value(v any) (size, charge int64) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "$") {
			n := jsonvalue.StringSize(x)
			return n, n
		}
		locs := refPattern.FindAllStringSubmatchIndex(x, -1)
		if len(locs) == 1 && locs[0][0] == 0 && locs[0][1] == len(x) {
			n := k.ref(x, locs[0])
			return n, n
		}
		// The run charges the string's length and each reference's size.
		// It builds the text with each reference's string, or other
		// value's JSON, inside, and escapes the whole again: the text as
		// it would be alone, a string as it is (its size without the
		// quotes), another value's JSON at least as long as it is. (Text
		// and values are valid UTF-8, as decoded from JSON, so escaping
		// one part never depends on its neighbours.)
		charge, size = int64(len(x)), 2
		last := 0
		for _, loc := range locs {
			n := k.ref(x, loc)
			charge = satAdd(charge, n)
			size = satAdd(size, satAdd(jsonvalue.StringSize(x[last:loc[0]])-2, max(n-2, 0)))
			last = loc[1]
		}
		size = satAdd(size, jsonvalue.StringSize(x[last:])-2)
		return size, max(size, charge)
	case []any:
		size = containerSize(len(x))
		charge = size
		for _, e := range x {
			s, c := k.value(e)
			size, charge = satAdd(size, s), satAdd(charge, c)
		}
		return size, charge
	case map[string]any:
		size, charge, _ = k.object(x, "")
		return size, charge
	}
	n := jsonvalue.Size(v, math.MaxInt64)
	return n, n
}

// object is value of an object; memberSize is the size of its member
// named member, -1 when it has none.
func (k *knownSizer) object(x map[string]any, member string) (size, charge, memberSize int64) {
	size, memberSize = containerSize(len(x)), -1
	charge = size
	for name, e := range x {
		key := jsonvalue.StringSize(name) + 1
		s, c := k.value(e)
		size, charge = satAdd(size, satAdd(key, s)), satAdd(charge, satAdd(key, c))
		if name == member {
			memberSize = s
		}
	}
	return size, charge, memberSize
}

// ref is the known size of the reference at loc in x.
func (k *knownSizer) ref(x string, loc []int) int64 {
	id, kind, path := x[loc[2]:loc[3]], x[loc[4]:loc[5]], x[loc[6]:loc[7]]
	j, ok := k.byID[id]
	switch {
	case kind != "output" || !ok:
		return 0
	case path == "":
		return k.outputSize(j)
	}
	key := fieldKey{j, path}
	n, ok := k.fields[key]
	if !ok {
		n = k.field(j, path)
		if k.fields == nil {
			k.fields = map[fieldKey]int64{}
		}
		k.fields[key] = n
	}
	return n
}

// outputSize is the known size of action j's output. A state_write's
// value without references is counted as the run counts it
// (run.outputSize), up to the action bound, once.
func (k *knownSizer) outputSize(j int) int64 {
	if k.output[j] == unsized {
		k.output[j] = jsonvalue.Size(k.g.actions[j].Parameters["value"], k.limit)
	}
	return k.output[j]
}

// field is the known size of a field of state_write j's output, path
// (".items.0") walked in the value as the proposal gives it: what the run
// builds there is that part of the value resolved. A path that leaves the
// value's own text (through a reference in it) or that the run would not
// follow is counted as nothing; so is an index not written as the run
// writes one ("00"), so that one field of one action is counted once
// however often it is referred to (ref keeps the count).
func (k *knownSizer) field(j int, path string) int64 {
	if k.g.actions[j].Type != protocol.ActionStateWrite {
		return 0
	}
	cur := k.g.actions[j].Parameters["value"]
	for _, step := range strings.Split(path[1:], ".") {
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[step]
			if !ok {
				return 0
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != step {
				return 0
			}
			cur = x[i]
		default:
			return 0
		}
	}
	size, _ := k.value(cur)
	return size
}
