package jsonvalue

import (
	"strconv"
	"strings"
)

// stringSkip follows JSON text byte by byte and tells which bytes belong to a
// string, so that a scan for structure or numbers can pass over them.
type stringSkip struct{ in, escaped bool }

// inString reports whether b, the next byte of the text, is part of a string
// (its quotes included).
func (s *stringSkip) inString(b byte) bool {
	switch {
	case !s.in:
		s.in = b == '"'
		return s.in
	case s.escaped:
		s.escaped = false
	case b == '\\':
		s.escaped = true
	case b == '"':
		s.in = false
	}
	return true
}

// Depth is the deepest nesting of objects and arrays in data, strings
// skipped. data need not be valid JSON: Depth says how deep a text goes that
// a decoder refused.
func Depth(data []byte) int {
	var s stringSkip
	depth, deepest := 0, 0
	for _, b := range data {
		if s.inString(b) {
			continue
		}
		switch b {
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// NumbersFitFloat64 reports whether every number in the valid JSON value v
// is within the float64 range; only a number with an exponent or of more
// than 300 digits can be outside it.
func NumbersFitFloat64(v []byte) bool {
	var s stringSkip
	for i := 0; i < len(v); i++ {
		if b := v[i]; s.inString(b) || (b != '-' && (b < '0' || b > '9')) {
			continue
		}
		j, long := i, false
		for j < len(v) && strings.IndexByte("+-0123456789.eE", v[j]) >= 0 {
			long = long || v[j] == 'e' || v[j] == 'E'
			j++
		}
		if long || j-i > 300 {
			if _, err := strconv.ParseFloat(string(v[i:j]), 64); err != nil {
				return false
			}
		}
		i = j - 1
	}
	return true
}
