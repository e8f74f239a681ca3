package messaging

import "testing"

func TestDedupKeysBelongToAPrincipalAndTenant(t *testing.T) {
	k := ScopedKey("", "acme", "deploy-77")
	for name, got := range map[string]string{
		"an agent":       ScopedKey("agent-b", "acme", "deploy-77"),
		"another tenant": ScopedKey("", "globex", "deploy-77"),
		"another key":    ScopedKey("", "acme", "deploy-78"),
		"the older form": Key("acme", "deploy-77"),
	} {
		if got == k {
			t.Errorf("%s does not change the dedup key", name)
		}
	}
	if ScopedKey("agent-a", "acme", "deploy-77") == ScopedKey("agent-b", "acme", "deploy-77") {
		t.Fatal("two agents share a dedup key")
	}
}
