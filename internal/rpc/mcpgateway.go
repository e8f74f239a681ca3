package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/protocol"
)

// The MCP endpoint's side of the rpc layer. An MCP client has no WebSocket
// to answer tools.execute, so what it can call is the daemon tools; each
// call is a one-action proposal that takes the path a proposal.submit takes
// (conn.proposalSubmit): the same engine.Submission, under the session and
// principal of the MCP session, through Runtime.Execute. The transport
// (internal/mcpserve) asks this file, and nothing else of the daemon.

// MCPSourceName is the proposal source of every MCP call, in events.query
// (proposal_received's data.source) and on the dashboard.
const MCPSourceName = "mcp"

// ErrMCPUnauthorized is the refusal of a bearer token that names no
// principal of this daemon.
var ErrMCPUnauthorized = errors.New("the bearer token is not this daemon's token nor an agent's current token")

// MCPPrincipal is who an MCP request speaks for: a plain client (the
// daemon's token) or an agent (its own token alone names it).
type MCPPrincipal struct {
	Agent   string   // "" for a plain client
	Tenants []string // the tenants an agent's token admits
	token   string   // the agent's token, asked again when the token store changes
}

// Key names the principal for bounds and for the session's owner: the
// same key for every session of one principal.
func (p MCPPrincipal) Key() string {
	if p.Agent != "" {
		return "agent:" + p.Agent
	}
	return protocol.PrincipalPlain
}

// String is the principal as a person reads it.
func (p MCPPrincipal) String() string {
	if p.Agent != "" {
		return "agent " + p.Agent
	}
	return "plain client"
}

// tenant is the tenant the principal's calls run in: a plain client's is
// the default tenant; an agent's the first its token admits (the default
// tenant when it admits it), so an agent never reaches a tenant its token
// does not admit, as conn.mayUseTenant holds a WebSocket agent to.
func (p MCPPrincipal) tenant() string {
	if p.Agent == "" {
		return agents.DefaultTenant
	}
	return agents.Tenants(p.Tenants)[0]
}

// AuthenticateMCP reads a bearer token: the daemon's token is a plain
// client, an agent's current token is that agent. The host token is
// refused: it is a person's, and an MCP client is a governed program. With
// auth off (no daemon token) a request without a token is a plain client.
func (s *Server) AuthenticateMCP(ctx context.Context, token string) (MCPPrincipal, error) {
	if token != "" && s.opts.HostToken != "" && tokenMatches(s.opts.HostToken, token) {
		return MCPPrincipal{}, fmt.Errorf("%w: the host token is a person's and is not accepted here; present the daemon's token or an agent's token", ErrMCPUnauthorized)
	}
	if s.opts.Token == "" && token == "" {
		return MCPPrincipal{}, nil
	}
	if s.opts.Token != "" && tokenMatches(s.opts.Token, token) {
		return MCPPrincipal{}, nil
	}
	if token != "" && s.opts.AgentTokens != nil {
		agent, tenants, ok, err := s.opts.AgentTokens.Identify(ctx, token)
		if err != nil {
			return MCPPrincipal{}, fmt.Errorf("the agent tokens could not be read: %w", err)
		}
		if ok {
			return MCPPrincipal{Agent: agent, Tenants: tenants, token: token}, nil
		}
	}
	return MCPPrincipal{}, ErrMCPUnauthorized
}

// MCPSession is one MCP session: an engine session of its own (its flow
// history, its policies), its principal, and the calls it has in flight.
// Close ends it, and cancels those calls.
type MCPSession struct {
	srv       *Server
	id        string
	principal MCPPrincipal
	client    string
	sess      *engine.Session
	ctx       context.Context
	cancel    context.CancelCauseFunc
	once      sync.Once
}

// mcpSessions are the server's open MCP sessions, for the token watch.
type mcpSessions struct {
	mu   sync.Mutex
	open map[*MCPSession]struct{}
}

// OpenMCPSession opens a session for principal; client is the name the MCP
// client gave (clientInfo), shown on the approvals it causes.
func (s *Server) OpenMCPSession(principal MCPPrincipal, client string) *MCPSession {
	id := "mcp-" + uuid.NewString()
	ctx, cancel := context.WithCancelCause(context.Background())
	m := &MCPSession{srv: s, id: id, principal: principal, client: printableName(client), ctx: ctx, cancel: cancel}
	m.sess = s.rt.OpenSession(id, noClientTools{})
	m.sess.RequestedBy = m.requester
	s.mcp.mu.Lock()
	if s.mcp.open == nil {
		s.mcp.open = map[*MCPSession]struct{}{}
	}
	s.mcp.open[m] = struct{}{}
	s.mcp.mu.Unlock()
	s.log.Info("MCP session opened", zap.String("session", id), zap.String("principal", principal.String()), zap.String("client", m.client))
	return m
}

// ID is the session's id: the connection its events name.
func (m *MCPSession) ID() string { return m.id }

// Principal is who the session speaks for.
func (m *MCPSession) Principal() MCPPrincipal { return m.principal }

// Done is closed when the session ends (Close, a revoked token, shutdown).
func (m *MCPSession) Done() <-chan struct{} { return m.ctx.Done() }

// Close ends the session: its calls in flight are cancelled, its engine
// session dropped.
func (m *MCPSession) Close() { m.end(errMCPClosed) }

func (m *MCPSession) end(cause error) {
	m.once.Do(func() {
		m.cancel(cause)
		m.srv.mcp.mu.Lock()
		delete(m.srv.mcp.open, m)
		m.srv.mcp.mu.Unlock()
		m.srv.rt.CloseSession(m.sess)
		m.srv.log.Info("MCP session closed", zap.String("session", m.id), zap.String("principal", m.principal.String()), zap.String("why", cause.Error()))
	})
}

var (
	errMCPClosed  = errors.New("the MCP session closed")
	errMCPRevoked = errors.New("the agent's token was revoked or replaced")
)

// requester names the session on the approvals its calls raise.
func (m *MCPSession) requester() host.Requester {
	by := host.Requester{Principal: protocol.PrincipalPlain, Connection: m.id, ClientName: m.client}
	if m.principal.Agent != "" {
		by.Principal, by.AgentID = protocol.PrincipalAgent, m.principal.Agent
	}
	return by
}

// MCPTool is a tool the session's principal may call, with the tier a
// call is classified at before its parameters raise it.
type MCPTool struct {
	Schema      protocol.ToolSchema
	Tier        string
	Annotations json.RawMessage // the provider's MCP annotations; nil: none
}

// Tools is what the session's principal may call: every enabled daemon
// tool but those a policy or the agent's posture refuses outright
// (engine.OfferDaemonTools). messaging.send is not offered: the client
// delivers it through its messaging.deliver callback, which an MCP client
// has not.
func (m *MCPSession) Tools() []MCPTool {
	offered := m.srv.rt.OfferDaemonTools(m.sess, m.principal.Agent)
	out := make([]MCPTool, len(offered))
	for i, t := range offered {
		out[i] = MCPTool{Schema: t.Schema, Tier: t.Tier.String(), Annotations: t.Annotations}
	}
	return out
}

// ErrMCPUnknownTool is a call of a tool that is not a daemon tool: a
// protocol fault, answered as one.
var ErrMCPUnknownTool = errors.New("unknown tool")

// MCPWaiting is what a call waits for while a person decides.
type MCPWaiting struct {
	ApprovalID string
	Tool       string
	Required   string // the tier the approval must be at
}

// MCPOutcome is the end of one call: the tool's output, or the daemon's
// message when it did not run or failed (IsError).
type MCPOutcome struct {
	Output     any
	IsError    bool
	Message    string
	ProposalID string
}

// MCPCall is one tools/call, as the endpoint read it.
type MCPCall struct {
	Tool string
	Args json.RawMessage // a JSON object, or empty
	// IdempotencyKey, when not empty, makes the call idempotent under that
	// key, as metadata.idempotency_key does an action (scoped by
	// principal, tenant and tool): a repeat with the same key is answered
	// with the first result.
	IdempotencyKey string
	// Trace is the caller's W3C Trace Context from the request's _meta:
	// with tracing on, the call's proposal span is a child of that span.
	Trace protocol.TraceMeta
	// Waiting, when set, hears each approval the call waits for.
	Waiting func(MCPWaiting)
}

// Call runs one call as a one-action proposal under the session's
// principal, through every gate a proposal.submit passes. A tool that is
// not a daemon tool is ErrMCPUnknownTool; every other refusal is an
// outcome with IsError and the daemon's message.
func (m *MCPSession) Call(ctx context.Context, call MCPCall) (MCPOutcome, error) {
	tool, args, idemKey, waiting := call.Tool, call.Args, call.IdempotencyKey, call.Waiting
	if m.srv.opts.Tracer != nil {
		ctx = tracing.Extract(ctx, call.Trace.Traceparent, call.Trace.Tracestate)
	}
	if _, ok := m.srv.rt.DaemonTool(tool); !ok {
		return MCPOutcome{}, fmt.Errorf("%w '%s': tools/list names the tools this endpoint serves (a connector's tool is served once enabled: connectors.enable_tools)", ErrMCPUnknownTool, tool)
	}
	if m.principal.Agent != "" {
		// The token is asked again at each call: a revoke between two
		// requests of a session refuses the next call.
		if _, ok, err := m.srv.opts.AgentTokens.Grant(ctx, m.principal.Agent, m.principal.token); err != nil || !ok {
			m.end(errMCPRevoked)
			return MCPOutcome{IsError: true, Message: fmt.Sprintf("agent '%s': its token was revoked or replaced, so this session is closed; issue a new one with car-server agents issue-token %s", m.principal.Agent, m.principal.Agent)}, nil
		}
	}
	raw, err := mcpProposal(tool, args, idemKey)
	if err != nil {
		return MCPOutcome{IsError: true, Message: err.Error()}, nil
	}
	prop, err := protocol.DecodeProposalLimited(raw, m.srv.opts.MaxActionIDBytes)
	if err != nil {
		return MCPOutcome{IsError: true, Message: fmt.Sprintf("tool '%s': %v", tool, err)}, nil
	}
	prop.ID = "mcp-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	if waiting != nil {
		_, stop := m.srv.rt.Events.Subscribe(engine.EventQuery{Kinds: []engine.EventKind{engine.EventApprovalWaiting}, ProposalID: prop.ID}, func(e engine.Event) {
			id, _ := e.Data["approval_id"].(string)
			t, _ := e.Data["tool"].(string)
			req, _ := e.Data["required"].(string)
			waiting(MCPWaiting{ApprovalID: id, Tool: t, Required: req})
		})
		defer stop()
	}
	// The call ends with the request or the session, whichever ends first.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopAfter := context.AfterFunc(m.ctx, func() { cancel(context.Cause(m.ctx)) })
	defer stopAfter()

	sub := &engine.Submission{Proposal: prop, Session: m.sess, Agent: m.principal.Agent, Recorder: m.recorder(), Tenant: m.principal.tenant()}
	res, err := m.srv.rt.Execute(cctx, sub, engine.Recovery{Timeout: m.srv.attemptTimeout})
	out := MCPOutcome{ProposalID: prop.ID}
	var deadline *engine.DeadlineError
	switch {
	case errors.As(err, &deadline):
		out.IsError, out.Message = true, fmt.Sprintf("tool '%s' did not finish within %s; it may have taken effect, so check before calling it again", tool, deadline.Timeout)
		return out, nil
	case err != nil:
		out.IsError, out.Message = true, fmt.Sprintf("tool '%s' was not run: %v", tool, err)
		return out, nil
	case res == nil || len(res.Results) != 1:
		out.IsError, out.Message = true, fmt.Sprintf("tool '%s': the daemon returned no result", tool)
		return out, nil
	}
	r := res.Results[0]
	switch r.Status {
	case protocol.StatusSucceeded:
		out.Output = r.Output
	default:
		out.IsError = true
		out.Message = fmt.Sprintf("tool '%s' %s: %s", tool, r.Status, r.ErrorText())
	}
	return out, nil
}

// mcpProposal is the proposal of one call, as a client would send it.
func mcpProposal(tool string, args json.RawMessage, idemKey string) ([]byte, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	name, err := json.Marshal(tool)
	if err != nil {
		return nil, err
	}
	var b []byte
	b = append(b, `{"source":"`+MCPSourceName+`","actions":[{"id":"call","type":"tool_call","tool":`...)
	b = append(b, name...)
	b = append(b, `,"parameters":`...)
	b = append(b, args...)
	if idemKey != "" {
		key, err := json.Marshal(idemKey)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"idempotent":true,"metadata":{"idempotency_key":`...)
		b = append(b, key...)
		b = append(b, '}')
	}
	b = append(b, `}]}`...)
	return b, nil
}

// recorder is the agent's current run, when the agent has one open on a
// WebSocket connection of this daemon: an MCP client cannot start a run
// (runs.start is a WebSocket method), so its calls go to the run its agent
// is in.
func (m *MCPSession) recorder() engine.TurnRecorder {
	if m.principal.Agent == "" {
		return nil
	}
	if h := m.srv.bound.holder(m.principal.Agent); h != nil {
		return h.recorder()
	}
	return nil
}

// recheckMCP ends the MCP sessions of the agents named ("" names every
// one) whose token no longer holds, as recheckAgents closes connections.
func (s *Server) recheckMCP(agents map[string]bool) {
	s.mcp.mu.Lock()
	var sessions []*MCPSession
	for m := range s.mcp.open {
		if a := m.principal.Agent; a != "" && (agents[""] || agents[a]) {
			sessions = append(sessions, m)
		}
	}
	s.mcp.mu.Unlock()
	for _, m := range sessions {
		ctx, cancel := context.WithTimeout(context.Background(), tokenRecheckTimeout)
		_, ok, err := s.opts.AgentTokens.Grant(ctx, m.principal.Agent, m.principal.token)
		cancel()
		switch {
		case err != nil:
			s.log.Warn("could not ask the token store about an MCP session's agent", zap.String("agent", m.principal.Agent), zap.Error(err))
		case !ok:
			m.end(errMCPRevoked)
		}
	}
}

// closeMCP ends every MCP session (shutdown).
func (s *Server) closeMCP(cause error) {
	s.mcp.mu.Lock()
	sessions := make([]*MCPSession, 0, len(s.mcp.open))
	for m := range s.mcp.open {
		sessions = append(sessions, m)
	}
	s.mcp.mu.Unlock()
	for _, m := range sessions {
		m.end(cause)
	}
}

// noClientTools is the executor of an MCP session: it has no client to call
// back, and the daemon tools it may call run through their own executors.
type noClientTools struct{}

func (noClientTools) ExecuteTool(_ context.Context, call engine.ToolCall) (any, error) {
	return nil, fmt.Errorf("tool '%s' is a client's tool, and an MCP session has no client to call back; only the daemon's tools are served over MCP", call.Tool)
}

// printableName is name when a person can read it on one line, else "".
func printableName(name string) string {
	if len(name) > protocol.MaxClientName || !shownAsIs(name) {
		return ""
	}
	return name
}
