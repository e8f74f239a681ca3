package rpc

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// TestEveryMethodHasAnAccessRow keeps the capability table, the method
// table and protocol.Methods in step: a method cannot ship without a row.
func TestEveryMethodHasAnAccessRow(t *testing.T) {
	for name := range methods {
		if strings.HasPrefix(name, "test.") {
			continue
		}
		if methodAccess[name] == accessUnset {
			t.Errorf("%s is served but has no row in methodAccess (access.go)", name)
		}
	}
	for _, m := range protocol.Methods {
		switch m.Name {
		case protocol.MethodSessionAuth: // decided on the read loop, before any principal exists
			continue
		case protocol.MethodToolsStreamChunk: // a notification about a handle the connection itself runs
			continue
		}
		if methodAccess[m.Name] == accessUnset {
			t.Errorf("%s is in protocol.Methods but has no row in methodAccess", m.Name)
		}
	}
	for name, a := range methodAccess {
		if _, ok := methods[name]; !ok {
			t.Errorf("methodAccess has a row for %s, which is not served", name)
		}
		if a == accessUnset {
			t.Errorf("%s: a row must say who may call it", name)
		}
	}
}

// TestTheReadmeCarriesTheCapabilityTable: the README's *Security model*
// table is the code's, row for row.
func TestTheReadmeCarriesTheCapabilityTable(t *testing.T) {
	raw, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n### Who may call what\n")
	if start < 0 {
		t.Fatal("docs/security.md has no '### Who may call what' section")
	}
	section := doc[start+1:]
	if end := strings.Index(section[4:], "\n#"); end >= 0 {
		section = section[:end+4]
	}
	row := regexp.MustCompile("(?m)^\\| ((?:`[^`]+`(?:, )?)+) \\| (any|person|host) \\|")
	inReadme := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, name := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[1], -1) {
			if prev, dup := inReadme[name[1]]; dup {
				t.Errorf("docs/security.md lists %s twice (%s, %s)", name[1], prev, m[2])
			}
			inReadme[name[1]] = m[2]
		}
	}
	var missing []string
	for name, a := range methodAccess {
		if strings.HasPrefix(name, "test.") {
			continue
		}
		got, ok := inReadme[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		if got != a.String() {
			t.Errorf("docs/security.md says %s is for %q, the code %q", name, got, a)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/security.md's capability table lacks %v", missing)
	}
	for name := range inReadme {
		if _, ok := methodAccess[name]; !ok {
			t.Errorf("docs/security.md's capability table lists %s, which the code does not", name)
		}
	}
}

// governingCalls are the calls an agent must never make, with params a
// person would send, so that a refusal cannot be a params error.
var governingCalls = []struct {
	method string
	params map[string]any
}{
	{protocol.MethodPermissionApprove, map[string]any{"fingerprint": "f", "required_tier": "full_access"}},
	{protocol.MethodPermissionReject, map[string]any{"fingerprint": "f", "required_tier": "full_access"}},
	{protocol.MethodHostResolveApproval, map[string]any{"approval_id": "a", "approved": true}},
	{protocol.MethodSupervisionSubscribe, nil},
	{protocol.MethodSupervisionPending, nil},
	{protocol.MethodSupervisionDecide, map[string]any{"intent_id": "i", "decision": map[string]any{"kind": "allow"}}},
	{protocol.MethodEventsRetention, map[string]any{"policy": map[string]any{"max_events": 1}}},
	{protocol.MethodEventsChainEnable, nil},
	{protocol.MethodCheckpointDelete, map[string]any{"checkpoint_id": "ck-1"}},
	{protocol.MethodCheckpointRestore, map[string]any{"checkpoint_id": "ck-1"}},
	{protocol.MethodPermissionSetTier, map[string]any{"tier": "full_access"}},
	{protocol.MethodAgentPermissionsSet, map[string]any{"agent_id": "other", "mode": "always_allow"}},
	{protocol.MethodAgentPermissionsSetDefault, map[string]any{"preset": "trusting"}},
	{protocol.MethodAgentsRevoke, map[string]any{"agent_id": "other"}},
	{protocol.MethodConnectorsAdd, map[string]any{"name": "x", "url": "http://127.0.0.1:1/mcp"}},
	{protocol.MethodConnectorsAddStdio, map[string]any{"name": "x", "command": "true"}},
	{protocol.MethodConnectorsList, nil},
	{protocol.MethodConnectorsTools, map[string]any{"slug": "x"}},
	{protocol.MethodConnectorsEnableTools, map[string]any{"slug": "x", "tools": []string{"t"}}},
	{protocol.MethodConnectorsDisableTools, map[string]any{"slug": "x", "tools": []string{"t"}}},
	{protocol.MethodConnectorsRefresh, map[string]any{"slug": "x"}},
	{protocol.MethodConnectorsRemove, map[string]any{"slug": "x"}},
}

func TestAnAgentCanNeverGovern(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	agent := rs.mustAgent(t, "intruder")
	var before int
	call(t, agent, protocol.MethodEventsCount, nil, &before)
	for _, c := range governingCalls {
		code, msg := rpcCode(t, agent.Call(ctxT(t), c.method, c.params, nil))
		if code != protocol.CodeApprovalDenied || !strings.Contains(msg, c.method) && c.method != protocol.MethodPermissionSetTier || !strings.Contains(msg, "host role") {
			t.Errorf("%s from agent intruder: %d %q; want -32003 naming the method and the host role", c.method, code, msg)
		}
	}
	var after int
	call(t, agent, protocol.MethodEventsCount, nil, &after)
	if after < before {
		t.Fatalf("the refused calls erased events: %d, then %d", before, after)
	}
	// Lowering its own tier is not a decision.
	call(t, agent, protocol.MethodPermissionSetTier, map[string]any{"tier": "read_only"}, nil)
	// A person may do what the agent may not.
	host := rs.hostClient(t)
	call(t, host, protocol.MethodSupervisionSubscribe, nil, nil)
	call(t, host, protocol.MethodEventsChainEnable, nil, nil)
}

// TestAPlainClientGovernsByDefaultButNotUnderApproverRoleHost: the default
// is upstream's ("any authenticated caller is the user"); approver_role =
// host makes plain clients governed too.
func TestAPlainClientGovernsByDefaultButNotUnderApproverRoleHost(t *testing.T) {
	plain := startServer(t, Options{}).dial(t, "")
	call(t, plain, protocol.MethodSupervisionSubscribe, nil, nil)
	call(t, plain, protocol.MethodEventsChainEnable, nil, nil)
	if code, _ := rpcCode(t, plain.Call(ctxT(t), protocol.MethodEventsRetention, nil, nil)); code != protocol.CodeApprovalDenied {
		t.Errorf("events.retention from a plain client: code %d; it is the operator's (host role)", code)
	}

	ts := startHostServer(t, testTimeout, Options{HostToken: "the-host-token", ApproverRole: ApproverHost})
	governed, err := client.Dial(ctxT(t), ts.url, &client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { governed.Close() })
	for _, c := range governingCalls {
		if methodAccess[c.method] == accessAny {
			continue // refused inside the handler, tested in TestApproverRoleHost
		}
		code, msg := rpcCode(t, governed.Call(ctxT(t), c.method, c.params, nil))
		if code != protocol.CodeApprovalDenied || !strings.Contains(msg, c.method) || !strings.Contains(msg, "host_token") {
			t.Errorf("%s from a plain client under approver_role host: %d %q", c.method, code, msg)
		}
	}
	person, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "the-host-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { person.Close() })
	call(t, person, protocol.MethodSupervisionSubscribe, nil, nil)
}
