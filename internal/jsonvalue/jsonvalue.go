// Package jsonvalue compares and prints decoded JSON values (nil, bool,
// json.Number or Go numbers, string, []any, map[string]any) the same way
// everywhere: the engine's preconditions and the policy rules agree on what
// "equal" and "contains" mean.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// ToFloat coerces a JSON number to float64.
func ToFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// Equal compares two values as JSON: numbers by value (1 == 1.0),
// objects by members, arrays element-wise.
func Equal(a, b any) bool {
	if fa, ok := ToFloat(a); ok {
		fb, ok := ToFloat(b)
		if !ok {
			return false
		}
		if fa == fb {
			return numEqualExact(a, b)
		}
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// numEqualExact settles numbers whose float64 images are equal but which may
// differ beyond float precision (large integers).
func numEqualExact(a, b any) bool {
	ra, okA := new(big.Rat).SetString(numString(a))
	rb, okB := new(big.Rat).SetString(numString(b))
	if !okA || !okB {
		return true
	}
	return ra.Cmp(rb) == 0
}

func numString(v any) string {
	switch n := v.(type) {
	case json.Number:
		return n.String()
	case float64:
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// Canonical encodes v with sorted object keys (encoding/json sorts map
// keys) and numbers as given, so equal values give equal bytes.
func Canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%#v", v))
	}
	return b
}

// SortedKeys returns the keys of a JSON object (or any string-keyed map) in
// order, for output and hashing that must not depend on map order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// String is a value's string form for substring rules: a string as it is,
// anything else as JSON with sorted keys and no HTML escaping, so that
// "&&" inside an array reads as "&&", not "\u0026\u0026".
func String(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
