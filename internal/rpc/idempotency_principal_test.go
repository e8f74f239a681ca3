package rpc

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/idempotency"
	"github.com/parslee-ai/car-server/internal/messaging"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// principalsServer is a daemon whose idempotency cache, message ledger,
// approval ledger and agent tokens live under home, so that a server
// started again on the same home is the daemon after a restart.
type principalsServer struct {
	*testServer
	home string
}

func startPrincipalsServer(t *testing.T, home string) *principalsServer {
	t.Helper()
	cache, _, err := file.OpenIdempotency(filepath.Join(home, "idempotency.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := file.OpenMessages(filepath.Join(home, "messages.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ledger, _, err := file.OpenApprovals(filepath.Join(home, "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, serverSetup{
		opts:   Options{HostToken: runsHostToken, AgentTokens: file.TokenFile(filepath.Join(home, "agent-tokens.json"))},
		engine: engine.Options{Idempotency: cache, Messages: msgs, Approvals: ledger, RetryBase: 1},
		closeAfter: func() error {
			return errors.Join(cache.Close(), msgs.Close(), ledger.Close())
		},
	})
	return &principalsServer{testServer: ts, home: home}
}

// agent connects bound to agent (its token issued once per home, so the
// same agent can come back after a restart), serving tools.
func (ps *principalsServer) agent(t *testing.T, agent string, tools map[string]toolFunc) *toolbox {
	t.Helper()
	token := "token-of-" + agent
	if err := file.IssueToken(context.Background(), filepath.Join(ps.home, "agent-tokens.json"), agent, token, "", "acme", "globex"); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctxT(t), ps.url, &client.Options{Token: token, AgentID: agent})
	if err != nil {
		t.Fatalf("bind %s: %v", agent, err)
	}
	t.Cleanup(func() { c.Close() })
	return newToolboxOn(t, c, tools)
}

// host is a connection with the host role, to approve what needs a person.
func (ps *principalsServer) host(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t), ps.url, &client.Options{HostToken: runsHostToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// answers is a tool that returns who it belongs to, and counts its calls.
func answers(who string, calls *int) toolFunc {
	return func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		*calls++
		return map[string]any{"price_from": who, "sku": call.Parameters["sku"]}, nil
	}
}

// submitInTenant submits proposal in tenant ("" for none) and returns its one
// action's result.
func submitInTenant(t *testing.T, tb *toolbox, tenant string, proposal map[string]any) protocol.ActionResult {
	t.Helper()
	params := map[string]any{"proposal": proposal}
	if tenant != "" {
		params["scope"] = map[string]any{"tenantId": tenant}
	}
	var res protocol.ProposalResult
	mustCall(t, tb, protocol.MethodProposalSubmit, params, &res)
	if len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("proposal %v: %+v", proposal, res.Results)
	}
	return res.Results[0]
}

// priceFrom is whose tool an action's output came from.
func priceFrom(t *testing.T, r protocol.ActionResult) any {
	t.Helper()
	out, ok := r.Output.(map[string]any)
	if !ok {
		t.Fatalf("output %v is not an object", r.Output)
	}
	return out["price_from"]
}

// lookup is an idempotent lookup_price of sku, with an explicit key when
// key is not "".
func lookup(sku, key string) map[string]any {
	extra := []any{"idempotent", true}
	if key != "" {
		extra = append(extra, "metadata", map[string]any{"idempotency_key": key})
	}
	return proposal(toolCall("q", "lookup_price", map[string]any{"sku": sku}, extra...))
}

// TestAgentsCannotPoisonOrReadEachOthersResults: agent B runs its own
// lookup_price first, under the same name, schema, parameters and
// explicit key as agent A; A's calls still reach A's tool and get A's
// output, B never gets A's, and another tenant's identical call is not
// served from the first tenant's result. After a restart A, bound again,
// is served from the cache.
func TestAgentsCannotPoisonOrReadEachOthersResults(t *testing.T) {
	home := t.TempDir()
	ps := startPrincipalsServer(t, home)
	var aCalls, bCalls int
	a := ps.agent(t, "agent-a", map[string]toolFunc{"lookup_price": answers("A", &aCalls)})
	b := ps.agent(t, "agent-b", map[string]toolFunc{"lookup_price": answers("B", &bCalls)})

	if r := submitInTenant(t, b, "", lookup("X-1", "")); priceFrom(t, r) != "B" {
		t.Fatalf("B's own call: %v", r.Output)
	}
	r := submitInTenant(t, a, "", lookup("X-1", ""))
	if aCalls != 1 || r.CacheHit != "" || priceFrom(t, r) != "A" {
		t.Fatalf("A's identical call after B's: A's tool ran %d times, cache_hit %q, output %v; want A's tool and A's output", aCalls, r.CacheHit, r.Output)
	}
	if r := submitInTenant(t, a, "", lookup("X-1", "")); aCalls != 1 || r.CacheHit != "idempotency" || priceFrom(t, r) != "A" {
		t.Fatalf("A's repeat: A's tool ran %d times, cache_hit %q, output %v; want A's stored result", aCalls, r.CacheHit, r.Output)
	}

	// B reuses A's explicit key: B's own tool answers, A's output stays A's.
	submitInTenant(t, a, "", lookup("X-2", "a-secret-order"))
	r = submitInTenant(t, b, "", lookup("X-2", "a-secret-order"))
	if bCalls != 2 || r.CacheHit != "" || priceFrom(t, r) != "B" {
		t.Fatalf("B reusing A's idempotency_key: B's tool ran %d times, cache_hit %q, output %v; want B's own call", bCalls, r.CacheHit, r.Output)
	}

	// Another tenant's identical call is not served from this one's.
	r = submitInTenant(t, a, "globex", lookup("X-1", ""))
	if aCalls != 3 || r.CacheHit != "" {
		t.Fatalf("A in another tenant: A's tool ran %d times, cache_hit %q; want a call of its own", aCalls, r.CacheHit)
	}

	if err := ps.stop(); err != nil {
		t.Fatal(err)
	}
	ps = startPrincipalsServer(t, home)
	aCalls = 0
	a = ps.agent(t, "agent-a", map[string]toolFunc{"lookup_price": answers("A", &aCalls)})
	for _, p := range []map[string]any{lookup("X-1", ""), lookup("X-2", "a-secret-order")} {
		if r := submitInTenant(t, a, "", p); aCalls != 0 || r.CacheHit != "idempotency" || priceFrom(t, r) != "A" {
			t.Fatalf("A after a restart: A's tool ran %d times, cache_hit %q, output %v; want A's stored result", aCalls, r.CacheHit, r.Output)
		}
	}
}

// TestPlainClientsShareResultsOnlyOfTheSameTool: plain clients are one
// principal, so a second connection with the same tool is served from the
// first's result (as a client back from a crash is), but a client whose
// lookup_price has another schema can neither poison nor read it, and
// another tenant's call is its own.
func TestPlainClientsShareResultsOnlyOfTheSameTool(t *testing.T) {
	ps := startPrincipalsServer(t, t.TempDir())
	schema := func(description string) map[string]any {
		return map[string]any{"name": "lookup_price", "description": description,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"sku": map[string]any{"type": "string"}}}}
	}
	var aCalls, bCalls, cCalls int
	a := newToolbox(t, ps.testServer, map[string]toolFunc{})
	a.register(t, answers("A", &aCalls), schema("the shop's price"))
	b := newToolbox(t, ps.testServer, map[string]toolFunc{})
	b.register(t, answers("B", &bCalls), schema("a price B makes up"))

	submitInTenant(t, b, "", lookup("X-1", ""))
	r := submitInTenant(t, a, "", lookup("X-1", ""))
	if aCalls != 1 || r.CacheHit != "" || priceFrom(t, r) != "A" {
		t.Fatalf("A's call after B's other lookup_price: A's tool ran %d times, cache_hit %q, output %v; want A's own", aCalls, r.CacheHit, r.Output)
	}
	submitInTenant(t, a, "", lookup("X-2", "a-secret-order"))
	r = submitInTenant(t, b, "", lookup("X-2", "a-secret-order"))
	if bCalls != 2 || r.CacheHit != "" || priceFrom(t, r) != "B" {
		t.Fatalf("B reusing A's idempotency_key: B's tool ran %d times, cache_hit %q, output %v; want B's own call", bCalls, r.CacheHit, r.Output)
	}
	if r := submitInTenant(t, a, "globex", lookup("X-1", "")); aCalls != 3 || r.CacheHit != "" {
		t.Fatalf("A in another tenant: A's tool ran %d times, cache_hit %q; want a call of its own", aCalls, r.CacheHit)
	}

	// The same tool on another plain connection is the same call.
	c := newToolbox(t, ps.testServer, map[string]toolFunc{})
	c.register(t, answers("C", &cCalls), schema("the shop's price"))
	if r := submitInTenant(t, c, "", lookup("X-1", "")); cCalls != 0 || r.CacheHit != "idempotency" || priceFrom(t, r) != "A" {
		t.Fatalf("another plain connection with A's tool: its tool ran %d times, cache_hit %q, output %v; want A's stored result", cCalls, r.CacheHit, r.Output)
	}
}

// send is a messaging.send of body under key.
func send(key string) map[string]any {
	return sendAction("s", map[string]any{"channel": "slack", "kind": "channel", "to": "C1", "body": "deploy done", "idempotency_key": key})
}

// delivers is a messaging.channel_send that counts its deliveries.
func delivers(who string, n *int) map[string]toolFunc {
	return map[string]toolFunc{messaging.DeliveryTool: func(context.Context, protocol.ToolExecuteParams) (any, error) {
		*n++
		return map[string]any{"message_id": who}, nil
	}}
}

// deduplicated says whether a send's receipt says it was not sent again.
func deduplicated(t *testing.T, r protocol.ActionResult) bool {
	t.Helper()
	out, ok := r.Output.(map[string]any)
	if !ok {
		t.Fatalf("receipt %v is not an object", r.Output)
	}
	return out["deduplicated"] == true
}

// TestMessageDedupBelongsToItsPrincipal: a message sent under a key by one
// agent does not mark another agent's, a plain client's or another
// tenant's message of that key as delivered; each principal's own repeat
// is deduplicated, also after a restart.
func TestMessageDedupBelongsToItsPrincipal(t *testing.T) {
	home := t.TempDir()
	ps := startPrincipalsServer(t, home)
	call(t, ps.host(t), protocol.MethodPermissionApprove, map[string]any{"action": send("deploy-77"), "reason": "ok to send"}, nil)
	var aSent, bSent, plainSent int
	b := ps.agent(t, "agent-b", delivers("B", &bSent))
	a := ps.agent(t, "agent-a", delivers("A", &aSent))
	plain := newToolbox(t, ps.testServer, delivers("plain", &plainSent))

	if r := submitInTenant(t, b, "", proposal(send("deploy-77"))); bSent != 1 || deduplicated(t, r) {
		t.Fatalf("B's send: delivered %d, %v", bSent, r.Output)
	}
	if r := submitInTenant(t, a, "", proposal(send("deploy-77"))); aSent != 1 || deduplicated(t, r) {
		t.Fatalf("A's send after B's under the same key: delivered %d, %v; want it sent", aSent, r.Output)
	}
	if r := submitInTenant(t, plain, "", proposal(send("deploy-77"))); plainSent != 1 || deduplicated(t, r) {
		t.Fatalf("a plain client's send after the agents': delivered %d, %v; want it sent", plainSent, r.Output)
	}
	if r := submitInTenant(t, plain, "globex", proposal(send("deploy-77"))); plainSent != 2 || deduplicated(t, r) {
		t.Fatalf("the plain client's send in another tenant: delivered %d, %v; want it sent", plainSent, r.Output)
	}
	if r := submitInTenant(t, a, "", proposal(send("deploy-77"))); aSent != 1 || !deduplicated(t, r) {
		t.Fatalf("A's repeat: delivered %d, %v; want it deduplicated", aSent, r.Output)
	}

	if err := ps.stop(); err != nil {
		t.Fatal(err)
	}
	ps = startPrincipalsServer(t, home)
	aSent = 0
	a = ps.agent(t, "agent-a", delivers("A", &aSent))
	if r := submitInTenant(t, a, "", proposal(send("deploy-77"))); aSent != 0 || !deduplicated(t, r) {
		t.Fatalf("A's repeat after a restart: delivered %d, %v; want it deduplicated", aSent, r.Output)
	}
}

// TestAnOlderDaemonsEntriesBelongToThePlainPrincipal: results and
// deliveries journaled under the keys an older daemon computed (tenant,
// tool and parameters or key, nothing more) are served to plain clients
// after the upgrade, and never to an agent.
func TestAnOlderDaemonsEntriesBelongToThePlainPrincipal(t *testing.T) {
	home := t.TempDir()
	cache, _, err := file.OpenIdempotency(filepath.Join(home, "idempotency.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"sku": "X-1"}
	if err := cache.Record(idempotency.Key("acme", "lookup_price", params, ""), "lookup_price", "p-old", map[string]any{"price_from": "the older daemon"}); err != nil {
		t.Fatal(err)
	}
	if err := cache.Record(idempotency.Key("", "lookup_price", params, "order-7"), "lookup_price", "p-old", map[string]any{"price_from": "the older daemon"}); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := file.OpenMessages(filepath.Join(home, "messages.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	id := "old-1"
	if err := msgs.Record(context.Background(), messaging.Key("", "deploy-77"), store.Receipt{Channel: "slack", MessageID: &id}); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(cache.Close(), msgs.Close()); err != nil {
		t.Fatal(err)
	}

	ps := startPrincipalsServer(t, home)
	call(t, ps.host(t), protocol.MethodPermissionApprove, map[string]any{"action": send("deploy-77"), "reason": "ok to send"}, nil)
	var plainCalls, agentCalls, plainSent, agentSent int
	tools := func(calls, sent *int, who string) map[string]toolFunc {
		m := delivers(who, sent)
		m["lookup_price"] = answers(who, calls)
		return m
	}
	plain := newToolbox(t, ps.testServer, tools(&plainCalls, &plainSent, "plain"))
	agent := ps.agent(t, "agent-a", tools(&agentCalls, &agentSent, "A"))

	for _, c := range []struct {
		tenant string
		p      map[string]any
	}{{"acme", lookup("X-1", "")}, {"", lookup("X-9", "order-7")}} {
		if r := submitInTenant(t, plain, c.tenant, c.p); plainCalls != 0 || r.CacheHit != "idempotency" || priceFrom(t, r) != "the older daemon" {
			t.Fatalf("a plain client's call of an older daemon's result: its tool ran %d times, cache_hit %q, output %v", plainCalls, r.CacheHit, r.Output)
		}
		if r := submitInTenant(t, agent, c.tenant, c.p); r.CacheHit != "" || priceFrom(t, r) != "A" {
			t.Fatalf("an agent's call of an older daemon's result: cache_hit %q, output %v; want its own call", r.CacheHit, r.Output)
		}
	}
	if agentCalls != 2 {
		t.Fatalf("the agent's tool ran %d times, want 2", agentCalls)
	}
	if r := submitInTenant(t, plain, "", proposal(send("deploy-77"))); plainSent != 0 || !deduplicated(t, r) {
		t.Fatalf("a plain client's send of an older daemon's key: delivered %d, %v; want it deduplicated", plainSent, r.Output)
	}
	if r := submitInTenant(t, agent, "", proposal(send("deploy-77"))); agentSent != 1 || deduplicated(t, r) {
		t.Fatalf("an agent's send of an older daemon's key: delivered %d, %v; want it sent", agentSent, r.Output)
	}
}
