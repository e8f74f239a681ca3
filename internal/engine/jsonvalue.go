package engine

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
)

// Values in the engine are decoded JSON: nil, bool, json.Number (or float64
// and int from Go callers), string, []any and map[string]any.

// toFloat coerces a JSON number to float64.
func toFloat(v any) (float64, bool) {
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

// jsonEqual compares two values as JSON: numbers by value (1 == 1.0),
// objects by members, arrays element-wise.
func jsonEqual(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
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
			if !jsonEqual(x[i], y[i]) {
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
			if !ok || !jsonEqual(v, w) {
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

// canonicalJSON encodes v with sorted object keys (encoding/json sorts map
// keys) and numbers as given, so equal values give equal bytes.
func canonicalJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%#v", v))
	}
	return b
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
