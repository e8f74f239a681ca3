package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/parslee-ai/car-server/protocol"
)

// frameProbe holds the envelope members that decide what a frame is.
type frameProbe struct {
	JSONRPC *string         `json:"jsonrpc"`
	Method  json.RawMessage `json:"method"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// checkFrame answers frames the JSON-RPC layer must not see: text that is not
// JSON (-32700), batches and envelopes that are not JSON-RPC 2.0 (-32600).
// Answering here keeps one bad frame from closing the whole connection.
func checkFrame(frame []byte) ([]byte, bool) {
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	notJSON := func() ([]byte, bool) {
		return errorFrame(nil, protocol.CodeParseError,
			"parse error: the frame is not valid JSON; send one JSON-RPC 2.0 object per text frame"), false
	}
	if len(trimmed) == 0 {
		return notJSON()
	}
	switch trimmed[0] {
	case '{':
	case '[':
		if !json.Valid(frame) {
			return notJSON()
		}
		return errorFrame(nil, protocol.CodeInvalidRequest,
			"invalid request: batch requests (JSON arrays) are not supported; send each request as its own frame"), false
	default:
		if !json.Valid(frame) {
			return notJSON()
		}
		return errorFrame(nil, protocol.CodeInvalidRequest,
			"invalid request: a frame must be a JSON-RPC 2.0 object"), false
	}
	var p frameProbe
	if err := json.Unmarshal(frame, &p); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(frame) {
			return notJSON()
		}
		return errorFrame(nil, protocol.CodeInvalidRequest, "invalid request: "+err.Error()), false
	}
	id, idOK := validID(p.ID)
	if !idOK {
		return errorFrame(nil, protocol.CodeInvalidRequest,
			"invalid request: id must be a string, a non-negative integer or absent"), false
	}
	if p.JSONRPC == nil || *p.JSONRPC != "2.0" {
		return errorFrame(id, protocol.CodeInvalidRequest,
			`invalid request: the member "jsonrpc" must be exactly "2.0"`), false
	}
	isResponse := p.Result != nil || p.Error != nil
	if p.Method == nil {
		if isResponse {
			return nil, true
		}
		return errorFrame(id, protocol.CodeInvalidRequest,
			`invalid request: a request needs a "method" string`), false
	}
	if isResponse {
		return errorFrame(id, protocol.CodeInvalidRequest,
			`invalid request: a message cannot carry both "method" and "result"/"error"`), false
	}
	var method string
	if err := json.Unmarshal(p.Method, &method); err != nil || method == "" {
		return errorFrame(id, protocol.CodeInvalidRequest,
			`invalid request: "method" must be a non-empty string`), false
	}
	return nil, true
}

// validID reports whether raw is an id this server can echo, and returns it
// in a form that can be echoed (nil for absent or null).
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
	if _, err := strconv.ParseUint(string(raw), 10, 64); err != nil {
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
