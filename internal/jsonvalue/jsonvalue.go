// Package jsonvalue compares and prints decoded JSON values (nil, bool,
// json.Number or Go numbers, string, []any, map[string]any) the same way
// everywhere: the engine's preconditions and the policy rules agree on what
// "equal" and "contains" mean. It also holds the one scanner of raw JSON
// text (Valid, ValidDepth, Depth, Members, SkipValue, ValueEnd) and the
// encoder (Append, AppendString) that the hand-written decoders and
// encoders of protocol, wsstream, rpc and the journal share. It imports no
// other package of the daemon.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// Equal compares two values as JSON: numbers by exact decimal value
// (1 == 1.0 == 10e-1), objects by members, arrays element-wise. It is
// reflexive for every JSON value, and a number costs time linear in its
// length, however many digits or however large its exponent.
func Equal(a, b any) bool {
	if da, ok := decimalOf(a); ok {
		db, ok := decimalOf(b)
		return ok && da == db
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

// decimal is a number in one normal form, 0.digits × 10^exp with no leading
// or trailing zero digit, so that equal numbers have equal forms. An exponent
// beyond int64 (no float holds such a number) stays as its text.
type decimal struct {
	neg    bool
	digits string
	exp    int64
	bigExp string
}

// decimalOf reads a JSON number (json.Number or a Go number) into its normal
// form; ok is false for anything else.
func decimalOf(v any) (decimal, bool) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = n.String()
	case float64:
		s = strconv.FormatFloat(n, 'g', -1, 64)
	case float32:
		s = strconv.FormatFloat(float64(n), 'g', -1, 32)
	case int:
		s = strconv.Itoa(n)
	case int64:
		s = strconv.FormatInt(n, 10)
	case uint64:
		s = strconv.FormatUint(n, 10)
	default:
		return decimal{}, false
	}
	d, ok := parseDecimal(s)
	if !ok { // NaN, Inf or a malformed json.Number: only the same text is equal
		return decimal{digits: s}, true
	}
	return d, true
}

// parseDecimal normalises the text of a number: [-]int[.frac][(e|E)[+-]exp].
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		d.neg = s[i] == '-'
		i++
	}
	mant := make([]byte, 0, len(s))
	point := -1
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			mant = append(mant, c)
		case c == '.' && point < 0:
			point = len(mant)
		default:
			goto exponent
		}
	}
exponent:
	if len(mant) == 0 {
		return decimal{}, false
	}
	if point < 0 {
		point = len(mant)
	}
	var expText string
	if i < len(s) {
		if s[i] != 'e' && s[i] != 'E' {
			return decimal{}, false
		}
		expText = s[i+1:]
	}
	// 0.mant × 10^point, then strip zeros on both ends.
	lead := 0
	for lead < len(mant) && mant[lead] == '0' {
		lead++
	}
	if lead == len(mant) {
		return decimal{}, true // zero, of either sign
	}
	trail := len(mant)
	for mant[trail-1] == '0' {
		trail--
	}
	d.digits = string(mant[lead:trail])
	shift := int64(point - lead)
	if expText == "" {
		d.exp = shift
		return d, true
	}
	e, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return decimal{}, false
		}
		d.exp = shift
		d.bigExp = bigExponent(expText)
		return d, true
	}
	if (e > 0 && shift > math.MaxInt64-e) || (e < 0 && shift < math.MinInt64-e) {
		d.exp = shift
		d.bigExp = strconv.FormatInt(e, 10)
		return d, true
	}
	d.exp = e + shift
	return d, true
}

// bigExponent writes an exponent beyond int64 in one form: a sign only when
// negative, no leading zeros.
func bigExponent(text string) string {
	sign := ""
	switch {
	case strings.HasPrefix(text, "-"):
		sign, text = "-", text[1:]
	case strings.HasPrefix(text, "+"):
		text = text[1:]
	}
	return sign + strings.TrimLeft(text, "0")
}

// Canonical encodes v with sorted object keys (encoding/json sorts map
// keys) and numbers as given, so equal values give equal bytes.
func Canonical(v any) []byte {
	b, err := Append(nil, v)
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
