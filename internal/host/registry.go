package host

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// Errors callers map to JSON-RPC codes; test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrNotOwner = errors.New("owned by another session")
	ErrInvalid  = errors.New("invalid host request")
	ErrLimit    = errors.New("host registry limit reached")
)

// DefaultEventRingBytes bounds the host event ring's bytes
// (host_event_ring_bytes): 32 host.notify payloads of the largest size
// max_notify_bytes lets through, thousands of ordinary events.
const DefaultEventRingBytes = 8 << 20

// Options bounds what one daemon keeps; a zero field takes its default.
type Options struct {
	MaxAgentsPerConn int   // agents one connection may register (64)
	MaxApprovals     int   // approvals kept (1,000): resolved ones are evicted oldest first; when every kept one is pending, a new request is refused
	EventRing        int   // host events kept (1,000)
	EventRingBytes   int64 // bytes of host events kept, besides their count (DefaultEventRingBytes)
	// MaxPendingPerConn is how many pending approvals one connection (or
	// one agent, over all its connections) may have caused at once (64):
	// those it raised and those the gate raised for its proposals, so that a
	// single client cannot fill the desk for everyone.
	MaxPendingPerConn int
}

func (o Options) withDefaults() Options {
	if o.MaxAgentsPerConn <= 0 {
		o.MaxAgentsPerConn = 64
	}
	if o.MaxApprovals <= 0 {
		o.MaxApprovals = 1000
	}
	if o.EventRing <= 0 {
		o.EventRing = 1000
	}
	if o.EventRingBytes <= 0 {
		o.EventRingBytes = DefaultEventRingBytes
	}
	if o.MaxPendingPerConn <= 0 {
		o.MaxPendingPerConn = 64
	}
	return o
}

// Snapshot is what host.subscribe returns besides identity.
type Snapshot struct {
	Agents    []Agent    `json:"agents"`    // sorted by id, never null
	Approvals []Approval `json:"approvals"` // oldest first, never null
	Events    []Event    `json:"events"`    // oldest first, the whole ring, never null
}

type subscriber struct {
	approver bool
	send     func(Event)
}

// Registry holds the host state of one daemon; the zero value is not usable, call New.
type Registry struct {
	opts Options

	// deliver is taken before mu is released by every mutation and held
	// while that mutation's events go out, so every subscriber sees events
	// in the order mu produced them while mu itself is free for readers.
	deliver sync.Mutex

	mu        sync.Mutex
	agents    map[string]Agent
	approvals []*Approval // oldest first
	byID      map[string]*Approval
	gates     map[string]Operation // by approval id: what the gate's approvals decide
	ring      ring
	subs      map[string]subscriber
	outbox    []Event // recorded under mu, sent by unlock

	cl    *hostCluster    // nil: one daemon (Join)
	peers map[string]peer // the other daemons heard from, by member id
}

// New returns an empty registry bounded by opts.
func New(opts Options) *Registry {
	opts = opts.withDefaults()
	return &Registry{
		opts:   opts,
		agents: make(map[string]Agent),
		byID:   make(map[string]*Approval),
		gates:  make(map[string]Operation),
		ring:   newRing(opts.EventRing, opts.EventRingBytes),
		subs:   make(map[string]subscriber),
	}
}

// unlock releases mu and delivers the events recorded while it was held.
// Every method that takes mu releases it through unlock, so the order in
// which methods held mu is the order in which deliveries happen, and once a
// method returns no delivery it ordered is still in flight.
func (r *Registry) unlock() {
	out := r.outbox
	r.outbox = nil
	var sends []func(Event)
	if len(out) > 0 {
		sends = make([]func(Event), 0, len(r.subs))
		for _, s := range r.subs {
			sends = append(sends, s.send)
		}
	}
	r.deliver.Lock()
	r.mu.Unlock()
	defer r.deliver.Unlock()
	for _, ev := range out {
		for _, send := range sends {
			send(ev)
		}
	}
}

// Subscribe registers conn for events and returns the snapshot taken
// atomically with the registration: every event is either in the snapshot
// or handed to send, never both, never neither. send must not block (the rpc
// layer pushes into a bounded fanout queue) and must not call back into the
// Registry; it may be called before Subscribe returns. approver says whether
// this subscriber may approve; a second Subscribe by the same conn replaces
// the first, whose send is not called again once Subscribe returns.
func (r *Registry) Subscribe(conn string, approver bool, send func(Event)) Snapshot {
	r.mu.Lock()
	defer r.unlock()
	defer r.approversChangeLocked()()
	r.subs[conn] = subscriber{approver: approver, send: send}
	return Snapshot{
		Agents:    r.agentsLocked(),
		Approvals: r.approvalsLocked(),
		Events:    r.ring.last(r.ring.len()),
	}
}

// Unsubscribe stops events to conn and reports whether it was subscribed;
// once it returns, conn's send is not called again.
func (r *Registry) Unsubscribe(conn string) bool {
	r.mu.Lock()
	defer r.unlock()
	defer r.approversChangeLocked()()
	_, ok := r.subs[conn]
	delete(r.subs, conn)
	return ok
}

// HasApprovers reports whether some subscriber may approve, here or on
// another daemon heard from recently (Join), so a gate knows whether
// parking an action for a person can ever end in a decision.
func (r *Registry) HasApprovers() bool {
	r.mu.Lock()
	defer r.unlock()
	return r.approversLocked() > 0 || r.remoteApproversLocked()
}

// approversLocked is how many subscribers here may approve.
func (r *Registry) approversLocked() int {
	n := 0
	for _, s := range r.subs {
		if s.approver {
			n++
		}
	}
	return n
}

// approversChangeLocked notes the approvers here before a change; the
// function it returns, called after it under the same lock, has them
// announced to the other daemons when their number changed.
func (r *Registry) approversChangeLocked() func() {
	before := r.approversLocked()
	return func() {
		if r.cl != nil && r.approversLocked() != before {
			r.cl.kickAnnounce()
		}
	}
}

// DropConnection removes conn's subscription and every agent it registered,
// emitting agent.unregistered for each, and expires the approvals it raised
// and left pending, since no other connection may resolve them (called when
// a connection closes).
func (r *Registry) DropConnection(conn string) {
	r.mu.Lock()
	defer r.unlock()
	defer r.approversChangeLocked()()
	delete(r.subs, conn)
	for _, a := range r.agentsLocked() {
		if a.SessionID == conn {
			r.removeAgentLocked(a)
		}
	}
	for _, ap := range slices.Clone(r.approvals) {
		if ap.ClientID == conn && ap.Status == ApprovalPending {
			r.expireLocked(ap, "the session that raised it closed")
		}
	}
}

// now is the registry's clock: UTC, so every timestamp on the wire reads alike.
func now() time.Time { return time.Now().UTC() }
