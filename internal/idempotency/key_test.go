package idempotency

import (
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
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

func TestScopedKeysBelongToAPrincipalTenantAndTool(t *testing.T) {
	p := map[string]any{"sku": "X-1"}
	base := Scope{Tenant: "acme", Tool: "lookup_price", Schema: "s1"}
	k := base.Key(p, "")
	other := func(f func(*Scope)) string {
		s := base
		f(&s)
		return s.Key(p, "")
	}
	for name, got := range map[string]string{
		"an agent":           other(func(s *Scope) { s.Agent = "agent-b" }),
		"another tenant":     other(func(s *Scope) { s.Tenant = "globex" }),
		"another tool":       other(func(s *Scope) { s.Tool = "lookup_cost" }),
		"another schema":     other(func(s *Scope) { s.Schema = "s2" }),
		"other parameters":   base.Key(map[string]any{"sku": "X-2"}, ""),
		"an explicit key":    base.Key(p, "order-7"),
		"the older form":     Key("acme", "lookup_price", p, ""),
		"a shifted boundary": Scope{Tenant: "acm", Tool: "elookup_price", Schema: "s1"}.Key(p, ""),
	} {
		if got == k {
			t.Errorf("%s does not change the key", name)
		}
	}
	a := Scope{Agent: "agent-a", Tenant: "acme", Tool: "lookup_price", Schema: "s1"}
	if a.Key(p, "order-7") == (Scope{Agent: "agent-b", Tenant: "acme", Tool: "lookup_price", Schema: "s1"}).Key(p, "order-7") {
		t.Fatal("two agents share an explicit key's result")
	}
	if a.Key(p, "order-7") != a.Key(map[string]any{"sku": "X-9"}, "order-7") {
		t.Fatal("an explicit key must not depend on the parameters")
	}
	if a.Key(p, "") != a.Key(map[string]any{"sku": "X-1"}, "") {
		t.Fatal("the same call in the same scope has two keys")
	}
}

func TestSchemaDigestIsTheToolsShapeNotItsSpelling(t *testing.T) {
	s := protocol.ToolSchema{Name: "lookup_price", Description: "price of a sku", Parameters: json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string"}}}`)}
	d := SchemaDigest(s)
	respelled := s
	respelled.Parameters = json.RawMessage(`{ "properties": {"sku": {"type": "string"}}, "type": "object" }`)
	respelled.Idempotent = true
	respelled.RateLimit = &protocol.ToolRateLimit{MaxCalls: 1, IntervalSecs: 1}
	if SchemaDigest(respelled) != d {
		t.Fatal("key order, spacing or a dispatch setting changed the digest")
	}
	absent, null := s, s
	absent.Parameters, null.Parameters = nil, json.RawMessage(`null`)
	if SchemaDigest(absent) != SchemaDigest(null) {
		t.Fatal("absent and null parameters differ")
	}
	for name, change := range map[string]func(*protocol.ToolSchema){
		"the name":        func(s *protocol.ToolSchema) { s.Name = "lookup_cost" },
		"the description": func(s *protocol.ToolSchema) { s.Description = "cost of a sku" },
		"the parameters":  func(s *protocol.ToolSchema) { s.Parameters = json.RawMessage(`{"type":"object"}`) },
		"the returns":     func(s *protocol.ToolSchema) { s.Returns = json.RawMessage(`{"type":"number"}`) },
	} {
		c := s
		change(&c)
		if SchemaDigest(c) == d {
			t.Errorf("changing %s does not change the digest", name)
		}
	}
}
