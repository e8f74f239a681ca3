package store

import (
	"errors"
	"strings"
	"testing"
)

// TestWrapSaysUnavailableOnce: Wrap's error wraps ErrUnavailable and the
// cause, and says "unavailable" once whether or not the cause already did.
func TestWrapSaysUnavailableOnce(t *testing.T) {
	cause := errors.New("connection refused")
	for name, err := range map[string]error{
		"a plain cause":        cause,
		"an unavailable cause": errors.Join(ErrUnavailable, cause),
	} {
		w := Wrap("state.set failed", err)
		if !errors.Is(w, ErrUnavailable) || !errors.Is(w, cause) {
			t.Fatalf("%s: %v does not wrap both", name, w)
		}
		if msg := w.Error(); !strings.HasPrefix(msg, "state.set failed: ") || strings.Count(msg, ErrUnavailable.Error()) != 1 || !strings.Contains(msg, "connection refused") {
			t.Fatalf("%s: %q", name, msg)
		}
	}
	if Wrap("x", nil) != nil {
		t.Fatal("Wrap of nil is not nil")
	}
}

// TestCheckRunRecord: a run's records are JSON objects, and a refusal says
// which record of the batch.
func TestCheckRunRecord(t *testing.T) {
	for _, ok := range []string{`{}`, ` {"a":[1]} `, "\n{\"kind\":\"turn\"}"} {
		if err := CheckRunRecord(0, []byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{``, `  `, `[1]`, `"s"`, `{"a":`, `nope`, `null`} {
		if err := CheckRunRecord(3, []byte(bad)); err == nil || err.Error() != "record 3 of the batch is not a JSON object" {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
