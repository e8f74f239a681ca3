package engine

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// refPattern matches a reference to an earlier action's output:
// $<id>.output, optionally followed by .field or .index steps.
var refPattern = regexp.MustCompile(`\$([A-Za-z0-9_\-]+)\.output((?:\.[A-Za-z0-9_\-]+)*)`)

// referencedIDs returns the action ids that parameters refer to. A reference
// implies a dependency edge.
func referencedIDs(v any, out map[string]struct{}) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "$") {
			return
		}
		for _, m := range refPattern.FindAllStringSubmatch(x, -1) {
			out[m[1]] = struct{}{}
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
// JSON). Containers are copied; call it only on parameters that refer.
func interpolate(v any, outputs func(id string) (any, bool)) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "$") {
			return x, nil
		}
		if loc := refPattern.FindStringSubmatchIndex(x); loc != nil && loc[0] == 0 && loc[1] == len(x) {
			return resolveRef(x[loc[2]:loc[3]], x[loc[4]:loc[5]], outputs)
		}
		var firstErr error
		out := refPattern.ReplaceAllStringFunc(x, func(ref string) string {
			m := refPattern.FindStringSubmatch(ref)
			val, err := resolveRef(m[1], m[2], outputs)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return ref
			}
			if s, ok := val.(string); ok {
				return s
			}
			return string(jsonvalue.Canonical(val))
		})
		return out, firstErr
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := interpolate(e, outputs)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := interpolate(e, outputs)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// resolveRef walks path (".items.0.name") into the output of action id.
func resolveRef(id, path string, outputs func(string) (any, bool)) (any, error) {
	cur, ok := outputs(id)
	if !ok {
		return nil, fmt.Errorf("reference $%s.output%s: action '%s' has no output (it did not succeed)", id, path, id)
	}
	if path == "" {
		return cur, nil
	}
	walked := "$" + id + ".output"
	for _, step := range strings.Split(path[1:], ".") {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[step]
			if !ok {
				return nil, fmt.Errorf("reference $%s.output%s: %s has no field '%s'", id, path, walked, step)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("reference $%s.output%s: %s is an array of %d; '%s' is not an index in it", id, path, walked, len(c), step)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("reference $%s.output%s: %s is %s, not an object or array", id, path, walked, jsonvalue.Canonical(c))
		}
		walked += "." + step
	}
	return cur, nil
}
