package messaging

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseParams: any params either parse into a message with the fields a
// delivery needs, or give an error; never a panic.
func FuzzParseParams(f *testing.F) {
	for _, s := range []string{
		`{"channel":"imessage","to":"+15551112222","body":"build is green"}`,
		`{"channel":"slack","to":"C012ABCDEF","kind":"channel","body":"deploy done","idempotency_key":"run-42"}`,
		`{"channel":"imessage","to":"x","body":"hi","deadline_ms":-1}`,
		`"just a string"`, `{"channel":"   ","to":"x","body":"hi"}`, `{"channel":"c","to":"x","body":"hi","kind":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		m, err := ParseParams(v)
		if err != nil {
			return
		}
		if m.Channel == "" || m.To == "" || (m.Kind != KindDirect && m.Kind != KindChannel) {
			t.Fatalf("ParseParams(%s) accepted a message without channel, recipient or kind: %+v", raw, m)
		}
		if _, err := json.Marshal(m.DeliveryParams()); err != nil {
			t.Fatalf("delivery params do not encode: %v", err)
		}
	})
}
