package wsstream

import (
	"bytes"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
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
	if !jsonvalue.Valid(frame) {
		return env, false
	}
	return splitEnvelope(frame, other)
}

// splitEnvelope is ParseEnvelope for a frame already known to be valid
// JSON.
func splitEnvelope(frame []byte, other func(name string)) (env Envelope, ok bool) {
	ok = jsonvalue.Members(frame, func(name, value []byte) bool {
		env.set(name, value, other)
		return true
	})
	return env, ok
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
