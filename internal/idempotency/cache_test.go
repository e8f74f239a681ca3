package idempotency

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestKeysScopeByTenantToolAndParameters(t *testing.T) {
	p := map[string]any{"b": json.Number("1"), "a": "x"}
	same := map[string]any{"a": "x", "b": json.Number("1")}
	base := Key("", "charge", p, "")
	for name, k := range map[string]string{
		"tenant":   Key("acme", "charge", p, ""),
		"tool":     Key("", "refund", p, ""),
		"params":   Key("", "charge", map[string]any{"a": "y"}, ""),
		"explicit": Key("", "charge", p, "order-7"),
	} {
		if k == base {
			t.Errorf("%s does not change the key", name)
		}
	}
	if Key("", "charge", same, "") != base {
		t.Fatal("key order changed the key")
	}
	if Key("", "charge", map[string]any{"z": 1}, "order-7") != Key("", "charge", p, "order-7") {
		t.Fatal("an explicit key must not depend on the parameters")
	}
}

func TestRecordLookupInvalidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	c, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Record("k1", "charge", "p1", map[string]any{"id": json.Number("12345678901234567890")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Record("k2", "charge", "p1", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("k2"); !ok {
		t.Fatal("a recorded result is not served")
	}
	if err := c.Invalidate([]string{"k2"}, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, _, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	out, ok := c.Lookup("k1")
	if !ok || out.(map[string]any)["id"].(json.Number).String() != "12345678901234567890" {
		t.Fatalf("stored output lost precision or vanished: %v %v", out, ok)
	}
	if _, ok := c.Lookup("k2"); ok || c.Len() != 1 {
		t.Fatal("a tombstoned result is still served")
	}
}
