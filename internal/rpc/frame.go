package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
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
	var misspelled string
	var env wsstream.Envelope
	switch trimmed[0] {
	case '{':
		// The envelope is split in the same pass that validates the frame.
		var ok bool
		env, ok = wsstream.ParseEnvelope(frame, func(name string) {
			if misspelled == "" {
				misspelled = misspelledMember(name)
			}
		})
		if !ok {
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
	var lifted json.RawMessage
	rawID := env.ID
	if l, ok := wsstream.LiftID(rawID); ok {
		lifted, rawID = l, l
	}
	id, idOK := validID(rawID)
	invalid := func(message string) ([]byte, []byte) {
		return nil, errorFrame(id, protocol.CodeInvalidRequest, "invalid request: "+message)
	}
	if misspelled != "" {
		return invalid(misspelled)
	}
	if !idOK {
		return invalid("id must be a string, an integer from -9223372036854775808 to 9223372036854775807, or absent")
	}
	if !isVersion2(env.JSONRPC) {
		return invalid(`the member "jsonrpc" must be exactly "2.0"`)
	}
	isRequest := env.Method != nil
	hasResult := env.Result != nil
	isResponse := hasResult || env.Error != nil
	if !isRequest {
		if !isResponse {
			return invalid(`a request needs a "method" string`)
		}
		if msg := badResponse(frame, env.Result, hasResult, env.Error); msg != "" {
			return invalid(msg)
		}
		return passed(frame, env.ID, lifted)
	}
	if isResponse {
		return invalid(`a message cannot carry both "method" and "result"/"error"`)
	}
	var method string
	if err := json.Unmarshal(env.Method, &method); err != nil || method == "" {
		return invalid(`"method" must be a non-empty string`)
	}
	return passed(frame, env.ID, lifted)
}

// isVersion2 reports whether the jsonrpc member is the string "2.0".
func isVersion2(v []byte) bool {
	if string(v) == `"2.0"` {
		return true
	}
	var version string
	return v != nil && json.Unmarshal(v, &version) == nil && version == "2.0"
}

// notJSON is the reply to a frame that does not decode: too deep for the
// decoder, or not JSON at all.
func notJSON(frame []byte) []byte {
	if jsonvalue.Depth(frame) > maxNesting {
		return errorFrame(nil, protocol.CodeParseError, fmt.Sprintf(
			"parse error: the frame is JSON nested deeper than %d levels, which this daemon does not decode; flatten the value", maxNesting))
	}
	return errorFrame(nil, protocol.CodeParseError,
		"parse error: the frame is not valid JSON; send one JSON-RPC 2.0 object per text frame")
}

// passed is the frame to decode: as it came, or with its id (the slice rawID
// of frame) replaced by the lifted one.
func passed(frame, rawID, lifted []byte) ([]byte, []byte) {
	if lifted == nil {
		return frame, nil
	}
	at := cap(frame) - cap(rawID) // where rawID starts within frame
	out := make([]byte, 0, len(frame)-len(rawID)+len(lifted))
	out = append(out, frame[:at]...)
	out = append(out, lifted...)
	return append(out, frame[at+len(rawID):]...), nil
}

// maxNesting is the deepest JSON value encoding/json decodes.
const maxNesting = 10000

// misspelledMember names an envelope member spelled in another case: the
// JSON-RPC layer would read some such members and ignore others. It is ""
// for any other name.
func misspelledMember(name string) string {
	for _, want := range envelopeMembers {
		if name != want && strings.EqualFold(name, want) {
			return strconv.Quote(name) + ` is not a JSON-RPC member; member names are case-sensitive: write ` + strconv.Quote(want)
		}
	}
	return ""
}

// badResponse says what keeps a response frame from decoding as the JSON-RPC
// layer decodes it: a result or an error it cannot hold, or neither.
func badResponse(frame, result []byte, hasResult bool, rawError []byte) string {
	errNull := rawError == nil || string(rawError) == "null"
	if !hasResult && errNull {
		return `a response needs a "result" or a non-null "error"`
	}
	if hasResult && !jsonvalue.NumbersFitFloat64(result) {
		return `"result" holds a number outside the float64 range`
	}
	if !errNull {
		var v any
		var e jsonrpc2.Error
		if json.Unmarshal(rawError, &v) != nil || json.Unmarshal(rawError, &e) != nil {
			return `"error" must be an object {code: integer, message: string, data?: any} with numbers in the float64 range`
		}
		var r jsonrpc2.Response
		if err := json.Unmarshal(frame, &r); err != nil {
			return "the response does not decode: " + err.Error()
		}
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
