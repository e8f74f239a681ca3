package wsstream

import (
	"bytes"
	"encoding/json"
)

// Envelope is a JSON-RPC message's members, each the slice of the frame
// that holds its value (nil when the member is absent). Where a member
// appears twice the last one counts, as it does for encoding/json.
type Envelope struct {
	JSONRPC, ID, Method, Params, Meta, Result, Error []byte
	// Other counts the members that are none of the above.
	Other int
}

// ParseEnvelope splits a frame that is one JSON object into its members in
// one pass, without decoding their values; other, when not nil, is called
// with the (unescaped) name of every member that is not a JSON-RPC one. ok
// is false when the frame is not valid JSON or not an object.
func ParseEnvelope(frame []byte, other func(name string)) (env Envelope, ok bool) {
	if !json.Valid(frame) {
		return env, false
	}
	i := skipSpace(frame, 0)
	if i >= len(frame) || frame[i] != '{' {
		return env, false
	}
	i = skipSpace(frame, i+1)
	if frame[i] == '}' {
		return env, true
	}
	for {
		// The frame is valid JSON: a member name comes next, then a colon.
		nameEnd := skipString(frame, i)
		name := frame[i+1 : nameEnd-1]
		i = skipSpace(frame, nameEnd)
		i = skipSpace(frame, i+1) // the colon
		valueEnd := skipValue(frame, i)
		env.set(name, frame[i:valueEnd], other)
		i = skipSpace(frame, valueEnd)
		if frame[i] == '}' {
			return env, true
		}
		i = skipSpace(frame, i+1) // the comma
	}
}

// set files one member under its name.
func (env *Envelope) set(name, value []byte, other func(string)) {
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &s) == nil {
			name = []byte(s)
		}
	}
	switch string(name) {
	case "jsonrpc":
		env.JSONRPC = value
	case "id":
		env.ID = value
	case "method":
		env.Method = value
	case "params":
		env.Params = value
	case "meta":
		env.Meta = value
	case "result":
		env.Result = value
	case "error":
		env.Error = value
	default:
		env.Other++
		if other != nil {
			other(string(name))
		}
	}
}

// isNull reports whether a member's value is the JSON null.
func isNull(v []byte) bool { return string(v) == "null" }

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string that starts at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the valid JSON value that starts at i.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // a number, true, false or null
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
		}
		return i
	}
}
