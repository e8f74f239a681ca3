package jsonvalue

import "testing"

func TestAppendStringMember(t *testing.T) {
	if got := string(AppendStringMember([]byte(`{"a":1`), "b", "")); got != `{"a":1` {
		t.Fatalf("an empty value was written: %s", got)
	}
	if got := string(AppendStringMember([]byte(`{"a":1`), "b", "x\"y")); got != `{"a":1,"b":"x\"y"` {
		t.Fatalf("got %s", got)
	}
}
