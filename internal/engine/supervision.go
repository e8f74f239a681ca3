package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// Supervision is an admission gate run by other processes: a supervisor
// subscribes on its connection, every matching proposal is parked as an
// intent and sent to it, and the proposal waits for allow, deny or escalate.
// Nobody answering within the timeout rejects it (fail-closed). With no
// subscriber the gate is one atomic load.

// SupervisionFilter selects the proposals a supervisor sees; empty matches
// everything, and every set field must match.
type SupervisionFilter struct {
	Tools            []string               `json:"tools,omitempty"`
	Sessions         []string               `json:"sessions,omitempty"`
	MinReversibility protocol.Reversibility `json:"min_reversibility,omitempty"`
}

// IntentAction describes one action of a parked proposal: names, never
// parameter values.
type IntentAction struct {
	ID               string                 `json:"id"`
	ActionType       protocol.ActionType    `json:"action_type"`
	Tool             string                 `json:"tool,omitempty"`
	Reversibility    protocol.Reversibility `json:"reversibility"`
	ParameterKeys    []string               `json:"parameter_keys"`
	ParametersDigest string                 `json:"parameters_digest"`
}

// Intent is a proposal parked for supervisors.
type Intent struct {
	ID            string                 `json:"id"`
	ProposalID    string                 `json:"proposal_id"`
	Source        string                 `json:"source"`
	SessionID     string                 `json:"session_id,omitempty"`
	Scope         map[string]string      `json:"scope,omitempty"`
	Reversibility protocol.Reversibility `json:"reversibility"`
	CreatedAt     time.Time              `json:"created_at"`
	Actions       []IntentAction         `json:"actions"`
}

// SupervisionDecision is a supervisor's verdict.
type SupervisionDecision struct {
	Kind   string `json:"kind"` // allow, deny or escalate
	Reason string `json:"reason,omitempty"`
}

type subscriber struct {
	filter SupervisionFilter
	notify func(Intent)
}

type parked struct {
	intent   Intent
	decided  chan SupervisionDecision
	reviewer string
	matched  map[string]bool // the supervisors whose filter matched: only they decide
}

// Supervisors is the daemon-wide set of subscribed supervisors and parked
// intents.
type Supervisors struct {
	timeout time.Duration
	count   atomic.Int32

	mu      sync.Mutex
	subs    map[string]*subscriber // by connection id
	pending map[string]*parked     // by intent id
	order   []string               // intent ids, oldest first
	idle    chan struct{}          // closed while nothing is parked
}

func newSupervisors(timeout time.Duration) *Supervisors {
	idle := make(chan struct{})
	close(idle)
	return &Supervisors{timeout: timeout, subs: make(map[string]*subscriber), pending: make(map[string]*parked), idle: idle}
}

// Timeout is how long an intent waits for a decision.
func (s *Supervisors) Timeout() time.Duration { return s.timeout }

// Subscribe installs (or replaces) conn's filter; notify hands an intent to
// its delivery. notify runs on the submitter's path, so it must not block
// (queue the intent, never write it). It returns how many supervisors are
// subscribed.
func (s *Supervisors) Subscribe(connID string, f SupervisionFilter, notify func(Intent)) (int, error) {
	if f.MinReversibility != "" {
		if f.MinReversibility.Rank() > protocol.Irreversible.Rank() {
			return 0, fmt.Errorf("min_reversibility must be reversible, compensable or irreversible; got '%s'", f.MinReversibility)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[connID] = &subscriber{filter: f, notify: notify}
	s.count.Store(int32(len(s.subs)))
	return len(s.subs), nil
}

// Unsubscribe removes conn's subscription. Its parked intents stay parked.
func (s *Supervisors) Unsubscribe(connID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, was := s.subs[connID]
	delete(s.subs, connID)
	s.count.Store(int32(len(s.subs)))
	return was
}

// Subscribed reports whether a connection is a supervisor.
func (s *Supervisors) Subscribed(connID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.subs[connID]
	return ok
}

// Pending returns the parked intents, oldest first.
func (s *Supervisors) Pending() []Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Intent, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.pending[id].intent)
	}
	return out
}

// Idle returns a channel that is closed once no intent is parked, so that
// a draining supervisor connection can stay open exactly as long as it may
// still release a proposal.
func (s *Supervisors) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle
}

// Decide answers a parked intent. Only a subscribed supervisor may decide;
// an unknown, decided or timed-out intent is an error.
func (s *Supervisors) Decide(connID, intentID string, d SupervisionDecision) error {
	switch d.Kind {
	case "allow":
	case "deny", "escalate":
		if strings.TrimSpace(d.Reason) == "" {
			return fmt.Errorf("decision '%s' needs a reason", d.Kind)
		}
	default:
		return fmt.Errorf("decision kind must be allow, deny or escalate; got '%s'", d.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.subs[connID]; !ok {
		return errors.New("only a subscribed supervisor can decide: call supervision.subscribe first")
	}
	p, ok := s.pending[intentID]
	if !ok || !p.matched[connID] {
		return fmt.Errorf("intent '%s' is not pending for you: it was already decided, timed out, never existed, or was sent to other supervisors; your decision did not land", intentID)
	}
	p.reviewer = "conn:" + connID
	s.removeLocked(intentID)
	p.decided <- d
	return nil
}

func (s *Supervisors) removeLocked(id string) {
	if _, ok := s.pending[id]; !ok {
		return
	}
	delete(s.pending, id)
	for i, x := range s.order {
		if x == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	if len(s.pending) == 0 {
		close(s.idle)
	}
}

func (f *SupervisionFilter) matches(in *Intent, connID string) bool {
	if len(f.Tools) > 0 {
		hit := false
		for _, a := range in.Actions {
			for _, t := range f.Tools {
				if a.Tool == t {
					hit = true
				}
			}
		}
		if !hit {
			return false
		}
	}
	if len(f.Sessions) > 0 {
		hit := false
		for _, sid := range f.Sessions {
			if sid == connID || (in.SessionID != "" && sid == in.SessionID) {
				hit = true
			}
		}
		if !hit {
			return false
		}
	}
	if f.MinReversibility != "" && in.Reversibility.Rank() < f.MinReversibility.Rank() {
		return false
	}
	return true
}

// buildIntent describes a proposal without its parameter values.
func buildIntent(sub *Submission) Intent {
	p := sub.Proposal
	in := Intent{ID: uuid.NewString(), ProposalID: p.ID, Source: p.Source, SessionID: sub.PolicySession, Reversibility: protocol.Reversible, CreatedAt: time.Now().UTC()}
	if sub.Tenant != "" {
		in.Scope = map[string]string{"tenantId": sub.Tenant}
	}
	for i := range p.Actions {
		a := &p.Actions[i]
		rev := policy.Classify(a).Reversibility
		if rev.Rank() > in.Reversibility.Rank() {
			in.Reversibility = rev
		}
		keys := make([]string, 0, len(a.Parameters))
		for k := range a.Parameters {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sum := sha256.Sum256(jsonvalue.Canonical(a.Parameters))
		in.Actions = append(in.Actions, IntentAction{ID: a.ID, ActionType: a.Type, Tool: a.Tool, Reversibility: rev, ParameterKeys: keys, ParametersDigest: "sha256:" + hex.EncodeToString(sum[:])})
	}
	return in
}

// supervisionGate parks matching proposals until a supervisor decides.
type supervisionGate struct{ rt *Runtime }

func (supervisionGate) Name() string { return "supervision" }

func (g supervisionGate) Admit(ctx context.Context, sub *Submission) error {
	s := g.rt.Supervisors
	if s.count.Load() == 0 {
		return nil
	}
	in := buildIntent(sub)
	s.mu.Lock()
	var notify []func(Intent)
	matched := map[string]bool{}
	for id, sb := range s.subs {
		if sb.filter.matches(&in, sub.Session.ID) {
			notify = append(notify, sb.notify)
			matched[id] = true
		}
	}
	if len(notify) == 0 {
		s.mu.Unlock()
		return nil
	}
	p := &parked{intent: in, decided: make(chan SupervisionDecision, 1), matched: matched}
	if len(s.pending) == 0 {
		s.idle = make(chan struct{})
	}
	s.pending[in.ID] = p
	s.order = append(s.order, in.ID)
	s.mu.Unlock()
	// The decision clock starts now. notify only queues the intent, so a
	// supervisor whose socket has stopped draining delays nobody.
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	for _, n := range notify {
		n(in)
	}
	var d SupervisionDecision
	select {
	case d = <-p.decided:
	case <-timer.C:
		s.mu.Lock()
		_, still := s.pending[in.ID]
		s.removeLocked(in.ID)
		s.mu.Unlock()
		if still {
			g.emit(sub, in, "timeout", "")
			return fmt.Errorf("no supervisor decided on intent %s within %s; the proposal is rejected (fail-closed)", in.ID, s.timeout)
		}
		d = <-p.decided // decided in the same instant
	case <-ctx.Done():
		s.mu.Lock()
		_, still := s.pending[in.ID]
		s.removeLocked(in.ID)
		s.mu.Unlock()
		if still {
			return fmt.Errorf("stopped waiting for a supervisor: %v", context.Cause(ctx))
		}
		d = <-p.decided // decided in the same instant: honour it
	}
	g.emit(sub, in, d.Kind, p.reviewer)
	switch d.Kind {
	case "allow":
		return nil
	case "deny":
		return fmt.Errorf("denied by supervisor %s: %s", p.reviewer, d.Reason)
	}
	// escalate: the human approval ledger decides.
	var missing []string
	for i := range sub.Proposal.Actions {
		a := &sub.Proposal.Actions[i]
		fp := approvals.Fingerprint(a)
		tier := policy.Classify(a).Tier
		if led := g.rt.opts.Approvals; led != nil {
			if rec, ok := led.Decision(fp); ok && approvedAtOrAbove(rec, tier) {
				continue
			}
		}
		missing = append(missing, fmt.Sprintf("action '%s': approve fingerprint %s at %s", a.ID, fp, tier))
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("supervisor %s escalated to the approval ledger (%s): %s; then re-submit", p.reviewer, d.Reason, strings.Join(missing, "; "))
}

func (g supervisionGate) emit(sub *Submission, in Intent, decision, reviewer string) {
	g.rt.Events.Append(Event{Kind: EventSupervisionDecision, ProposalID: sub.Proposal.ID, Connection: sub.Session.ID, Data: map[string]any{
		"intent_id": in.ID, "decision": decision, "reviewer": reviewer,
	}})
}
