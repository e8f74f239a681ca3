package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/wsstream"
	"github.com/parslee-ai/car-server/protocol"
)

// envelopeMembers are the member names the JSON-RPC layer reads. It matches
// some of them case-insensitively and some exactly, so a frame must spell
// them exactly.
var envelopeMembers = []string{"jsonrpc", "method", "id", "params", "meta", "result", "error"}

// checkFrame answers frames the JSON-RPC layer must not see: text that is not
// JSON (-32700), batches and envelopes that are not JSON-RPC 2.0 (-32600).
// Every frame it passes is one the JSON-RPC layer decodes, so one bad frame
// never closes the whole connection. A negative integer id, which that
// layer cannot hold, is passed on as the stream's marked string id
// (wsstream.LiftID); the stream restores it in the reply.
func checkFrame(frame []byte) (pass, reply []byte) {
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, notJSON(frame)
	}
	var members map[string]json.RawMessage
	switch trimmed[0] {
	case '{':
		// Unmarshal validates too: the valid frame is scanned once.
		if err := json.Unmarshal(frame, &members); err != nil {
			return nil, notJSON(frame)
		}
	case '[':
		if !json.Valid(frame) {
			return nil, notJSON(frame)
		}
		return nil, errorFrame(nil, protocol.CodeInvalidRequest,
			"invalid request: batch requests (JSON arrays) are not supported; send each request as its own frame")
	default:
		if !json.Valid(frame) {
			return nil, notJSON(frame)
		}
		return nil, errorFrame(nil, protocol.CodeInvalidRequest,
			"invalid request: a frame must be a JSON-RPC 2.0 object")
	}
	lifted := false
	if raw, ok := members["id"]; ok {
		if l, ok := wsstream.LiftID(raw); ok {
			members["id"], lifted = l, true
		}
	}
	id, idOK := validID(members["id"])
	invalid := func(message string) ([]byte, []byte) {
		return nil, errorFrame(id, protocol.CodeInvalidRequest, "invalid request: "+message)
	}
	if msg := misspelledMember(members); msg != "" {
		return invalid(msg)
	}
	if !idOK {
		return invalid("id must be a string, an integer from -9223372036854775808 to 9223372036854775807, or absent")
	}
	var version string
	if v, ok := members["jsonrpc"]; !ok || json.Unmarshal(v, &version) != nil || version != "2.0" {
		return invalid(`the member "jsonrpc" must be exactly "2.0"`)
	}
	rawMethod, isRequest := members["method"]
	_, hasResult := members["result"]
	rawError, hasError := members["error"]
	isResponse := hasResult || hasError
	if !isRequest {
		if !isResponse {
			return invalid(`a request needs a "method" string`)
		}
		if msg := badResponse(frame, members["result"], hasResult, rawError); msg != "" {
			return invalid(msg)
		}
		return passed(frame, members, lifted)
	}
	if isResponse {
		return invalid(`a message cannot carry both "method" and "result"/"error"`)
	}
	var method string
	if err := json.Unmarshal(rawMethod, &method); err != nil || method == "" {
		return invalid(`"method" must be a non-empty string`)
	}
	return passed(frame, members, lifted)
}

// notJSON is the reply to a frame that does not decode: too deep for the
// decoder, or not JSON at all.
func notJSON(frame []byte) []byte {
	if nestingDepth(frame) > maxNesting {
		return errorFrame(nil, protocol.CodeParseError, fmt.Sprintf(
			"parse error: the frame is JSON nested deeper than %d levels, which this daemon does not decode; flatten the value", maxNesting))
	}
	return errorFrame(nil, protocol.CodeParseError,
		"parse error: the frame is not valid JSON; send one JSON-RPC 2.0 object per text frame")
}

// passed is the frame to decode: as it came, or re-encoded with its lifted id.
func passed(frame []byte, members map[string]json.RawMessage, lifted bool) ([]byte, []byte) {
	if !lifted {
		return frame, nil
	}
	out, err := json.Marshal(members)
	if err != nil {
		return nil, errorFrame(nil, protocol.CodeInternal, "internal error: the frame could not be re-encoded")
	}
	return out, nil
}

// maxNesting is the deepest JSON value encoding/json decodes.
const maxNesting = 10000

// nestingDepth is the deepest nesting of arrays and objects in frame,
// strings skipped; it reads frames that are not valid JSON too.
func nestingDepth(frame []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range frame {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '[' || b == '{':
			depth++
			deepest = max(deepest, depth)
		case b == ']' || b == '}':
			depth--
		}
	}
	return deepest
}

// misspelledMember names an envelope member spelled in another case: the
// JSON-RPC layer would read some such members and ignore others.
func misspelledMember(members map[string]json.RawMessage) string {
	for name := range members {
		for _, want := range envelopeMembers {
			if name != want && strings.EqualFold(name, want) {
				return strconv.Quote(name) + ` is not a JSON-RPC member; member names are case-sensitive: write ` + strconv.Quote(want)
			}
		}
	}
	return ""
}

// badResponse says what keeps a response frame from decoding as the JSON-RPC
// layer decodes it: a result or an error it cannot hold, or neither.
func badResponse(frame, result json.RawMessage, hasResult bool, rawError json.RawMessage) string {
	errNull := rawError == nil || string(rawError) == "null"
	if !hasResult && errNull {
		return `a response needs a "result" or a non-null "error"`
	}
	var v any
	if hasResult && json.Unmarshal(result, &v) != nil {
		return `"result" holds a number outside the float64 range`
	}
	if !errNull {
		var e jsonrpc2.Error
		if json.Unmarshal(rawError, &v) != nil || json.Unmarshal(rawError, &e) != nil {
			return `"error" must be an object {code: integer, message: string, data?: any} with numbers in the float64 range`
		}
	}
	var r jsonrpc2.Response
	if err := json.Unmarshal(frame, &r); err != nil {
		return "the response does not decode: " + err.Error()
	}
	return ""
}

// validID reports whether raw is an id this server can echo and the JSON-RPC
// layer can hold, and returns it in a form that can be echoed (nil for absent
// or null).
func validID(raw json.RawMessage) (json.RawMessage, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, true
	}
	switch raw[0] {
	case '"':
		return raw, true
	case '-':
		return nil, false
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
		return nil, false
	}
	return raw, true
}

// errorFrame encodes an error response; a nil id is sent as null.
func errorFrame(id json.RawMessage, code int, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	return b
}
