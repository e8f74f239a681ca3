package jsonvalue

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Size is the length of v encoded as JSON, counted without encoding it,
// and counted only up to limit: past it, a value over limit is all a caller
// needs to know, however large the value is.
func Size(v any, limit int64) int64 {
	var n int64
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			n += StringSize(x)
		case []any:
			n += 2 + max(int64(len(x))-1, 0) // brackets, commas
			for _, e := range x {
				if n > limit || !walk(e) {
					return false
				}
			}
		case map[string]any:
			n += 2 + max(2*int64(len(x))-1, 0) // braces, colons, commas
			for k, e := range x {
				n += StringSize(k)
				if n > limit || !walk(e) {
					return false
				}
			}
		case json.Number:
			n += int64(len(x))
		case float64:
			b, _ := AppendFloat(make([]byte, 0, 24), x)
			n += int64(len(b))
		case int:
			n += intSize(int64(x))
		case int64:
			n += intSize(x)
		case uint64:
			n += int64(len(strconv.AppendUint(make([]byte, 0, 20), x, 10)))
		case bool:
			n += 4
			if !x {
				n++
			}
		case nil:
			n += 4
		default:
			n += int64(len(Canonical(x)))
		}
		return n <= limit
	}
	walk(v)
	return n
}

// StringSize is the length of s as AppendString encodes it, quotes and
// escapes included (<, > and & escaped too, \b and \f in two bytes, U+2028,
// U+2029 and each invalid UTF-8 byte in six).
func StringSize(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += int64(size)
		}
		i += size
	}
	return n
}

// intSize is the length of x in decimal.
func intSize(x int64) int64 {
	return int64(len(strconv.AppendInt(make([]byte, 0, 20), x, 10)))
}
