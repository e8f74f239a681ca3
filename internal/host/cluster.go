package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Host events across daemons. Several daemons sharing one store show one
// host surface: a dashboard connected to daemon A sees what happens, and
// what waits for a person, on daemon B.
//
//   - Every event this registry emits is published on the bus (Topic), in
//     the order it was emitted; each other daemon keeps it in its ring and
//     hands it to its own subscribers, marked with the daemon it happened on
//     (node). An event too large for one notification goes with its
//     payload trimmed (an approval keeps its gate fields, its preview goes;
//     any other payload is replaced by a note).
//   - The approvals raised on B are mirrored on A from those events:
//     host.approvals and host.subscribe's snapshot list them. A mirrored
//     approval is resolved on A as a local one is; for one the permission
//     gate raised, A's engine first records the decision on the shared
//     approval ledger (for its Operation, which A read back from the
//     context once, when the approval arrived: mirrorOperation), and that
//     record is what releases B's action and makes B's engine resolve
//     B's row (and emit approval.resolved, which comes back to A).
//     Resolving the mirror itself emits nothing on A. A client-raised
//     approval stays the raising connection's to resolve. Agents are not
//     mirrored: they live with their connection's daemon.
//   - Approvers are announced, not recorded: each daemon publishes how many
//     approver subscribers it has whenever that changes and every Announce
//     as a heartbeat, and says hello when it joins so that the others
//     announce at once and re-send their pending approvals. HasApprovers
//     counts the approvers of every daemon heard from within three
//     announcements. A daemon not heard from for that long is gone: its
//     mirrored pending approvals expire here.
//   - A lost notification costs little and never lets anything through:
//     the ledger, not the mirror, decides an action; an announcement that
//     an approver appeared or left is repeated within Announce.

// Topic is the bus topic of host events across daemons.
const Topic = "car_host"

// Bus carries notifications between the daemons that share a store; the
// store's Bus satisfies it.
type Bus interface {
	Publish(ctx context.Context, topic string, payload []byte) error
	Subscribe(topic string, fn func(payload []byte)) (cancel func())
}

// Cluster connects a Registry to the other daemons sharing its store.
type Cluster struct {
	Node     string        // this daemon's member id
	Bus      Bus           // notifications between the daemons
	Announce time.Duration // how often the approvers are announced (5 s)
}

// Bounds of host events across daemons.
const (
	maxBusPayload = 7000 // bytes of one notification (PostgreSQL's NOTIFY refuses 8,000)
	maxOutbound   = 1024 // notifications queued for the bus before the oldest is dropped
	busTimeout    = 5 * time.Second
	peerLife      = 3 // announcements missed before a daemon counts as gone
)

// Message types on Topic.
const (
	msgEvent     = "event"     // an event emitted on node
	msgApprovers = "approvers" // node has approvers approver subscribers
	msgHello     = "hello"     // node joined: announce, and re-send your pending approvals
	msgSync      = "sync"      // one of node's pending approvals, re-sent for a daemon that joined
)

type hostMsg struct {
	Type      string    `json:"type"`
	Node      string    `json:"node"`
	Event     *Event    `json:"event,omitempty"`
	Approval  *Approval `json:"approval,omitempty"`
	Approvers int       `json:"approvers,omitempty"`
}

// peer is what this daemon knows of another one.
type peer struct {
	approvers int
	seen      time.Time
}

type hostCluster struct {
	node  string
	bus   Bus
	every time.Duration

	ctx    context.Context // ends at leave
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
	wake   chan struct{} // one pending signal: out has notifications
	kick   chan struct{} // one pending signal: announce now

	mu      sync.Mutex
	out     [][]byte // encoded notifications, oldest first
	dropped uint64   // notifications lost: the queue was full, or one did not fit
}

// Join connects the registry to the other daemons sharing its store, until
// leave, which stops and waits for it. Call it once, before serving.
func (r *Registry) Join(c Cluster) (leave func()) {
	if c.Announce <= 0 {
		c.Announce = 5 * time.Second
	}
	cl := &hostCluster{node: c.Node, bus: c.Bus, every: c.Announce, done: make(chan struct{}), wake: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	r.mu.Lock()
	r.cl = cl
	r.peers = map[string]peer{}
	r.unlock()
	unsubscribe := c.Bus.Subscribe(Topic, r.receive)
	go r.run(cl)
	return sync.OnceFunc(func() {
		cl.cancel()
		<-cl.done
		unsubscribe()
	})
}

// Dropped is how many notifications to the other daemons were lost because
// the bus fell behind or one could not be made to fit.
func (r *Registry) Dropped() uint64 {
	r.mu.Lock()
	cl := r.cl
	r.unlock()
	if cl == nil {
		return 0
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.dropped
}

// run publishes what the registry queued, announces the approvers, and
// forgets the daemons that stopped answering.
func (r *Registry) run(cl *hostCluster) {
	defer close(cl.done)
	cl.publish(cl.ctx, hostMsg{Type: msgHello, Node: cl.node})
	r.announce(cl.ctx, cl)
	tick := time.NewTicker(cl.every)
	defer tick.Stop()
	for {
		select {
		case <-cl.ctx.Done():
			// What is queued still goes, and the others learn that the
			// approvers here are gone, within one bound.
			ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
			cl.flush(ctx)
			cl.publish(ctx, hostMsg{Type: msgApprovers, Node: cl.node})
			cancel()
			return
		case <-cl.wake:
			cl.flush(cl.ctx)
		case <-cl.kick:
			r.announce(cl.ctx, cl)
		case <-tick.C:
			r.announce(cl.ctx, cl)
			r.sweep(now())
		}
	}
}

func (r *Registry) announce(ctx context.Context, cl *hostCluster) {
	r.mu.Lock()
	n := r.approversLocked()
	r.unlock()
	cl.publish(ctx, hostMsg{Type: msgApprovers, Node: cl.node, Approvers: n})
}

// publish sends one notification now; a failure loses it (see the package
// comment on what a lost notification costs).
func (cl *hostCluster) publish(ctx context.Context, m hostMsg) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	if cl.bus.Publish(ctx, Topic, b) != nil {
		cl.mu.Lock()
		cl.dropped++
		cl.mu.Unlock()
	}
}

// flush publishes the queued notifications in order.
func (cl *hostCluster) flush(ctx context.Context) {
	for {
		cl.mu.Lock()
		if len(cl.out) == 0 {
			cl.mu.Unlock()
			return
		}
		b := cl.out[0]
		cl.out[0] = nil
		cl.out = cl.out[1:]
		cl.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, busTimeout)
		err := cl.bus.Publish(pctx, Topic, b)
		cancel()
		if err != nil {
			cl.mu.Lock()
			cl.dropped++
			cl.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// queue hands m to run without blocking; the oldest queued notification
// goes when the queue is full.
func (cl *hostCluster) queue(m hostMsg) {
	b, ok := fit(m)
	cl.mu.Lock()
	switch {
	case !ok:
		cl.dropped++
	case len(cl.out) == maxOutbound:
		cl.out = append(cl.out[1:], b)
		cl.dropped++
	default:
		cl.out = append(cl.out, b)
	}
	cl.mu.Unlock()
	select {
	case cl.wake <- struct{}{}:
	default:
	}
}

func (cl *hostCluster) kickAnnounce() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

// fit encodes m within one notification, trimming what a dashboard can
// do without; false when even that does not fit.
func fit(m hostMsg) ([]byte, bool) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	if len(b) <= maxBusPayload {
		return b, true
	}
	if m.Event != nil {
		ev := *m.Event
		ev.Message = clip(ev.Message, 500)
		if ap, ok := ev.Payload["approval"].(Approval); ok {
			ev.Payload = map[string]any{"approval": slim(ap, m.Node)}
		} else {
			ev.Payload = map[string]any{"omitted": fmt.Sprintf("the payload (%d bytes) is too large to send to other daemons; host.events on daemon %s has it", len(b), m.Node)}
		}
		m.Event = &ev
	}
	if m.Approval != nil {
		ap := slim(*m.Approval, m.Node)
		m.Approval = &ap
	}
	if b, err = json.Marshal(m); err != nil || len(b) > maxBusPayload {
		return nil, false
	}
	return b, true
}

// gateKeys are the context fields an approval keeps when it is trimmed:
// those that say what it is about, and the operation the other daemons
// decide it by on the ledger.
var gateKeys = []string{ctxSource, "proposal_id", "action_id", "connection", "tool", ctxFingerprint, ctxRequiredTier, "granted_tier", "reversibility"}

// slim trims an approval for one notification: short text, and only the
// context's gate fields.
func slim(ap Approval, node string) Approval {
	ap.Title = clip(ap.Title, 500)
	ap.Description = clip(ap.Description, 500)
	ap.Notes = clip(ap.Notes, 500)
	ctx := map[string]any{"omitted": fmt.Sprintf("the rest of the context is too large to send to other daemons; host.approvals on daemon %s has it", node)}
	for _, k := range gateKeys {
		if s, ok := ap.Context[k].(string); ok {
			ctx[k] = clip(s, 200)
		}
	}
	ap.Context = ctx
	return ap
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// receive handles one notification of another daemon.
func (r *Registry) receive(payload []byte) {
	var m hostMsg
	if json.Unmarshal(payload, &m) != nil {
		return
	}
	r.mu.Lock()
	defer r.unlock()
	cl := r.cl
	if cl == nil || m.Node == "" || m.Node == cl.node {
		return
	}
	p := r.peers[m.Node]
	p.seen = now()
	switch m.Type {
	case msgApprovers:
		p.approvers = m.Approvers
	case msgHello:
		cl.kickAnnounce()
		for _, ap := range r.approvals {
			if ap.Status == ApprovalPending && !r.mirrorLocked(ap) {
				cl.queue(hostMsg{Type: msgSync, Node: cl.node, Approval: ap})
			}
		}
	case msgSync:
		if m.Approval != nil {
			r.keepMirrorLocked(m.Node, *m.Approval)
		}
	case msgEvent:
		if m.Event != nil {
			r.arriveLocked(m.Node, *m.Event)
		}
	}
	r.peers[m.Node] = p
}

// arriveLocked keeps another daemon's event and hands it to the
// subscribers here; an approval event updates the mirror first.
func (r *Registry) arriveLocked(node string, ev Event) {
	ev.Node = node
	if ev.Payload == nil {
		ev.Payload = map[string]any{}
	}
	if ev.Kind == KindApprovalRequested || ev.Kind == KindApprovalResolved || ev.Kind == KindApprovalCounted {
		var p struct {
			Approval Approval `json:"approval"`
		}
		if b, err := json.Marshal(ev.Payload); err == nil && json.Unmarshal(b, &p) == nil && p.Approval.ID != "" {
			r.keepMirrorLocked(node, p.Approval)
		}
	}
	r.ring.push(ev)
	r.outbox = append(r.outbox, ev)
}

// mirrorLocked reports whether ap was raised on another daemon.
func (r *Registry) mirrorLocked(ap *Approval) bool {
	return r.cl != nil && ap.Node != "" && ap.Node != r.cl.node
}

// keepMirrorLocked records or updates another daemon's approval. A row of
// this daemon is never replaced; when every kept row is pending the oldest
// mirrored one makes room, and with none the new one is not kept.
func (r *Registry) keepMirrorLocked(node string, ap Approval) {
	if ap.ID == "" {
		return
	}
	ap.Node = node
	if cur, ok := r.byID[ap.ID]; ok {
		if r.mirrorLocked(cur) {
			*cur = ap
		}
		return
	}

	if len(r.approvals) >= r.opts.MaxApprovals {
		i := slices.IndexFunc(r.approvals, func(a *Approval) bool { return a.Status != ApprovalPending })
		if i < 0 {
			i = slices.IndexFunc(r.approvals, r.mirrorLocked)
		}
		if i < 0 {
			return
		}
		r.forgetLocked(i)
	}
	r.approvals = append(r.approvals, &ap)
	r.byID[ap.ID] = &ap
	if op, ok := mirrorOperation(ap); ok {
		r.gates[ap.ID] = op
	}
}

// sweep forgets the daemons not heard from for peerLife announcements and
// expires their mirrored pending approvals here.
func (r *Registry) sweep(at time.Time) {
	r.mu.Lock()
	defer r.unlock()
	if r.cl == nil {
		return
	}
	life := time.Duration(peerLife) * r.cl.every
	gone := map[string]bool{}
	for node, p := range r.peers {
		if at.Sub(p.seen) > life {
			gone[node] = true
			delete(r.peers, node)
		}
	}
	if len(gone) == 0 {
		return
	}
	for _, ap := range r.approvals {
		if ap.Status == ApprovalPending && r.mirrorLocked(ap) && gone[ap.Node] {
			r.expireHereLocked(ap, fmt.Sprintf("daemon %s, where it was raised, has not been heard from for %s", ap.Node, life))
		}
	}
}

// remoteApproversLocked reports whether another daemon heard from recently
// has an approver.
func (r *Registry) remoteApproversLocked() bool {
	if r.cl == nil {
		return false
	}
	life := time.Duration(peerLife) * r.cl.every
	t := now()
	for _, p := range r.peers {
		if p.approvers > 0 && t.Sub(p.seen) <= life {
			return true
		}
	}
	return false
}
