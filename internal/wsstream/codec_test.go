package wsstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// captureStream hands the library's message pointer to got, then ends the
// connection.
type captureStream struct{ got chan any }

func (s captureStream) ReadObject(v any) error { s.got <- v; return errors.New("captured") }
func (captureStream) WriteObject(any) error    { return errors.New("not used") }
func (captureStream) Close() error             { return nil }

// libraryMessageType is the type the JSON-RPC library passes to ReadObject.
func libraryMessageType(t testing.TB) reflect.Type {
	t.Helper()
	s := captureStream{got: make(chan any, 1)}
	c := jsonrpc2.NewConn(context.Background(), s, nil, jsonrpc2.SetLogger(discardLogger{}))
	v := <-s.got
	<-c.DisconnectNotify()
	return reflect.TypeOf(v)
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// newLibraryMessage is a fresh, empty message of the library's type.
func newLibraryMessage(t testing.TB) any {
	return reflect.New(libraryMessageType(t).Elem()).Interface()
}

// The codec only reads and writes the library's message directly while its
// layout is the one the codec knows: a library upgrade that changes it
// must fail here rather than quietly lose the fast path.
func TestLibraryMessageHasTheCodecLayout(t *testing.T) {
	typ := libraryMessageType(t)
	if !hasMessageLayout(typ) {
		t.Fatalf("the JSON-RPC library's message type %v no longer has the layout the codec reads; update wsstream.message", typ)
	}
	if messageOf(reflect.New(typ.Elem()).Interface()) == nil {
		t.Fatal("messageOf refuses the library's message")
	}
	for _, v := range []any{nil, 1, &struct{ a, b *int }{}, &message{}, &struct {
		request  *jsonrpc2.Request
		response *jsonrpc2.Response
	}{}} {
		if messageOf(v) != nil {
			t.Errorf("messageOf(%T) accepted a value that is not the library's message", v)
		}
	}
}

// libraryDecode decodes frame the way the library does on its own.
func libraryDecode(t testing.TB, frame []byte) (*jsonrpc2.Request, *jsonrpc2.Response, error) {
	v := newLibraryMessage(t)
	if err := json.Unmarshal(frame, v); err != nil {
		return nil, nil, err
	}
	m := messageOf(v)
	return m.request, m.response, nil
}

// sameJSON reports whether two members hold the same JSON value (the
// library re-encodes params; the codec keeps them as sent).
func sameJSON(a, b *json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	decode := func(raw []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, errA := decode(*a)
	vb, errB := decode(*b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

// compareWithLibrary fails when the codec decodes frame differently from
// the library. The codec may decline a frame (the library then decodes
// it), and may read a frame the library refuses: a result holding a number
// beyond float64, which the library decodes into an interface on the way.
func compareWithLibrary(t *testing.T, frame []byte) (decoded bool) {
	t.Helper()
	req, resp, ok := decodeMessage(frame, false)
	if ok {
		// A frame found valid reads the same when the check vouches for it.
		req2, resp2, ok2 := decodeMessage(frame, true)
		if !ok2 || !reflect.DeepEqual(req, req2) || !reflect.DeepEqual(resp, resp2) {
			t.Fatalf("%s: decoded differently once known to be valid", frame)
		}
	}
	if !ok {
		return false
	}
	lreq, lresp, err := libraryDecode(t, frame)
	if err != nil {
		var probe any
		if json.Unmarshal(frame, &probe) != nil {
			return true // beyond float64, where the codec keeps the number as sent
		}
		t.Fatalf("%s: the codec decoded a frame the library refuses: %v", frame, err)
	}
	switch {
	case req != nil:
		if lreq == nil {
			t.Fatalf("%s: the codec read a request, the library a response", frame)
		}
		if req.Method != lreq.Method || req.ID != lreq.ID || req.Notif != lreq.Notif || len(lreq.ExtraFields) != 0 ||
			!sameJSON(req.Params, lreq.Params) || !sameJSON(req.Meta, lreq.Meta) {
			t.Fatalf("%s:\n codec   %+v params %s\n library %+v params %s", frame, *req, deref(req.Params), *lreq, deref(lreq.Params))
		}
	case resp != nil:
		if lresp == nil {
			t.Fatalf("%s: the codec read a response, the library a request", frame)
		}
		if resp.ID != lresp.ID || !sameJSON(resp.Result, lresp.Result) || !sameJSON(resp.Meta, lresp.Meta) ||
			!reflect.DeepEqual(resp.Error, lresp.Error) {
			t.Fatalf("%s:\n codec   %+v\n library %+v", frame, *resp, *lresp)
		}
	default:
		t.Fatalf("%s: decoded as neither request nor response", frame)
	}
	return true
}

func deref(r *json.RawMessage) string {
	if r == nil {
		return "<absent>"
	}
	return string(*r)
}

func TestDecodeMatchesLibrary(t *testing.T) {
	cases := []struct {
		frame  string
		direct bool // the codec reads it itself
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"state.exists","params":{"key":"k"}}`, true},
		{` { "jsonrpc" : "2.0" , "id" : "cb-12" , "method" : "tools.execute" , "params" : { "b" : [1, 2.50, {"x":null}], "a" : "\u00e9<>&" } } `, true},
		{`{"jsonrpc":"2.0","method":"tools.cancel","params":{"request_id":"cb-1"}}`, true},
		{`{"jsonrpc":"2.0","id":null,"method":"n"}`, true},
		{`{"jsonrpc":"2.0","id":7,"method":"m","params":null}`, true},
		{`{"jsonrpc":"2.0","id":7,"method":"m","params":[1,"two",3e5]}`, true},
		{`{"jsonrpc":"2.0","id":7,"method":"m","meta":{"trace":"x"}}`, true},
		{`{"jsonrpc":"2.0","id":7,"method":"m","meta":null}`, true},
		{`{"jsonrpc":"2.0","id":"\u0000car-negative-id:-5","method":"m"}`, true},
		{`{"jsonrpc":"2.0","id":"a\"b","method":"\u006d"}`, true},
		{`{"\u0069d":3,"method":"m"}`, true},
		{`{"id":3,"method":"a","method":"b"}`, true},
		{`{"jsonrpc":"2.0","id":9223372036854775807,"method":"m"}`, true},
		{`{"jsonrpc":"2.0","id":"cb-3","result":{"ok":true}}`, true},
		{`{"jsonrpc":"2.0","id":3,"result":null}`, true},
		{`{"jsonrpc":"2.0","id":3,"result":[1,{"a":"b"}],"meta":{"m":1}}`, true},
		{`{"jsonrpc":"2.0","id":18446744073709551615,"result":1}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"boom","data":{"why":1}}}`, true},
		{`{"jsonrpc":"2.0","id":"x","result":1,"error":null}`, true},
		{`{"jsonrpc":"2.0","id":3,"result":1e400}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":null,"result":2}`, true},
		// Left to the library:
		{`{"jsonrpc":"2.0","id":-3,"method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":1.5,"method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","extra":1}`, false},
		{`{"jsonrpc":"2.0","id":1,"Method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":5}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","result":2}`, false},
		{`{"jsonrpc":"2.0","id":null,"result":2}`, false},
		{`{"jsonrpc":"2.0","id":-1,"result":2}`, false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`, false},
		{`{"jsonrpc":"2.0","id":1}`, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"m"}]`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m"`, false},
		{`"text"`, false},
		{``, false},
	}
	for _, tc := range cases {
		if got := compareWithLibrary(t, []byte(tc.frame)); got != tc.direct {
			t.Errorf("%s: read directly %v, want %v", tc.frame, got, tc.direct)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,2]}}`,
		`{"jsonrpc":"2.0","id":"cb-1","result":{"ok":true}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`,
		`{"method":"n","params":null,"meta":{}}`,
		`{"id":"\u0041","result":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		compareWithLibrary(t, frame)
	})
}

// The codec writes what the library writes, byte for byte.
func TestEncodeMatchesLibrary(t *testing.T) {
	raw := func(s string) *json.RawMessage { r := json.RawMessage(s); return &r }
	marked, _ := LiftID(json.RawMessage("-42"))
	var markedID string
	if err := json.Unmarshal(marked, &markedID); err != nil {
		t.Fatal(err)
	}
	requests := []*jsonrpc2.Request{
		{Method: "tools.execute", ID: jsonrpc2.ID{Str: "cb-1", IsString: true}, Params: raw(`{"action_id":"a","parameters":{"i":1}}`)},
		{Method: "state.exists", ID: jsonrpc2.ID{Num: 12}, Params: raw(`{"key":"k"}`)},
		{Method: "tools.cancel", Notif: true, Params: raw(`{"request_id":"cb-1"}`)},
		{Method: "m<&>\u00e9", ID: jsonrpc2.ID{Str: "q\"\\\n<>", IsString: true}},
		{Method: "m", ID: jsonrpc2.ID{Num: 0}, Params: raw(`null`), Meta: raw(`{"t":1}`)},
		{Method: "m", ID: jsonrpc2.ID{Str: markedID, IsString: true}},
		{Method: "m", ID: jsonrpc2.ID{Str: "\x00car-negative-id:x", IsString: true}},
	}
	responses := []*jsonrpc2.Response{
		{ID: jsonrpc2.ID{Str: "cb-1", IsString: true}, Result: raw(`{"ok":true}`)},
		{ID: jsonrpc2.ID{Num: 7}, Result: raw(`null`)},
		{ID: jsonrpc2.ID{Num: 7}, Result: raw(`[1,2]`), Meta: raw(`{"m":"x"}`)},
		{ID: jsonrpc2.ID{Str: markedID, IsString: true}, Result: raw(`1`)},
	}
	check := func(m *message) {
		t.Helper()
		v := reflect.New(libraryMessageType(t).Elem()).Interface()
		*messageOf(v) = *m
		got, ok := encode(nil, v)
		if !ok {
			t.Fatalf("encode declined %+v", m)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if want = lowerNegativeID(want); !bytes.Equal(got, want) {
			t.Errorf("\n codec   %s\n library %s", got, want)
		}
	}
	for _, r := range requests {
		check(&message{request: r})
	}
	for _, r := range responses {
		check(&message{response: r})
	}
	// What the codec leaves to encoding/json.
	for _, m := range []*message{
		{request: &jsonrpc2.Request{Method: "m", ExtraFields: []jsonrpc2.RequestField{{Name: "x", Value: 1}}}},
		{response: &jsonrpc2.Response{ID: jsonrpc2.ID{Num: 1}, Error: &jsonrpc2.Error{Code: 1, Message: "m"}}},
		{response: &jsonrpc2.Response{ID: jsonrpc2.ID{Num: 1}}},
		{},
	} {
		v := reflect.New(libraryMessageType(t).Elem()).Interface()
		*messageOf(v) = *m
		if _, ok := encode(nil, v); ok {
			t.Errorf("encode took %+v, which it should leave to the library", m)
		}
	}
	if _, ok := encode(nil, map[string]int{"a": 1}); ok {
		t.Error("encode took a value that is not the library's message")
	}
}
