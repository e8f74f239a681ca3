package rpc

import (
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/protocol"
)

// Tenants bound to tokens. An agent's token admits a set of tenants
// (car-server agents issue-token ID --tenant T, repeatable; none: the
// default tenant alone), and every method that takes a tenant (state.*
// tenant_id, checkpoint.save tenant_id, proposal.submit scope.tenantId)
// refuses an agent-bound connection any other, and checkpoint.list shows
// it only its tenants' checkpoints. A token's tenants never
// change while it is in force: a re-issue replaces the token, and the
// connection bound with the old one is closed (agentbind.go), so the
// tenants read at bind time hold for the connection's life. Plain clients
// and the host role are not limited: tenants isolate agents only.

// mayUseTenant refuses an agent-bound connection a tenant its token does
// not admit, with -32003 naming the tenant, the agent and how to grant it.
func (c *conn) mayUseTenant(method, tenant string) error {
	c.runs.mu.Lock()
	agent, granted := c.runs.agent, c.runs.tenants
	c.runs.mu.Unlock()
	if agent == "" || agents.Admits(granted, tenant) {
		return nil
	}
	return rpcError(protocol.CodeApprovalDenied,
		"%s: agent %s may not use %s: its token admits %s; to grant it, re-issue the token: car-server agents issue-token %s%s --tenant %s",
		method, agent, agents.TenantName(tenant), agents.TenantList(granted), agent, agents.TenantFlags(granted), agents.ShellWord(tenant))
}

// mayUseEveryTenant refuses an agent-bound connection what reaches every
// tenant at once (checkpoint.save without tenant_id).
func (c *conn) mayUseEveryTenant(method string) error {
	agent := c.agentID()
	if agent == "" {
		return nil
	}
	return rpcError(protocol.CodeApprovalDenied,
		"%s without tenant_id reaches every tenant, and agent %s may use only its token's (%s); name one with tenant_id",
		method, agent, agents.TenantList(c.tenants()))
}

// tenants is the bound agent's tenants.
func (c *conn) tenants() []string {
	c.runs.mu.Lock()
	defer c.runs.mu.Unlock()
	return c.runs.tenants
}
