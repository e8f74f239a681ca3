package jsonvalue

// Members calls f with the raw name (without its quotes, escapes as
// written) and the raw value of each member of the JSON object obj, in
// order, until f returns false. It reports whether obj was an object it
// walked to its end. obj must be valid JSON — Members checks the structure
// around the members, not the values it skips — and it never reads past
// obj, whatever obj holds.
func Members(obj []byte, f func(name, value []byte) bool) bool {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = SkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) && obj[i] == '"' {
		nameEnd := SkipString(obj, i)
		if nameEnd > len(obj) {
			return false
		}
		name := obj[i+1 : nameEnd-1]
		i = SkipSpace(obj, nameEnd)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		start := SkipSpace(obj, i+1)
		end := SkipValue(obj, start)
		if end > len(obj) || end == start || !f(name, obj[start:end]) {
			return false
		}
		i = SkipSpace(obj, end)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return true
		case ',':
			i = SkipSpace(obj, i+1)
		default:
			return false
		}
	}
	return false
}

// SkipValue returns the index just past the JSON value that starts at i in
// b, valid JSON: strings and nesting are followed, nothing is checked. On
// input that ends early it returns len(b)+1.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b) + 1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = SkipString(b, i) - 1; i >= len(b) {
					return len(b) + 1
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b) + 1
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

// SkipString returns the index just past the string starting at i in b,
// valid JSON (escapes are followed, nothing is checked), or len(b)+1 when
// it does not end.
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b) + 1
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
