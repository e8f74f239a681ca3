package idempotency

import (
	"encoding/json"
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
