package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Policies are layered: the operator's rules (daemon-wide, from files) ∧ the
// connection's rules ∧ the rules of the sub-session a proposal names. Every
// layer that applies is evaluated and every violation is reported; a narrower
// layer can deny what a wider one allows, never allow what it denies.

// SetOperatorPolicies replaces the operator's rules atomically.
func (rt *Runtime) SetOperatorPolicies(e *policy.Engine) {
	if e == nil {
		e = policy.NewEngine()
	}
	rt.operator.Store(e)
}

// OperatorPolicies returns the operator's rules in force.
func (rt *Runtime) OperatorPolicies() *policy.Engine {
	return rt.operator.Load()
}

// policySessions are the sub-sessions a connection opened, each with its own
// rules.
type policySessions struct {
	mu   sync.Mutex
	subs map[string]*policy.Engine
}

// OpenPolicySession creates a sub-session and returns its id.
func (s *Session) OpenPolicySession() string {
	id := uuid.NewString()
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	if s.subs.subs == nil {
		s.subs.subs = make(map[string]*policy.Engine)
	}
	s.subs.subs[id] = policy.NewEngine()
	return id
}

// ClosePolicySession drops a sub-session and its rules; it reports whether it
// existed.
func (s *Session) ClosePolicySession(id string) bool {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	_, ok := s.subs.subs[id]
	delete(s.subs.subs, id)
	return ok
}

// PolicySession returns the rules of one of this connection's sub-sessions.
func (s *Session) PolicySession(id string) (*policy.Engine, bool) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	e, ok := s.subs.subs[id]
	return e, ok
}

// policySessionGate blocks a proposal that names a sub-session this
// connection does not have (unknown, closed, or another connection's: the
// answer is the same, so ids of other connections cannot be probed).
type policySessionGate struct{}

func (policySessionGate) Name() string { return "policy_session" }

func (policySessionGate) Admit(_ context.Context, sub *Submission) error {
	if sub.PolicySession == "" {
		return nil
	}
	if _, ok := sub.Session.PolicySession(sub.PolicySession); !ok {
		return fmt.Errorf("session_id '%s' is not an open policy session of this connection; open one with session.policy.open, or omit session_id", sub.PolicySession)
	}
	return nil
}

// policyCheck evaluates every policy layer on an action about to run.
type policyCheck struct{ rt *Runtime }

func (policyCheck) Name() string { return "policy" }

func (c policyCheck) Check(ctx context.Context, sub *Submission, a *protocol.Action) error {
	state := &policyState{ctx: ctx, st: c.rt.State, tenant: sub.Tenant, sub: sub}
	type layer struct {
		name string
		e    *policy.Engine
	}
	var held [3]layer
	layers := append(held[:0], layer{protocol.LayerOperator, c.rt.OperatorPolicies()}, layer{protocol.LayerConnection, sub.Session.Policies})
	if sub.PolicySession != "" {
		if e, ok := sub.Session.PolicySession(sub.PolicySession); ok {
			layers = append(layers, layer{protocol.LayerSession, e})
		}
	}
	var reasons []string
	for _, l := range layers {
		violations := l.e.Evaluate(a, state)
		if state.err != nil {
			// A rule read state it could not reach: its verdict is not one,
			// and no violation is recorded for it.
			return state.err
		}
		for _, v := range violations {
			c.rt.Events.Append(Event{
				Kind: EventPolicyViolation, ProposalID: sub.Proposal.ID, ActionID: a.ID, Connection: sub.Session.ID,
				Data: map[string]any{"policy_name": v.PolicyName, "reason": v.Reason, "layer": l.name, "tool": a.Tool},
			})
			reasons = append(reasons, fmt.Sprintf("denied by %s policy '%s': %s", l.name, v.PolicyName, v.Reason))
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(reasons, "; "))
}

// policyState is the state the rules of one check read. The first read the
// store fails is kept, and fails the check: a rule must not decide on a
// value it could not read.
type policyState struct {
	ctx    context.Context
	st     store.State
	tenant string
	sub    *Submission // its scope, for policy.ScopeReader
	err    error
}

// Scope implements policy.ScopeReader over the submission's RuntimeScope.
func (p *policyState) Scope(path string) (any, bool, bool) {
	if path == "callerId" {
		// A bound agent's caller is its own id (the transport sees to it);
		// anyone else's is what a trusted submitter said.
		return p.sub.Caller, p.sub.Caller != "", true
	}
	k, ok := strings.CutPrefix(path, "claims.")
	if !ok {
		return nil, false, false
	}
	v, present := p.sub.Claims[k]
	return v, present, p.sub.ClaimsTrusted
}

func (p *policyState) State(key string) (any, bool) {
	v, ok, err := p.st.Get(p.ctx, p.tenant, key)
	if err != nil {
		if p.err == nil {
			p.err = store.Wrap(fmt.Sprintf("policies could not read state key '%s'", key), err)
		}
		return nil, false
	}
	return v, ok
}
