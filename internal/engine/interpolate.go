package engine

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// refPattern matches a reference to an earlier action's output,
// $<id>.output, or to the result of a stream it awaits, $<id>.result,
// optionally followed by .field or .index steps.
var refPattern = regexp.MustCompile(`\$([A-Za-z0-9_\-]+)\.(output|result)((?:\.[A-Za-z0-9_\-]+)*)`)

// lookupFunc finds what a reference names: the output of action id, or,
// with result set, the result of its awaited stream.
type lookupFunc func(id string, result bool) (any, bool)

// referencedIDs records the action ids that parameters refer to, each true
// when some reference to it reads its stream's result. A reference implies
// a dependency edge.
func referencedIDs(v any, out map[string]bool) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "$") {
			return
		}
		for _, m := range refPattern.FindAllStringSubmatch(x, -1) {
			out[m[1]] = out[m[1]] || m[2] == "result"
		}
	case []any:
		for _, e := range x {
			referencedIDs(e, out)
		}
	case map[string]any:
		for _, e := range x {
			referencedIDs(e, out)
		}
	}
}

// interpolate returns v with references replaced by outputs. A string that is
// exactly one reference becomes the referenced JSON value; a reference inside
// a longer string is replaced by its text (strings as-is, other values as
// JSON). Containers are copied; call it only on parameters that refer. Every
// byte of the result is charged to budget before it is built, so a reference
// repeated or chained cannot build more than the budget allows.
func interpolate(v any, outputs lookupFunc, budget *resolveBudget) (any, error) {
	r, _, err := resolveValue(v, outputs, budget)
	return r, err
}

// resolveValue is interpolate that also returns the encoded size of what it
// built, summed from its parts: a whole reference counts its output's size
// (budget.known), so no part is walked twice.
func resolveValue(v any, outputs lookupFunc, budget *resolveBudget) (any, int64, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "$") {
			n := jsonvalue.StringSize(x)
			return x, n, budget.charge(n)
		}
		if loc := refPattern.FindStringSubmatchIndex(x); loc != nil && loc[0] == 0 && loc[1] == len(x) {
			id, kind, path := x[loc[2]:loc[3]], x[loc[4]:loc[5]], x[loc[6]:loc[7]]
			val, err := resolveRef(id, kind, path, outputs)
			if err != nil {
				return nil, 0, err
			}
			n := budget.refSize(id, kind, path, val)
			return val, n, budget.charge(n)
		}
		// Resolve and charge every reference before building anything, so a
		// string over the budget costs no more than its references' sizes.
		locs := refPattern.FindAllStringSubmatchIndex(x, -1)
		texts := make([]string, len(locs))
		size := len(x)
		charged := int64(len(x))
		for n, loc := range locs {
			id, kind, path := x[loc[2]:loc[3]], x[loc[4]:loc[5]], x[loc[6]:loc[7]]
			val, err := resolveRef(id, kind, path, outputs)
			if err != nil {
				return nil, 0, err
			}
			ref := budget.refSize(id, kind, path, val)
			if err := budget.charge(ref); err != nil {
				return nil, 0, err
			}
			charged += ref
			if s, ok := val.(string); ok {
				texts[n] = s
			} else {
				texts[n] = string(jsonvalue.Canonical(val))
			}
			size += len(texts[n])
		}
		var b strings.Builder
		b.Grow(size)
		last := 0
		for n, loc := range locs {
			b.WriteString(x[last:loc[0]])
			b.WriteString(texts[n])
			last = loc[1]
		}
		b.WriteString(x[last:])
		// The text and the embedded values are escaped again as one
		// string: a quote inside an embedded object or a < of the text
		// grows, so what was built is charged, at least.
		s := b.String()
		n := jsonvalue.StringSize(s)
		return s, n, budget.charge(max(n, charged) - charged + int64(len(x)))
	case []any:
		size := containerSize(len(x))
		if err := budget.charge(size); err != nil {
			return nil, 0, err
		}
		out := make([]any, len(x))
		for i, e := range x {
			r, n, err := resolveValue(e, outputs, budget)
			if err != nil {
				return nil, 0, err
			}
			out[i] = r
			size += n
		}
		return out, size, nil
	case map[string]any:
		out, size, _, err := resolveObject(x, outputs, budget, "")
		return out, size, err
	}
	n := jsonvalue.Size(v, budget.remaining())
	return v, n, budget.charge(n)
}

// containerSize is what an array or object of n members adds to its
// members' own sizes: its brackets and the commas between them.
func containerSize(n int) int64 {
	if n == 0 {
		return 2
	}
	return int64(n) + 1
}

// resolveObject is resolveValue of an object. memberSize is the size of
// the resolved member named member, -1 when the object has none: a
// state_write's output is its value, and its size is known from here.
func resolveObject(x map[string]any, outputs lookupFunc, budget *resolveBudget, member string) (out map[string]any, size, memberSize int64, err error) {
	size, memberSize = containerSize(len(x)), -1
	if err := budget.charge(size); err != nil {
		return nil, 0, 0, err
	}
	out = make(map[string]any, len(x))
	for k, e := range x {
		keySize := jsonvalue.StringSize(k) + 1
		if err := budget.charge(keySize); err != nil {
			return nil, 0, 0, err
		}
		r, n, err := resolveValue(e, outputs, budget)
		if err != nil {
			return nil, 0, 0, err
		}
		out[k] = r
		size += keySize + n
		if k == member {
			memberSize = n
		}
	}
	return out, size, memberSize, nil
}

// resolveBudget bounds the bytes one action's resolved parameters and
// effects may take, and, through proposalLeft, what all the resolved actions
// of a proposal may take together.
type resolveBudget struct {
	action       string        // the action's id, for the error
	left         int64         // bytes this action may still resolve
	limit        int64         // the per-action limit, for the error
	proposalUsed *atomic.Int64 // bytes the proposal's actions resolved so far; nil: no proposal bound
	proposal     int64         // the per-proposal limit
	// known is the encoded size of a whole output (result set: of a
	// stream's result), counted once for the run however often it is
	// referred to; nil: counted at each reference.
	known func(id string, result bool, v any) int64
}

// refSize is what a reference to val costs: its output's known size when
// the reference names the whole output, else val counted up to what the
// budget has left.
func (b *resolveBudget) refSize(id, kind, path string, val any) int64 {
	if b != nil && b.known != nil && path == "" {
		return b.known(id, kind == "result", val)
	}
	return jsonvalue.Size(val, b.remaining())
}

// errResolvedTooLarge marks a resolution refused by a size bound.
var errResolvedTooLarge = errors.New("resolved parameters too large")

// remaining is how far a size needs counting before the budget is exceeded.
func (b *resolveBudget) remaining() int64 {
	if b == nil {
		return math.MaxInt64
	}
	left := b.left
	if b.proposalUsed != nil {
		left = min(left, b.proposal-b.proposalUsed.Load())
	}
	return max(left, 0)
}

// charge takes n bytes from the action's and the proposal's budgets.
func (b *resolveBudget) charge(n int64) error {
	if b == nil {
		return nil
	}
	b.left -= n
	if b.left < 0 {
		return fmt.Errorf("%w: with its references resolved, action '%s' would pass more than %d bytes of parameters and expected_effects (max_resolved_action_bytes); refer to smaller outputs (a field: $id.output.field) or raise the limit",
			errResolvedTooLarge, b.action, b.limit)
	}
	if b.proposalUsed != nil && b.proposalUsed.Add(n) > b.proposal {
		return fmt.Errorf("%w: with its references resolved, action '%s' takes the proposal past %d resolved bytes (max_resolved_proposal_bytes); split the proposal or refer to smaller outputs",
			errResolvedTooLarge, b.action, b.proposal)
	}
	return nil
}

// resolveRef walks path (".items.0.name") into the output (kind "output")
// or the awaited stream's result (kind "result") of action id.
func resolveRef(id, kind, path string, outputs lookupFunc) (any, error) {
	cur, ok := outputs(id, kind == "result")
	switch {
	case !ok && kind == "result":
		return nil, fmt.Errorf("reference $%s.result%s: action '%s' has no stream result; an action reads it after await: [\"%s\"]", id, path, id, id)
	case !ok:
		return nil, fmt.Errorf("reference $%s.output%s: action '%s' has no output (it did not succeed)", id, path, id)
	}
	if path == "" {
		return cur, nil
	}
	walked := "$" + id + "." + kind
	for _, step := range strings.Split(path[1:], ".") {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[step]
			if !ok {
				return nil, fmt.Errorf("reference $%s.%s%s: %s has no field '%s'", id, kind, path, walked, step)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("reference $%s.%s%s: %s is an array of %d; '%s' is not an index in it", id, kind, path, walked, len(c), step)
			}
			cur = c[i]
		default:
			return nil, &valueError{
				full:     fmt.Sprintf("reference $%s.%s%s: %s is %s, not an object or array", id, kind, path, walked, jsonvalue.Canonical(c)),
				redacted: fmt.Sprintf("reference $%s.%s%s: %s is not an object or array", id, kind, path, walked),
			}
		}
		walked += "." + step
	}
	return cur, nil
}
