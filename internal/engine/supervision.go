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
	"github.com/parslee-ai/car-server/protocol"
)

// Supervision is an admission gate run by other processes: a supervisor
// subscribes on its connection, every matching proposal is parked as an
// intent and sent to it, and the proposal waits for allow, deny or escalate.
// Nobody answering within the timeout rejects it (fail-closed). With no
// subscriber the gate is one atomic load.

// The supervision vocabulary is the wire's: a filter selects the proposals
// a supervisor sees (empty matches everything, every set field must match);
// an intent is a parked proposal, its actions named, never their parameter
// values; a decision is a supervisor's verdict.
type (
	SupervisionFilter   = protocol.SupervisionFilter
	IntentAction        = protocol.IntentAction
	Intent              = protocol.Intent
	SupervisionDecision = protocol.SupervisionDecision
)

type subscriber struct {
	filter SupervisionFilter
	notify func(Intent)
}

type parked struct {
	intent     Intent
	decided    chan SupervisionDecision
	reviewer   string
	decisionID string          // the id of a decision sent from another daemon; "" for one made here
	matched    map[string]bool // the supervisors whose filter matched: only they decide
}

// Supervisors is the daemon-wide set of subscribed supervisors and parked
// intents, and, once the daemon has joined others (JoinCluster), what it
// knows of theirs.
type Supervisors struct {
	timeout  time.Duration
	count    atomic.Int32                       // supervisors subscribed here
	watching atomic.Int32                       // here and on the other daemons: the gate's fast path
	cl       atomic.Pointer[supervisionCluster] // nil: one daemon

	mu        sync.Mutex
	subs      map[string]*subscriber // by connection id
	pending   map[string]*parked     // by intent id
	order     []string               // intent ids, oldest first
	idle      chan struct{}          // closed while nothing is parked
	remote    []remoteSupervisor     // the other daemons' supervisors, as last read
	away      map[string]*awayIntent // intents parked on other daemons, by id
	awayOrder []string               // their ids, in arrival order
}

func newSupervisors(timeout time.Duration) *Supervisors {
	idle := make(chan struct{})
	close(idle)
	return &Supervisors{timeout: timeout, subs: make(map[string]*subscriber), pending: make(map[string]*parked), idle: idle, away: make(map[string]*awayIntent)}
}

// Timeout is how long an intent waits for a decision.
func (s *Supervisors) Timeout() time.Duration { return s.timeout }

// countLocked publishes the counts the gate and the status read.
func (s *Supervisors) countLocked() {
	s.count.Store(int32(len(s.subs)))
	s.watching.Store(int32(len(s.subs) + len(s.remote)))
}

// validateFilter refuses a filter no intent could be ranked against.
func validateFilter(f *SupervisionFilter) error {
	if f.MinReversibility != "" && f.MinReversibility.Rank() > protocol.Irreversible.Rank() {
		return fmt.Errorf("min_reversibility must be reversible, compensable or irreversible; got '%s'", f.MinReversibility)
	}
	return nil
}

// Subscribe installs (or replaces) conn's filter; notify hands an intent to
// its delivery. notify runs on the submitter's path, so it must not block
// (queue the intent, never write it). It returns how many supervisors are
// subscribed, on every daemon once this one has joined others. On a daemon
// that has joined others the subscription is recorded in the shared store
// first, so that they park for it; an error wrapping ErrCluster says that
// could not be done, and nothing was subscribed.
func (s *Supervisors) Subscribe(ctx context.Context, connID string, f SupervisionFilter, notify func(Intent)) (int, error) {
	if err := validateFilter(&f); err != nil {
		return 0, err
	}
	cl := s.cl.Load()
	if cl != nil {
		cl.regMu.Lock()
		defer cl.regMu.Unlock()
		if err := cl.register(ctx, connID, f); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	s.subs[connID] = &subscriber{filter: f, notify: notify}
	s.countLocked()
	n := len(s.subs) + len(s.remote)
	s.mu.Unlock()
	if cl != nil {
		cl.tellPeers(ctx)
	}
	return n, nil
}

// Unsubscribe removes conn's subscription. Its parked intents stay parked.
func (s *Supervisors) Unsubscribe(connID string) bool {
	cl := s.cl.Load()
	if cl != nil {
		// Taken for the removal alone: a refresh mending this daemon's rows
		// finishes first, so its writes come before the unregistration
		// below, which runs unlocked so that connections closing together
		// do not wait on the store one after another.
		cl.regMu.Lock()
	}
	s.mu.Lock()
	_, was := s.subs[connID]
	delete(s.subs, connID)
	s.countLocked()
	s.mu.Unlock()
	if cl != nil {
		cl.regMu.Unlock()
		if was {
			cl.unregister(connID)
		}
	}
	return was
}

// Subscribed reports whether a connection is a supervisor.
func (s *Supervisors) Subscribed(connID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.subs[connID]
	return ok
}

// Pending returns the parked intents, oldest first: this daemon's, and
// those parked on the other daemons that this one has heard of.
func (s *Supervisors) Pending() []Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Intent, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.pending[id].intent)
	}
	if len(s.away) == 0 {
		return out
	}
	s.pruneAwayLocked(time.Now())
	for _, id := range s.awayOrder {
		out = append(out, s.away[id].intent)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// parkedHere is how many intents wait on this daemon.
func (s *Supervisors) parkedHere() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Idle returns a channel that is closed once no intent is parked on this
// daemon, so that a draining supervisor connection can stay open exactly as
// long as it may still release a proposal here. (Intents parked on other
// daemons do not hold it open: their own supervisors, or the decision
// timeout, settle them.)
func (s *Supervisors) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle
}

// notPending is the refusal of a decision that cannot land.
func notPending(intentID string) error {
	return fmt.Errorf("intent '%s' is not pending for you: it was already decided, timed out, never existed, or was sent to other supervisors; your decision did not land", intentID)
}

// Decide answers a parked intent. Only a subscribed supervisor may decide;
// an unknown, decided or timed-out intent is an error. An intent parked on
// another daemon is decided there: Decide sends the decision and returns
// once that daemon says whether it landed (the first decision does, on
// whichever daemon it was made); an error wrapping ErrCluster says the
// daemon could not be reached or did not answer.
func (s *Supervisors) Decide(ctx context.Context, connID, intentID string, d SupervisionDecision) error {
	return s.DecideAs(ctx, connID, "conn:"+connID, intentID, d)
}

// DecideAs is Decide recorded as reviewer (the person, person:NAME, on a
// host-role connection) rather than as the connection.
func (s *Supervisors) DecideAs(ctx context.Context, connID, reviewer, intentID string, d SupervisionDecision) error {
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
	if _, ok := s.subs[connID]; !ok {
		s.mu.Unlock()
		return errors.New("only a subscribed supervisor can decide: call supervision.subscribe first")
	}
	if p, ok := s.pending[intentID]; ok && p.matched[connID] {
		p.reviewer = reviewer
		s.removeLocked(intentID)
		p.decided <- d
		s.mu.Unlock()
		return nil
	}
	cl := s.cl.Load()
	var a *awayIntent
	if cl != nil {
		s.pruneAwayLocked(time.Now())
		a = s.away[intentID]
	}
	s.mu.Unlock()
	if a == nil || !a.matched[connID] {
		return notPending(intentID)
	}
	return s.decideAway(ctx, cl, a, reviewer, d)
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

// selects reports whether f sends in, submitted by connection connID, to
// its supervisor.
func selects(f *SupervisionFilter, in *Intent, connID string) bool {
	if len(f.Tools) > 0 {
		hit := false
		for _, a := range in.Actions {
			for _, t := range f.Tools {
				if a.Tool == t {
					hit = true
				}
			}
		}
		// An intent from another daemon may list only its first actions:
		// one of those left out may be the tool, so it goes to the
		// supervisor, who sees actions_omitted.
		if !hit && in.ActionsOmitted == 0 {
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
func (rt *Runtime) buildIntent(sub *Submission) Intent {
	p := sub.Proposal
	in := Intent{ID: uuid.NewString(), ProposalID: p.ID, Source: p.Source, SessionID: sub.PolicySession, Reversibility: protocol.Reversible, CreatedAt: time.Now().UTC()}
	if sub.Tenant != "" {
		in.Scope = map[string]string{"tenantId": sub.Tenant}
	}
	for i := range p.Actions {
		a := &p.Actions[i]
		rev := rt.Classify(a).Reversibility
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
	if s.watching.Load() == 0 {
		return nil
	}
	cl := s.cl.Load()
	in := g.rt.buildIntent(sub)
	if cl != nil {
		in.Node = cl.node
	}
	s.mu.Lock()
	var notify []func(Intent)
	matched := map[string]bool{}
	for id, sb := range s.subs {
		if selects(&sb.filter, &in, sub.Session.ID) {
			notify = append(notify, sb.notify)
			matched[id] = true
		}
	}
	elsewhere := false
	for i := range s.remote {
		if selects(&s.remote[i].filter, &in, sub.Session.ID) {
			elsewhere = true
			break
		}
	}
	if len(notify) == 0 && !elsewhere {
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
	outcome, winner := "cancelled", "" // what the other daemons are told
	if cl != nil {
		// Every daemon hears of it (their dashboards list it), and theirs
		// whose filter matches may decide it.
		if err := cl.announce(ctx, in, sub.Session.ID, s.timeout); err != nil {
			if len(notify) == 0 {
				s.mu.Lock()
				_, still := s.pending[in.ID]
				s.removeLocked(in.ID)
				s.mu.Unlock()
				if still {
					g.emit(sub, in, "unreachable", "", "")
					return fmt.Errorf("the supervisors of this proposal are on other daemons, and intent %s could not be sent to them: %w; the proposal is rejected (fail-closed)", in.ID, err)
				}
			}
			// Else the supervisors here decide it alone.
		} else {
			// However the wait ends, the other daemons drop the intent,
			// and a supervisor there who decided learns whether it landed.
			defer func() { cl.settled(in.ID, outcome, winner) }()
		}
	}
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
			outcome = "timeout"
			g.emit(sub, in, "timeout", "", "")
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
	outcome, winner = d.Kind, p.decisionID
	g.emit(sub, in, d.Kind, p.reviewer, d.Reason)
	switch d.Kind {
	case "allow":
		return nil
	case "deny":
		return fmt.Errorf("denied by supervisor %s: %s", p.reviewer, d.Reason)
	}
	return g.rt.escalated(ctx, sub, p.reviewer, d.Reason)
}

// escalated is the human approval ledger's answer to a proposal a
// supervisor escalated: nil when every action is approved at its tier, else
// which fingerprints to approve.
func (rt *Runtime) escalated(ctx context.Context, sub *Submission, reviewer, reason string) error {
	var missing []string
	for i := range sub.Proposal.Actions {
		a := &sub.Proposal.Actions[i]
		fp := approvals.Fingerprint(a)
		tier := rt.Classify(a).Tier
		rec, ok, err := rt.ledgerDecision(ctx, fp, tier)
		if err != nil {
			return fmt.Errorf("supervisor %s escalated to the approval ledger (%s), and it cannot be read: %w", reviewer, reason, err)
		}
		q := rt.quorumOf(a)
		if ok && approvedAtOrAbove(rec, tier) && quorumMet(rec, q) {
			continue
		}
		if q > 1 {
			missing = append(missing, fmt.Sprintf("action '%s': %d distinct people approve fingerprint %s at %s (%d so far)", a.ID, q, fp, tier, len(people(rec.Approvers))))
			continue
		}
		missing = append(missing, fmt.Sprintf("action '%s': approve fingerprint %s at %s", a.ID, fp, tier))
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("supervisor %s escalated to the approval ledger (%s): %s; then re-submit", reviewer, reason, strings.Join(missing, "; "))
}

func (g supervisionGate) emit(sub *Submission, in Intent, decision, reviewer, reason string) {
	data := map[string]any{"intent_id": in.ID, "decision": decision, "reviewer": reviewer}
	if reason != "" {
		data["reason"] = reason
	}
	g.rt.Events.Append(Event{Kind: EventSupervisionDecision, ProposalID: sub.Proposal.ID, Connection: sub.Session.ID, Data: data})
}
