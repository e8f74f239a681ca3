package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/parslee-ai/car-server/internal/openrpc"
	"github.com/parslee-ai/car-server/protocol"
)

// openrpcDoc is the generated document: method names to their index, and
// the schema compiler that resolves pointers into it.
type openrpcDoc struct {
	raw      []byte
	methods  map[string]int // client → server
	toClient map[string]int // x-server-to-client
	compiler *jsonschema.Compiler
	mu       sync.Mutex
}

func loadOpenRPC(t *testing.T) *openrpcDoc {
	t.Helper()
	raw, err := openrpc.Document()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Methods  []struct{ Name string } `json:"methods"`
		ToClient []struct{ Name string } `json:"x-server-to-client"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	d := &openrpcDoc{raw: raw, methods: map[string]int{}, toClient: map[string]int{}, compiler: jsonschema.NewCompiler()}
	for i, m := range doc.Methods {
		d.methods[m.Name] = i
	}
	for i, m := range doc.ToClient {
		d.toClient[m.Name] = i
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.compiler.AddResource("openrpc.json", v); err != nil {
		t.Fatal(err)
	}
	return d
}

// check validates value against the schema at pointer in the document.
func (d *openrpcDoc) check(pointer string, value []byte) error {
	d.mu.Lock()
	sch, err := d.compiler.Compile("openrpc.json#" + pointer)
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("compile %s: %w", pointer, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// result validates a reply of a client → server method.
func (d *openrpcDoc) result(method string, value []byte) error {
	i, ok := d.methods[method]
	if !ok {
		return fmt.Errorf("%s is not in openrpc.json", method)
	}
	return d.check(fmt.Sprintf("/methods/%d/result/schema", i), value)
}

// toClientParams validates the params of a server → client method by name.
func (d *openrpcDoc) toClientParams(method string, params []byte) error {
	i, ok := d.toClient[method]
	if !ok {
		return fmt.Errorf("%s is not in x-server-to-client", method)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(params, &members); err != nil {
		return err
	}
	var doc struct {
		ToClient []struct {
			Params []struct {
				Name     string `json:"name"`
				Required bool   `json:"required"`
			} `json:"params"`
		} `json:"x-server-to-client"`
	}
	if err := json.Unmarshal(d.raw, &doc); err != nil {
		return err
	}
	known := map[string]bool{}
	for j, p := range doc.ToClient[i].Params {
		known[p.Name] = true
		v, ok := members[p.Name]
		if !ok {
			if p.Required {
				return fmt.Errorf("%s: required param %s is missing", method, p.Name)
			}
			continue
		}
		if err := d.check(fmt.Sprintf("/x-server-to-client/%d/params/%d/schema", i, j), v); err != nil {
			return fmt.Errorf("%s: param %s: %w", method, p.Name, err)
		}
	}
	for name := range members {
		if !known[name] {
			return fmt.Errorf("%s: param %s is not in the document", method, name)
		}
	}
	return nil
}

// TestMethodTableMatchesOpenRPC fails when the daemon serves a method the
// document lacks, or the document lists one the daemon does not serve.
func TestMethodTableMatchesOpenRPC(t *testing.T) {
	d := loadOpenRPC(t)
	var undocumented, unserved []string
	for name := range methods {
		if strings.HasPrefix(name, "test.") { // this package's test methods
			continue
		}
		if _, ok := d.methods[name]; !ok {
			undocumented = append(undocumented, name)
		}
	}
	for name := range d.methods {
		if _, ok := methods[name]; !ok && name != protocol.MethodSessionAuth {
			unserved = append(unserved, name)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unserved)
	if len(undocumented) > 0 {
		t.Errorf("served but not in protocol.Methods (add an entry, then make openrpc): %v", undocumented)
	}
	if len(unserved) > 0 {
		t.Errorf("in protocol.Methods but not served by the method table: %v", unserved)
	}
}

// TestRPCDiscoverServesTheDocument: rpc.discover answers the generated
// document over a real connection.
func TestRPCDiscoverServesTheDocument(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	var got json.RawMessage
	if err := c.Call(ctxT(t), protocol.MethodRPCDiscover, nil, &got); err != nil {
		t.Fatal(err)
	}
	want, err := openrpc.Document()
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, compact.Bytes()) {
		t.Fatalf("rpc.discover answered %d bytes that differ from the generated document (%d bytes)", len(got), compact.Len())
	}
}

// TestRepliesMatchTheDocument sends each method a valid request over a real
// connection and validates the reply against the method's result schema in
// openrpc.json, and the callbacks and notifications the daemon sends
// against x-server-to-client. A method must be exercised here or named in
// notExercised.
func TestRepliesMatchTheDocument(t *testing.T) {
	d := loadOpenRPC(t)
	ts := startGovernedServer(t, 0) // with an approval ledger
	c := ts.dial(t, "")

	var (
		mu      sync.Mutex
		callErr []error
		seen    = map[string]bool{}
		hostEv  = make(chan struct{}, 1)
	)
	sawCallback := func(method string, params json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		seen[method] = true
		if err := d.toClientParams(method, params); err != nil {
			callErr = append(callErr, err)
		}
	}
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, params json.RawMessage) (any, error) {
		sawCallback(protocol.MethodToolsExecute, params)
		return map[string]any{"echo": true}, nil
	})
	c.HandleNotification(protocol.MethodHostEvent, func(params json.RawMessage) {
		sawCallback(protocol.MethodHostEvent, params)
		select {
		case hostEv <- struct{}{}:
		default:
		}
	})
	c.HandleNotification(protocol.MethodEventsEvent, func(params json.RawMessage) {
		sawCallback(protocol.MethodEventsEvent, params)
	})

	proposal := map[string]any{"actions": []any{
		map[string]any{"id": "a1", "type": "tool_call", "tool": "echo", "parameters": map[string]any{"x": 1}, "reversibility": "reversible"},
		map[string]any{"id": "a2", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "$a1.output"}, "dependencies": []string{"a1"}},
	}}
	var agentID, approvalID string
	steps := []struct {
		method string
		params func() any
	}{
		{protocol.MethodServerHandshake, func() any { return map[string]any{"protocol_version": protocol.ProtocolVersion} }},
		{protocol.MethodRPCDiscover, nil},
		{protocol.MethodSessionInit, func() any {
			return map[string]any{"tools": []any{map[string]any{"name": "echo", "parameters": map[string]any{"type": "object"}}}}
		}},
		{protocol.MethodServerStatus, nil},
		{protocol.MethodApprovalsList, nil},
		{protocol.MethodSessionPolicyOpen, nil},
		{protocol.MethodSessionPolicyClose, func() any { return map[string]any{"session_id": "none"} }},
		{protocol.MethodPolicyRegister, func() any { return map[string]any{"name": "p", "rule": "deny_tool", "target": "rm"} }},
		{protocol.MethodPolicyList, nil},
		{protocol.MethodPolicyUnregister, func() any { return map[string]any{"name": "p"} }},
		{protocol.MethodToolsRegister, func() any { return []any{map[string]any{"name": "spare"}} }},
		{protocol.MethodToolsList, nil},
		{protocol.MethodToolsUnregister, func() any { return map[string]any{"name": "spare"} }},
		{protocol.MethodToolsHandles, nil},
		{protocol.MethodStateSet, func() any { return map[string]any{"key": "k", "value": map[string]any{"n": 1}} }},
		{protocol.MethodStateGet, func() any { return map[string]any{"key": "k"} }},
		{protocol.MethodStateExists, func() any { return map[string]any{"key": "k"} }},
		{protocol.MethodStateKeys, nil},
		{protocol.MethodStateSnapshot, nil},
		{protocol.MethodEventsSubscribe, nil},
		{protocol.MethodProposalSubmit, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodProposalCancel, func() any { return map[string]any{"proposal_id": "none"} }},
		{protocol.MethodVerify, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodSimulate, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodEquivalent, func() any { return map[string]any{"a": proposal, "b": proposal} }},
		{protocol.MethodOptimize, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodVerifyMonteCarlo, func() any {
			return map[string]any{"proposal": proposal, "config": map[string]any{"trials": 10, "seed": 1}}
		}},
		{protocol.MethodPermissionGetTier, nil},
		{protocol.MethodPermissionSetTier, func() any { return map[string]any{"tier": "read_only"} }},
		{protocol.MethodPermissionClassify, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodPermissionEvaluate, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodPermissionPending, func() any { return map[string]any{"proposal": proposal} }},
		{protocol.MethodPermissionApprove, func() any { return map[string]any{"fingerprint": "f", "required_tier": "sandbox_edit"} }},
		{protocol.MethodPermissionReject, func() any { return map[string]any{"fingerprint": "g", "required_tier": "sandbox_edit", "reason": "no"} }},
		{protocol.MethodSupervisionSubscribe, nil},
		{protocol.MethodSupervisionPending, nil},
		{protocol.MethodSupervisionUnsubscribe, nil},
		{protocol.MethodHostSubscribe, nil},
		{protocol.MethodHostRegisterAgent, func() any { return map[string]any{"name": "bot", "kind": "test"} }},
		{protocol.MethodHostAgents, nil},
		{protocol.MethodHostSetStatus, func() any { return map[string]any{"agent_id": agentID, "status": "running"} }},
		{protocol.MethodHostNotify, func() any { return map[string]any{"message": "hello"} }},
		{protocol.MethodHostRequestApproval, func() any { return map[string]any{"title": "ok?"} }},
		{protocol.MethodHostApprovals, nil},
		{protocol.MethodHostResolveApproval, func() any { return map[string]any{"approval_id": approvalID, "approved": true} }},
		{protocol.MethodHostEvents, nil},
		{protocol.MethodHostUnregisterAgent, func() any { return map[string]any{"agent_id": agentID} }},
		{protocol.MethodHostUnsubscribe, nil},
		{protocol.MethodEventsCount, nil},
		{protocol.MethodEventsQuery, func() any { return map[string]any{"limit": 5} }},
		{protocol.MethodEventsChainEnable, nil},
		{protocol.MethodEventsChainVerify, nil},
		{protocol.MethodEventsRetention, nil},
		{protocol.MethodEventsRetention, func() any { return map[string]any{"policy": map[string]any{"max_events": 10000}} }},
		{protocol.MethodEventsUnsubscribe, nil},
		{protocol.MethodMetricsSummary, nil},
	}
	// Not exercised here, each for its reason; every other method must be.
	notExercised := map[string]string{
		protocol.MethodSessionAuth:       "auth is off on this server; auth_test.go covers it",
		protocol.MethodSupervisionDecide: "needs a parked intent; supervision tests cover it",
		protocol.MethodMultiSwarm:        "multi.* results are described as objects; multi_test.go covers them",
		protocol.MethodMultiPipeline:     "as multi.swarm",
		protocol.MethodMultiSupervisor:   "as multi.swarm",
		protocol.MethodMultiMapReduce:    "as multi.swarm",
		protocol.MethodMultiVote:         "as multi.swarm",
		protocol.MethodMultiTournament:   "as multi.swarm",
	}
	exercised := map[string]bool{}
	for _, s := range steps {
		exercised[s.method] = true
		var params any
		if s.params != nil {
			params = s.params()
		}
		var raw json.RawMessage
		if err := c.Call(ctxT(t), s.method, params, &raw); err != nil {
			t.Fatalf("%s: %v", s.method, err)
		}
		if err := d.result(s.method, raw); err != nil {
			t.Errorf("%s: the reply does not match openrpc.json: %v\nreply: %s", s.method, err, raw)
		}
		switch s.method {
		case protocol.MethodHostRegisterAgent:
			agentID = field(t, raw, "id")
		case protocol.MethodHostRequestApproval:
			approvalID = field(t, raw, "id")
		}
	}
	for name := range d.methods {
		if !exercised[name] && notExercised[name] == "" {
			t.Errorf("%s has no round trip here: add a step, or a reason to notExercised", name)
		}
	}
	select {
	case <-hostEv:
	case <-ctxT(t).Done():
		t.Fatal("no host.event arrived")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range callErr {
		t.Errorf("a server → client message does not match openrpc.json: %v", err)
	}
	if !seen[protocol.MethodToolsExecute] {
		t.Error("proposal.submit sent no tools.execute")
	}
}

// field returns a string member of a JSON object.
func field(t *testing.T, raw json.RawMessage, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("reply has no %s: %s", name, raw)
	}
	return s
}
