package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parslee-ai/car-server/internal/store"
)

// Supervision across daemons. Several daemons sharing one store act as one
// supervised system: a supervisor connected to daemon A decides what waits
// on daemon B.
//
//   - Every subscription is recorded in the shared store (a
//     SupervisorRegistry) before it is answered, so that every daemon knows
//     a supervisor exists somewhere, and whose proposals it wants. Each
//     daemon re-reads the list every Refresh, and at once when another
//     daemon says on the bus that its subscriptions changed; the gate reads
//     a cached copy, so with nobody supervising anywhere it stays one atomic
//     load. A subscription ends as it does on one daemon (unsubscribe, the
//     connection closing); the registry lists only daemons whose heartbeat
//     is current, and each daemon removes rows of its own that no
//     connection backs any more (left by a crash, or by a store that was
//     down when the connection closed).
//   - A proposal whose supervisors are (also) elsewhere parks as it does for
//     local ones, and its intent is published on the bus (SupervisionTopic):
//     every daemon lists it in supervision.pending, and sends it to its own
//     supervisors whose filter matches, through their usual feed. An intent
//     whose actions do not fit one notification lists its first actions
//     and counts the rest in actions_omitted.
//   - A decision made on A for B's intent is sent to B, which applies it
//     exactly as a local one: the first decision lands, on whichever daemon
//     it was made. B then publishes that the intent settled (decided, timed
//     out or cancelled) and which decision landed, so the other daemons drop
//     it, and supervision.decide on A answers decided, or refuses as it
//     refuses a late decision on one daemon.
//   - Fail-closed as ever: a proposal whose only supervisors are elsewhere
//     is rejected when its intent cannot be published; one whose supervisors
//     vanished between two refreshes times out.

// SupervisionTopic is the bus topic of supervision across daemons.
const SupervisionTopic = "car_supervision"

// ErrCluster is wrapped by the errors of supervision across daemons that
// come from the other daemons or the shared store not answering, rather
// than from the request.
var ErrCluster = errors.New("the other daemons could not be reached through the shared store")

// SupervisorRegistry is where supervisor subscriptions are recorded for
// every daemon sharing the store to read.
type SupervisorRegistry interface {
	// Register records (or replaces) the subscription of conn, a connection
	// to this daemon, with its filter as JSON.
	Register(ctx context.Context, conn string, filter json.RawMessage) error
	// Unregister removes conn's subscription; removing one that is not
	// recorded is no error.
	Unregister(ctx context.Context, conn string) error
	// Alive lists the subscriptions of every daemon whose heartbeat is
	// current, this daemon's included.
	Alive(ctx context.Context) ([]RemoteSupervisor, error)
}

// RemoteSupervisor is one recorded subscription.
type RemoteSupervisor struct {
	Node   string          // the daemon the supervisor is connected to
	Conn   string          // its connection id
	Filter json.RawMessage // its SupervisionFilter
}

// SupervisionCluster connects the supervision of this daemon to the other
// daemons sharing its store.
type SupervisionCluster struct {
	Node     string             // this daemon's member id
	Bus      store.Bus          // notifications between the daemons
	Registry SupervisorRegistry // the subscriptions of every daemon
	Refresh  time.Duration      // how often the registry is re-read (5 s)
	Confirm  time.Duration      // how long a decision sent to another daemon waits to hear whether it landed (10 s)
}

// Bounds of supervision across daemons.
const (
	maxBusPayload   = 7000 // bytes of one notification (PostgreSQL's NOTIFY refuses 8,000)
	maxAway         = 4096 // intents of other daemons kept; the oldest goes first
	maxRemoteReason = 4000 // bytes of the reason of a decision sent to another daemon
	storeTimeout    = 5 * time.Second
)

// Message types on SupervisionTopic.
const (
	msgIntent      = "intent"      // node parked intent (submitter, timeout_ms)
	msgDecision    = "decision"    // a supervisor on from decided node's intent
	msgSettled     = "settled"     // node's intent settled; decision_id landed ("" for none sent from elsewhere)
	msgSupervisors = "supervisors" // node's subscriptions changed: re-read the registry
)

// supervisionMsg is one notification on SupervisionTopic. It carries ids,
// names and digests, never parameter values.
type supervisionMsg struct {
	Type       string               `json:"type"`
	Node       string               `json:"node"`
	From       string               `json:"from,omitempty"`
	IntentID   string               `json:"intent_id,omitempty"`
	Intent     *Intent              `json:"intent,omitempty"`
	Submitter  string               `json:"submitter,omitempty"`
	TimeoutMS  int64                `json:"timeout_ms,omitempty"`
	Decision   *SupervisionDecision `json:"decision,omitempty"`
	DecisionID string               `json:"decision_id,omitempty"`
	Reviewer   string               `json:"reviewer,omitempty"`
	Outcome    string               `json:"outcome,omitempty"`
}

// remoteSupervisor is another daemon's supervisor, its filter decoded.
type remoteSupervisor struct {
	node, conn string
	filter     SupervisionFilter
}

// awayIntent is an intent parked on another daemon.
type awayIntent struct {
	intent  Intent
	node    string
	matched map[string]bool // this daemon's supervisors who may decide it
	expires time.Time       // dropped then, whether or not its daemon said it settled
	settled chan struct{}   // closed when it is dropped
	winner  string          // the decision id that landed, set before settled closes
}

type supervisionCluster struct {
	node    string
	bus     store.Bus
	reg     SupervisorRegistry
	refresh time.Duration
	confirm time.Duration

	// regMu orders the registry writes of this daemon: a subscription's and
	// a refresh's mending of this daemon's rows never interleave, and an
	// unsubscription's comes after any mending that saw the subscription.
	regMu sync.Mutex

	kick   chan struct{}   // one pending signal: re-read the registry now
	ctx    context.Context // ends at leave: the refresh loop's reads
	cancel context.CancelFunc
	done   chan struct{} // closed when the refresh loop has returned
}

// JoinCluster connects this daemon's supervision to the other daemons
// sharing its store: it reads the registry once (an error says the store
// cannot be reached), listens on the bus, and re-reads the registry until
// leave, which stops all of it and waits. Call it before serving, once.
func (s *Supervisors) JoinCluster(ctx context.Context, c SupervisionCluster) (leave func(), err error) {
	if c.Node == "" || c.Bus == nil || c.Registry == nil {
		return nil, errors.New("joining other daemons needs this daemon's member id, a bus and a supervisor registry")
	}
	if c.Refresh <= 0 {
		c.Refresh = 5 * time.Second
	}
	if c.Confirm <= 0 {
		c.Confirm = 10 * time.Second
	}
	cl := &supervisionCluster{node: c.Node, bus: c.Bus, reg: c.Registry, refresh: c.Refresh, confirm: c.Confirm,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	if !s.cl.CompareAndSwap(nil, cl) {
		cl.cancel()
		return nil, errors.New("this daemon's supervision has already joined the other daemons")
	}
	unsubscribe := c.Bus.Subscribe(SupervisionTopic, s.receive)
	if err := s.Refresh(ctx); err != nil {
		unsubscribe()
		cl.cancel()
		s.cl.Store(nil)
		return nil, err
	}
	go s.refreshLoop(cl)
	return sync.OnceFunc(func() {
		cl.cancel()
		<-cl.done
		unsubscribe()
	}), nil
}

// refreshLoop re-reads the registry every refresh, and when kicked.
func (s *Supervisors) refreshLoop(cl *supervisionCluster) {
	defer close(cl.done)
	tick := time.NewTicker(cl.refresh)
	defer tick.Stop()
	for {
		select {
		case <-cl.ctx.Done():
			return
		case <-tick.C:
		case <-cl.kick:
		}
		rctx, rcancel := context.WithTimeout(cl.ctx, storeTimeout)
		// An error keeps the list last read: the next tick tries again.
		_ = s.Refresh(rctx)
		rcancel()
	}
}

// Refresh re-reads the registry now: the other daemons' supervisors, whom
// the gate parks for, and this daemon's own rows, mended to match the
// connections subscribed here. Without JoinCluster it does nothing.
func (s *Supervisors) Refresh(ctx context.Context) error {
	cl := s.cl.Load()
	if cl == nil {
		return nil
	}
	cl.regMu.Lock()
	defer cl.regMu.Unlock()
	rows, err := cl.reg.Alive(ctx)
	if err != nil {
		return fmt.Errorf("%w: read the supervisors of every daemon: %w", ErrCluster, err)
	}
	var remote []remoteSupervisor
	mine := map[string]json.RawMessage{}
	for _, r := range rows {
		if r.Node == cl.node {
			mine[r.Conn] = r.Filter
			continue
		}
		var f SupervisionFilter
		if len(r.Filter) > 0 && string(r.Filter) != "null" {
			if err := json.Unmarshal(r.Filter, &f); err != nil {
				// A filter this daemon cannot read matches everything: it
				// parks rather than run what someone meant to supervise.
				f = SupervisionFilter{}
			}
		}
		remote = append(remote, remoteSupervisor{node: r.Node, conn: r.Conn, filter: f})
	}
	s.mu.Lock()
	s.remote = remote
	s.countLocked()
	local := make(map[string]SupervisionFilter, len(s.subs))
	for id, sb := range s.subs {
		local[id] = sb.filter
	}
	s.mu.Unlock()
	// Mend this daemon's rows: a row no connection backs goes, a
	// connection without its row (or with another filter) gets it back.
	var errs []error
	for conn := range mine {
		if _, ok := local[conn]; !ok {
			if err := cl.reg.Unregister(ctx, conn); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for conn, f := range local {
		want, _ := json.Marshal(f)
		if got, ok := mine[conn]; !ok || !sameJSON(got, want) {
			if err := cl.reg.Register(ctx, conn, want); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: mend this daemon's supervisor rows: %w", ErrCluster, err)
	}
	return nil
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// register records conn's subscription; the caller holds regMu.
func (cl *supervisionCluster) register(ctx context.Context, conn string, f SupervisionFilter) error {
	raw, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode the filter: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := cl.reg.Register(ctx, conn, raw); err != nil {
		return fmt.Errorf("%w: record the subscription in the shared store, so that the other daemons park their proposals for it: %w; nothing was subscribed, try again", ErrCluster, err)
	}
	return nil
}

// unregister removes conn's row. A failure is mended by the next refresh,
// which drops this daemon's rows that no connection backs.
func (cl *supervisionCluster) unregister(conn string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_ = cl.reg.Unregister(ctx, conn)
	cl.tellPeers(ctx)
}

// tellPeers says on the bus that this daemon's subscriptions changed, so
// that the others re-read the registry now rather than at their next
// refresh (which a lost notification waits for).
func (cl *supervisionCluster) tellPeers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_ = cl.publish(ctx, supervisionMsg{Type: msgSupervisors, Node: cl.node})
}

func (cl *supervisionCluster) publish(ctx context.Context, m supervisionMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return cl.bus.Publish(ctx, SupervisionTopic, b)
}

// announce publishes an intent parked here.
func (cl *supervisionCluster) announce(ctx context.Context, in Intent, submitter string, timeout time.Duration) error {
	b, err := fitIntent(supervisionMsg{Type: msgIntent, Node: cl.node, Intent: &in, Submitter: submitter, TimeoutMS: timeout.Milliseconds()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := cl.bus.Publish(ctx, SupervisionTopic, b); err != nil {
		return fmt.Errorf("%w: %w", ErrCluster, err)
	}
	return nil
}

// fitIntent encodes an intent message within one notification, keeping as
// many of its first actions as fit and counting the others.
func fitIntent(m supervisionMsg) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil || len(b) <= maxBusPayload {
		return b, err
	}
	full := *m.Intent
	encode := func(keep int) ([]byte, error) {
		in := full
		in.Actions = full.Actions[:keep]
		in.ActionsOmitted = len(full.Actions) - keep
		m.Intent = &in
		return json.Marshal(m)
	}
	// The largest number of actions that fits: encode(lo) fits, encode(hi) does not.
	lo, hi := -1, len(full.Actions)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if b, err := encode(mid); err == nil && len(b) <= maxBusPayload {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo < 0 {
		return nil, fmt.Errorf("intent %s does not fit one notification to the other daemons even without its actions (its proposal id, source or scope is too long)", full.ID)
	}
	return encode(lo)
}

// settled tells the other daemons that an intent parked here settled, and
// which decision landed.
func (cl *supervisionCluster) settled(intentID, outcome, winner string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	// Lost, the other daemons drop the intent when its timeout passes.
	_ = cl.publish(ctx, supervisionMsg{Type: msgSettled, Node: cl.node, IntentID: intentID, Outcome: outcome, DecisionID: winner})
}

// receive handles one notification on SupervisionTopic; it never blocks
// (intents are queued on the supervisors' feeds).
func (s *Supervisors) receive(payload []byte) {
	cl := s.cl.Load()
	var m supervisionMsg
	if cl == nil || json.Unmarshal(payload, &m) != nil || m.Node == "" {
		return
	}
	switch m.Type {
	case msgIntent:
		if m.Node != cl.node && m.Intent != nil && m.Intent.ID != "" {
			s.arrive(m)
		}
	case msgDecision:
		if m.Node == cl.node && m.Decision != nil {
			s.applyRemote(m)
		}
	case msgSettled:
		if m.Node != cl.node {
			s.settleAway(m.IntentID, m.DecisionID)
		}
	case msgSupervisors:
		if m.Node != cl.node {
			select {
			case cl.kick <- struct{}{}:
			default:
			}
		}
	}
}

// arrive keeps an intent parked on another daemon and sends it to the
// supervisors here whose filter matches.
func (s *Supervisors) arrive(m supervisionMsg) {
	in := *m.Intent
	in.Node = m.Node
	timeout := time.Duration(m.TimeoutMS) * time.Millisecond
	if timeout <= 0 || timeout > time.Hour {
		timeout = s.timeout
	}
	a := &awayIntent{intent: in, node: m.Node, matched: map[string]bool{}, expires: time.Now().Add(timeout), settled: make(chan struct{})}
	var notify []func(Intent)
	s.mu.Lock()
	if _, dup := s.away[in.ID]; dup {
		s.mu.Unlock()
		return
	}
	s.pruneAwayLocked(time.Now())
	if len(s.awayOrder) >= maxAway {
		s.dropAwayLocked(s.awayOrder[0], "")
	}
	for id, sb := range s.subs {
		if selects(&sb.filter, &in, m.Submitter) {
			notify = append(notify, sb.notify)
			a.matched[id] = true
		}
	}
	s.away[in.ID] = a
	s.awayOrder = append(s.awayOrder, in.ID)
	s.mu.Unlock()
	for _, n := range notify {
		n(in)
	}
}

// applyRemote applies a decision made on another daemon for an intent
// parked here, exactly as a local one: it lands only if the intent still
// waits.
func (s *Supervisors) applyRemote(m supervisionMsg) {
	d := *m.Decision
	switch d.Kind {
	case "allow", "deny", "escalate":
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[m.IntentID]
	if !ok {
		return // settled already: the settled notification says which decision landed
	}
	p.reviewer = m.Reviewer
	if p.reviewer == "" {
		p.reviewer = "daemon:" + m.From
	}
	p.decisionID = m.DecisionID
	s.removeLocked(m.IntentID)
	p.decided <- d
}

// settleAway drops an intent of another daemon, which settled it.
func (s *Supervisors) settleAway(intentID, winner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropAwayLocked(intentID, winner)
}

func (s *Supervisors) dropAwayLocked(id, winner string) {
	a, ok := s.away[id]
	if !ok {
		return
	}
	delete(s.away, id)
	if i := slices.Index(s.awayOrder, id); i >= 0 {
		s.awayOrder = slices.Delete(s.awayOrder, i, i+1)
	}
	a.winner = winner
	close(a.settled)
}

// pruneAwayLocked drops the intents of other daemons whose timeout has
// passed: their daemon rejected them, or is gone.
func (s *Supervisors) pruneAwayLocked(now time.Time) {
	for _, id := range slices.Clone(s.awayOrder) {
		if now.After(s.away[id].expires) {
			s.dropAwayLocked(id, "")
		}
	}
}

// decideAway sends a decision to the daemon where the intent waits, and
// waits for it to say whether the decision landed.
func (s *Supervisors) decideAway(ctx context.Context, cl *supervisionCluster, a *awayIntent, reviewer string, d SupervisionDecision) error {
	if len(d.Reason) > maxRemoteReason {
		return fmt.Errorf("the reason is %d bytes; a decision sent to daemon %s, where intent '%s' waits, carries at most %d: shorten it", len(d.Reason), a.node, a.intent.ID, maxRemoteReason)
	}
	id := uuid.NewString()
	pctx, cancel := context.WithTimeout(ctx, storeTimeout)
	err := cl.publish(pctx, supervisionMsg{Type: msgDecision, Node: a.node, From: cl.node, IntentID: a.intent.ID, DecisionID: id, Decision: &d, Reviewer: reviewer})
	cancel()
	if err != nil {
		return fmt.Errorf("%w: your decision could not be sent to daemon %s, where intent '%s' waits: %w; it did not land, decide again", ErrCluster, a.node, a.intent.ID, err)
	}
	timer := time.NewTimer(cl.confirm)
	defer timer.Stop()
	select {
	case <-a.settled:
		if a.winner == id {
			return nil
		}
		return notPending(a.intent.ID)
	case <-timer.C:
		return fmt.Errorf("%w: daemon %s did not say within %s whether your decision on intent '%s' landed; supervision.pending shows whether it still waits", ErrCluster, a.node, cl.confirm, a.intent.ID)
	case <-ctx.Done():
		return fmt.Errorf("%w: stopped waiting for daemon %s to say whether your decision on intent '%s' landed: %w", ErrCluster, a.node, a.intent.ID, context.Cause(ctx))
	}
}
