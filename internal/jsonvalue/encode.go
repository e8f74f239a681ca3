package jsonvalue

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Append appends the JSON encoding of v to buf, byte for byte what
// json.Marshal writes. The values JSON decodes into (objects as
// map[string]any, arrays as []any, strings, json.Number, float64, bool,
// nil), lists of strings, maps of strings or booleans and integers are
// written directly, without reflection; anything else is handed to
// json.Marshal. On an error buf is
// to be discarded.
func Append(buf []byte, v any) ([]byte, error) {
	return appendValue(buf, v, 0)
}

// maxDirectDepth is how deep Append writes values itself; deeper ones go to
// json.Marshal, which detects cycles.
const maxDirectDepth = 500

func appendValue(buf []byte, v any, depth int) ([]byte, error) {
	if depth > maxDirectDepth {
		return appendMarshal(buf, v)
	}
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return AppendString(buf, x), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case json.Number:
		if x == "" {
			return append(buf, '0'), nil // as encoding/json writes the zero Number
		}
		if !isNumber(string(x)) {
			return appendMarshal(buf, v) // its error
		}
		return append(buf, x...), nil
	case float64:
		return AppendFloat(buf, x)
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case map[string]any:
		return appendObject(buf, x, func(buf []byte, e any) ([]byte, error) { return appendValue(buf, e, depth+1) })
	case map[string]string:
		return appendObject(buf, x, stringValue)
	case map[string]bool:
		return appendObject(buf, x, func(buf []byte, b bool) ([]byte, error) { return strconv.AppendBool(buf, b), nil })
	case []string:
		return appendArray(buf, x, stringValue)
	case []any:
		return appendArray(buf, x, func(buf []byte, e any) ([]byte, error) { return appendValue(buf, e, depth+1) })
	}
	return appendMarshal(buf, v)
}

// stringValue writes a string as appendObject and appendArray take a value.
func stringValue(buf []byte, s string) ([]byte, error) { return AppendString(buf, s), nil }

// appendArray writes a slice as an array, each element by value.
func appendArray[V any](buf []byte, x []V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	if x == nil {
		return append(buf, "null"...), nil
	}
	buf = append(buf, '[')
	for i, e := range x {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = value(buf, e); err != nil {
			return buf, err
		}
	}
	return append(buf, ']'), nil
}

// appendObject writes a map as an object with its keys sorted, as
// encoding/json does, each value by value.
func appendObject[V any](buf []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	if m == nil {
		return append(buf, "null"...), nil
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendString(buf, k)
		buf = append(buf, ':')
		var err error
		if buf, err = value(buf, m[k]); err != nil {
			return buf, err
		}
	}
	return append(buf, '}'), nil
}

func appendMarshal(buf []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return buf, err
	}
	return append(buf, b...), nil
}

// AppendFloat writes a float64 as encoding/json does: plain notation
// between 1e-6 and 1e21, exponent notation outside, with no leading zero
// in a negative exponent. Infinities and NaN are json.Marshal's error.
func AppendFloat(buf []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return appendMarshal(buf, f) // its error
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, nil
}

// isNumber reports whether s is a JSON number literal.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		if s = s[1:]; s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = skipDigits(s[1:])
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && isDigit(s[1]) {
		s = skipDigits(s[2:])
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			if s = s[1:]; s == "" {
				return false
			}
		}
		if !isDigit(s[0]) {
			return false
		}
		s = skipDigits(s)
	}
	return s == ""
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func skipDigits(s string) string {
	for s != "" && isDigit(s[0]) {
		s = s[1:]
	}
	return s
}

const hexDigits = "0123456789abcdef"

// AppendString writes s as a JSON string escaped as encoding/json escapes
// it: HTML's <, > and & too, invalid UTF-8 as U+FFFD, and U+2028 and
// U+2029.
func AppendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// AppendStringMember appends ,"name":"value" (value escaped) when value is
// not empty: an optional string member of an object being written.
func AppendStringMember(buf []byte, name, value string) []byte {
	if value == "" {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, name...)
	buf = append(buf, '"', ':')
	return AppendString(buf, value)
}
