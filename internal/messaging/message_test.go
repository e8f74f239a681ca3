package messaging

import (
	"encoding/json"
	"strings"
	"testing"
)

func params(t *testing.T, js string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParsesDirectByDefault(t *testing.T) {
	m, err := ParseParams(params(t, `{"channel":"imessage","to":"+15551112222","body":"build is green"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "imessage" || m.Kind != KindDirect || m.To != "+15551112222" || m.Body != "build is green" || m.IdempotencyKey != "" {
		t.Fatalf("%+v", m)
	}
}

func TestParsesExplicitKinds(t *testing.T) {
	d, err := ParseParams(params(t, `{"channel":"imessage","to":"keenan@parslee.ai","kind":"direct","body":"hi","idempotency_key":"run-42"}`))
	if err != nil || d.Kind != KindDirect || d.To != "keenan@parslee.ai" || d.IdempotencyKey != "run-42" {
		t.Fatalf("%+v %v", d, err)
	}
	c, err := ParseParams(params(t, `{"channel":"slack","to":"C012ABCDEF","kind":"channel","body":"deploy done"}`))
	if err != nil || c.Kind != KindChannel || c.To != "C012ABCDEF" {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, params, want string }{
		{"recipient is not an alias for to", `{"channel":"imessage","recipient":"+15551112222","body":"hi"}`, "missing required parameter 'to'"},
		{"non-object params", `"just a string"`, "must be a JSON object"},
		{"missing channel", `{"to":"+15551112222","body":"hi"}`, "missing required parameter 'channel'"},
		{"blank channel", `{"channel":"   ","to":"+15551112222","body":"hi"}`, "'channel' must not be empty"},
		{"missing recipient", `{"channel":"imessage","body":"hi"}`, "missing required parameter 'to'"},
		{"missing body", `{"channel":"imessage","to":"+15551112222"}`, "missing required parameter 'body'"},
		{"non-string body", `{"channel":"imessage","to":"+15551112222","body":42}`, "'body' must be a string"},
		{"unknown kind", `{"channel":"imessage","to":"+15551112222","kind":"broadcast","body":"hi"}`, "unknown kind 'broadcast'"},
		{"non-string kind", `{"channel":"imessage","to":"+15551112222","kind":true,"body":"hi"}`, "'kind' must be the string"},
		{"blank idempotency key", `{"channel":"imessage","to":"+15551112222","body":"hi","idempotency_key":""}`, "'idempotency_key' must not be blank"},
		{"non-string idempotency key", `{"channel":"imessage","to":"x","body":"hi","idempotency_key":7}`, "'idempotency_key' must be a string"},
		{"negative deadline", `{"channel":"imessage","to":"x","body":"hi","deadline_ms":-1}`, "'deadline_ms' must be a Unix-millisecond unsigned integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseParams(params(t, tc.params))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
	if strings.Contains(mustErr(t, `{"channel":"imessage","to":"x","kind":"broadcast","body":"hi"}`), "'direct'") == false {
		t.Fatal("the unknown-kind message should name the accepted kinds")
	}
}

func mustErr(t *testing.T, js string) string {
	_, err := ParseParams(params(t, js))
	if err == nil {
		t.Fatal("no error")
	}
	return err.Error()
}

func TestReceiptShape(t *testing.T) {
	id := "m-1"
	b, err := json.Marshal(Receipt{Channel: "imessage", MessageID: &id, Delivered: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"channel":"imessage","message_id":"m-1","deduplicated":false,"delivered":true,"queued":false}` {
		t.Fatalf("%s", b)
	}
	m, err := ParseParams(params(t, `{"channel":"teams","to":"u@x","kind":"channel","body":"b","deadline_ms":5}`))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := json.Marshal(m.DeliveryParams())
	if err != nil {
		t.Fatal(err)
	}
	if string(dp) != `{"body":"b","channel":"teams","kind":"channel","to":"u@x"}` || *m.DeadlineMs != 5 {
		t.Fatalf("%s %v", dp, m.DeadlineMs)
	}
}
