package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// scope is a StateReader with a RuntimeScope: claims, and whether they are
// trusted.
type scope struct {
	caller  string
	claims  map[string]any
	trusted bool
}

func (scope) State(string) (any, bool) { return nil, false }

func (s scope) Scope(path string) (any, bool, bool) {
	if path == "callerId" {
		return s.caller, s.caller != "", true
	}
	v, ok := s.claims[strings.TrimPrefix(path, "claims.")]
	return v, ok && strings.HasPrefix(path, "claims."), s.trusted
}

func TestRulesReadTheScopeAndTrustOnlyToAllow(t *testing.T) {
	deploy := &protocol.Action{ID: "d", Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{"env": "staging"}}
	other := &protocol.Action{ID: "o", Type: protocol.ActionToolCall, Tool: "read", Parameters: map[string]any{}}
	admin := map[string]any{"role": "admin", "env": "prod"}
	need := RequireClaim{Claim: "role", Tool: "deploy", Value: "admin", HasValue: true}
	for _, c := range []struct {
		name   string
		rule   Rule
		a      *protocol.Action
		state  StateReader
		denied bool
	}{
		{"require: trusted claim", need, deploy, scope{claims: admin, trusted: true}, false},
		{"require: an agent's own claim", need, deploy, scope{claims: admin}, true},
		{"require: another value", need, deploy, scope{claims: map[string]any{"role": "viewer"}, trusted: true}, true},
		{"require: no claims", need, deploy, scope{trusted: true}, true},
		{"require: no scope at all", need, deploy, StateFunc(func(string) (any, bool) { return nil, false }), true},
		{"require: another tool", need, other, scope{}, false},
		{"require: any value, every tool", RequireClaim{Claim: "role"}, other, scope{claims: admin, trusted: true}, false},
		{"deny pattern: an agent's own claim still denies", DenyToolParam{Tool: "deploy", Param: "scope.claims.env", Contains: "prod"}, deploy, scope{claims: admin}, true},
		{"deny pattern: the parameter of the same name is not read", DenyToolParam{Tool: "deploy", Param: "scope.claims.env", Contains: "staging"}, deploy, scope{claims: admin}, false},
		{"deny pattern on the caller", NewDenyToolParamMatching("deploy", "scope.callerId", "^a2a:"), deploy, scope{caller: "a2a:eve"}, true},
		{"allow list: trusted claim", AllowToolParam{Tool: "deploy", Param: "scope.claims.env", Allow: []string{"prod"}}, deploy, scope{claims: admin, trusted: true}, false},
		{"allow list: an agent's own claim does not allow", AllowToolParam{Tool: "deploy", Param: "scope.claims.env", Allow: []string{"prod"}}, deploy, scope{claims: admin}, true},
	} {
		_, denied := c.rule.Evaluate(c.a, c.state, time.Time{})
		if denied != c.denied {
			t.Errorf("%s: denied %v, want %v", c.name, denied, c.denied)
		}
	}
}

func TestRequireClaimFromADefinitionAndAFile(t *testing.T) {
	p, err := FromDefinition(protocol.PolicyDefinition{Name: "admins", Rule: "require_claim", Key: "role", Value: "admin", Target: "deploy"})
	if err != nil || p.Description != `require scope claim 'role' = "admin" for tool 'deploy'` {
		t.Fatalf("definition: %+v %v", p, err)
	}
	if _, err := FromDefinition(protocol.PolicyDefinition{Name: "x", Rule: "require_claim"}); err == nil || !strings.Contains(err.Error(), "needs field 'key'") {
		t.Fatalf("no key: %v", err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "claims.toml", "[[require_claim]]\nclaim = \"role\"\nequals = \"operator\"\ntool = \"deploy\"\n")
	e, n, err := LoadDir(dir)
	if err != nil || n != 1 || e.Len() != 1 || e.List()[0].Name != "require_claim:role" {
		t.Fatalf("file: %v %d %v", e, n, err)
	}
	writeFile(t, dir, "claims.toml", "[[require_claim]]\ntool = \"deploy\"\n")
	if _, _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "require_claim[0] needs claim") {
		t.Fatalf("no claim: %v", err)
	}
}
