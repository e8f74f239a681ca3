package wsstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/sourcegraph/jsonrpc2"
)

// The JSON-RPC library hands ReadObject and WriteObject a pointer to its
// unexported message type, a request or a response, and encodes it with
// its own MarshalJSON and UnmarshalJSON: a request's params go through a
// map of interfaces and back to JSON, and every incoming message is decoded
// twice. The codec here reads and writes that type directly instead,
// through its layout, which message describes and messageOf checks against
// the library's type before relying on it. What it does not cover (batches,
// members JSON-RPC does not define, ids or errors of unusual shape, a
// library whose type has changed) goes through encoding/json as before.
type message struct {
	request  *jsonrpc2.Request
	response *jsonrpc2.Response
}

var (
	requestType  = reflect.TypeFor[*jsonrpc2.Request]()
	responseType = reflect.TypeFor[*jsonrpc2.Response]()
	// messageType is the library's message pointer type, once checked.
	messageType atomic.Pointer[reflect.Type]
)

// messageOf returns v as the library's message, or nil when v is anything
// else or the library's type no longer has message's layout.
func messageOf(v any) *message {
	t := reflect.TypeOf(v)
	if known := messageType.Load(); known == nil || *known != t {
		if !hasMessageLayout(t) {
			return nil
		}
		checked := t
		messageType.Store(&checked)
	}
	return (*message)(reflect.ValueOf(v).UnsafePointer())
}

// hasMessageLayout reports whether t is a pointer to a struct laid out as
// message: the library's request and response pointers and nothing else.
func hasMessageLayout(t reflect.Type) bool {
	if t == nil || t.Kind() != reflect.Pointer {
		return false
	}
	s := t.Elem()
	if s.Kind() != reflect.Struct || s.PkgPath() != requestType.Elem().PkgPath() || s.NumField() != 2 ||
		s.Size() != unsafe.Sizeof(message{}) {
		return false
	}
	req, resp := s.Field(0), s.Field(1)
	return req.Name == "request" && req.Type == requestType && req.Offset == unsafe.Offsetof(message{}.request) &&
		resp.Name == "response" && resp.Type == responseType && resp.Offset == unsafe.Offsetof(message{}.response)
}

// decodeInto decodes one frame into v, the library's message: directly
// when the frame is a plain request or response, else through the
// library's own decoder. valid says data is known to be valid JSON. The
// message keeps slices of data, which must not change afterwards.
func decodeInto(data []byte, v any, valid bool) error {
	if m := messageOf(v); m != nil {
		if req, resp, ok := decodeMessage(data, valid); ok {
			m.request, m.response = req, resp
			return nil
		}
	}
	return json.Unmarshal(data, v)
}

// request is a decoded request with its params, in one allocation.
type request struct {
	jsonrpc2.Request
	params, meta json.RawMessage
}

// response is a decoded response with its result, in one allocation.
type response struct {
	jsonrpc2.Response
	result, meta json.RawMessage
}

// decodeMessage decodes a frame as the library would, for the frames it
// can read without decoding any value but the id: ok is false for anything
// else.
func decodeMessage(data []byte, valid bool) (*jsonrpc2.Request, *jsonrpc2.Response, bool) {
	var env Envelope
	var ok bool
	if valid {
		env, ok = splitEnvelope(data, nil)
	} else {
		env, ok = ParseEnvelope(data, nil)
	}
	if !ok || env.Other > 0 {
		return nil, nil, false
	}
	isRequest := env.Method != nil && !isNull(env.Method)
	isResponse := env.Result != nil || (env.Error != nil && !isNull(env.Error))
	switch {
	case isRequest && !isResponse:
		return decodeRequest(&env)
	case isResponse && !isRequest:
		return decodeResponse(&env)
	}
	return nil, nil, false
}

func decodeRequest(env *Envelope) (*jsonrpc2.Request, *jsonrpc2.Response, bool) {
	method, ok := methodName(env.Method)
	if !ok {
		return nil, nil, false
	}
	r := &request{}
	r.Method = method
	switch {
	case env.ID == nil || isNull(env.ID):
		r.Notif = true
	case env.ID[0] == '"':
		s, ok := unquote(env.ID)
		if !ok {
			return nil, nil, false
		}
		r.ID = jsonrpc2.ID{Str: s, IsString: true}
	default:
		// The library reads a request's numeric id as an int64.
		n, err := strconv.ParseInt(string(env.ID), 10, 64)
		if err != nil || n < 0 {
			return nil, nil, false
		}
		r.ID = jsonrpc2.ID{Num: uint64(n)}
	}
	r.Params = rawMember(env.Params, &r.params)
	r.Meta = rawMember(env.Meta, &r.meta)
	return &r.Request, nil, true
}

func decodeResponse(env *Envelope) (*jsonrpc2.Request, *jsonrpc2.Response, bool) {
	r := &response{}
	switch {
	case env.ID == nil || isNull(env.ID):
		return nil, nil, false
	case env.ID[0] == '"':
		s, ok := unquote(env.ID)
		if !ok {
			return nil, nil, false
		}
		r.ID = jsonrpc2.ID{Str: s, IsString: true}
	default:
		n, err := strconv.ParseUint(string(env.ID), 10, 64)
		if err != nil {
			return nil, nil, false
		}
		r.ID = jsonrpc2.ID{Num: n}
	}
	if env.Error != nil && !isNull(env.Error) {
		var e jsonrpc2.Error
		if err := json.Unmarshal(env.Error, &e); err != nil {
			return nil, nil, false
		}
		r.Error = &e
	}
	r.Result = rawMember(env.Result, &r.result)
	if r.Result == nil && r.Error == nil {
		r.Result = &r.result
		r.result = jsonNull
	}
	r.Meta = rawMember(env.Meta, &r.meta)
	return nil, &r.Response, true
}

var jsonNull = json.RawMessage("null")

// rawMember is a member as the library holds it: nil when absent, null
// when null, else its JSON (kept in *slot).
func rawMember(v []byte, slot *json.RawMessage) *json.RawMessage {
	if v == nil {
		return nil
	}
	if isNull(v) {
		*slot = jsonNull
	} else {
		*slot = v
	}
	return slot
}

// unquote decodes a JSON string; the plain ones (no escapes, valid UTF-8,
// which the decoder would replace) without a decoder.
func unquote(v []byte) (string, bool) {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// methods interns method names, so that a request does not allocate its
// method's name again; bounded, since peers choose the names.
var methods = struct {
	sync.RWMutex
	names map[string]string
}{names: map[string]string{}}

const maxInternedMethods = 512

// methodName decodes a request's method, which must be a string.
func methodName(v []byte) (string, bool) {
	if v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	methods.RLock()
	name, ok := methods.names[string(inner)]
	methods.RUnlock()
	if ok {
		return name, true
	}
	name, ok = unquote(v)
	if !ok {
		return "", false
	}
	if bytes.IndexByte(inner, '\\') < 0 {
		methods.Lock()
		if len(methods.names) < maxInternedMethods {
			methods.names[name] = name
		}
		methods.Unlock()
	}
	return name, true
}

// buffers hold a frame while it is read or written; one that grew past
// 64 KiB is not kept.
var buffers = bufpool.New(1024, 64<<10)

// encode appends v, the library's message, to buf as the library would
// encode it (the same members in the same order), and reports whether it
// could: a request with extra fields, an error response and anything else
// is left to encoding/json.
func encode(buf []byte, v any) ([]byte, bool) {
	m := messageOf(v)
	switch {
	case m == nil:
		return buf, false
	case m.request != nil && m.response == nil:
		r := m.request
		if len(r.ExtraFields) > 0 {
			return buf, false
		}
		// The library sorts a request's members by name.
		buf = append(buf, '{')
		if !r.Notif {
			buf = append(buf, `"id":`...)
			buf = appendID(buf, r.ID)
			buf = append(buf, ',')
		}
		buf = append(buf, `"jsonrpc":"2.0"`...)
		if r.Meta != nil {
			buf = append(append(buf, `,"meta":`...), *r.Meta...)
		}
		buf = append(buf, `,"method":`...)
		buf = jsonvalue.AppendString(buf, r.Method)
		if r.Params != nil {
			buf = append(append(buf, `,"params":`...), *r.Params...)
		}
		return append(buf, '}'), true
	case m.response != nil && m.request == nil:
		r := m.response
		if r.Error != nil || r.Result == nil || len(*r.Result) == 0 {
			return buf, false
		}
		buf = append(buf, `{"id":`...)
		buf = appendID(buf, r.ID)
		buf = append(append(buf, `,"result":`...), *r.Result...)
		if r.Meta != nil {
			buf = append(append(buf, `,"meta":`...), *r.Meta...)
		}
		return append(buf, `,"jsonrpc":"2.0"}`...), true
	}
	return buf, false
}

// appendID writes an id; a negative one carried as a marked string is
// written as the number the peer sent (see LiftID).
func appendID(buf []byte, id jsonrpc2.ID) []byte {
	if !id.IsString {
		return strconv.AppendUint(buf, id.Num, 10)
	}
	if n, ok := strings.CutPrefix(id.Str, negativeIDMarker); ok && isNegativeInteger(n) {
		return append(buf, n...)
	}
	return jsonvalue.AppendString(buf, id.Str)
}

func isNegativeInteger(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
