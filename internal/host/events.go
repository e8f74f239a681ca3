package host

import (
	"maps"

	"github.com/google/uuid"
	"github.com/parslee-ai/car-server/protocol"
)

// Event kinds.
const (
	KindAgentRegistered    = "agent.registered"
	KindAgentUnregistered  = "agent.unregistered"
	KindAgentStatusChanged = "agent.status_changed"
	KindApprovalRequested  = "approval.requested"
	KindApprovalResolved   = "approval.resolved"
	KindNotification       = "host.notification"
)

// reservedKinds are the kinds only the registry itself may produce, so a
// dashboard can trust an approval.resolved it sees.
var reservedKinds = map[string]bool{
	KindAgentRegistered:    true,
	KindAgentUnregistered:  true,
	KindAgentStatusChanged: true,
	KindApprovalRequested:  true,
	KindApprovalResolved:   true,
}

// Event is one host.event notification, as sent and as kept in the ring.
type Event = protocol.HostEventEntry

// NotifyRequest is the params of host.notify.
type NotifyRequest = protocol.HostNotifyParams

// Events returns the newest limit events, oldest first, for host.events;
// limit <= 0 means 100.
func (r *Registry) Events(limit int) []Event {
	if limit <= 0 {
		limit = 100
	}
	r.mu.Lock()
	defer r.unlock()
	return r.ring.last(limit)
}

// Notify records a client's event and broadcasts it. A kind the registry
// itself produces (agent.*, approval.*) cannot be forged this way: it is
// recorded as host.notification with payload.requested_kind naming it.
func (r *Registry) Notify(conn string, req NotifyRequest) Event {
	kind := req.Kind
	payload := req.Payload
	switch {
	case kind == "":
		kind = KindNotification
	case reservedKinds[kind]:
		payload = maps.Clone(payload)
		if payload == nil {
			payload = map[string]any{}
		}
		payload["requested_kind"] = kind
		kind = KindNotification
	}
	r.mu.Lock()
	defer r.unlock()
	return r.emitLocked(kind, req.AgentID, req.Message, payload)
}

// emitLocked stamps an event, keeps it in the ring and queues it for the
// subscribers, here (unlock sends it) and on the other daemons (Join).
func (r *Registry) emitLocked(kind, agentID, message string, payload map[string]any) Event {
	ev := r.emitHereLocked(kind, agentID, message, payload)
	if r.cl != nil {
		r.cl.queue(hostMsg{Type: msgEvent, Node: r.cl.node, Event: &ev})
	}
	return ev
}

// emitHereLocked is emitLocked for this daemon's subscribers alone: what it
// says concerns this daemon's view (a mirrored approval it expired).
func (r *Registry) emitHereLocked(kind, agentID, message string, payload map[string]any) Event {
	if payload == nil {
		payload = map[string]any{}
	}
	ev := Event{
		ID:        "event-" + uuid.NewString(),
		Timestamp: now(),
		Kind:      kind,
		AgentID:   agentID,
		Message:   message,
		Payload:   payload,
	}
	if r.cl != nil {
		ev.Node = r.cl.node
	}
	r.ring.push(ev)
	r.outbox = append(r.outbox, ev)
	return ev
}

// ring keeps the newest events, dropping the oldest when full.
type ring struct {
	buf   []Event
	start int // index of the oldest event once buf is full
}

func newRing(capacity int) ring { return ring{buf: make([]Event, 0, capacity)} }

func (g *ring) len() int { return len(g.buf) }

func (g *ring) push(ev Event) {
	if len(g.buf) < cap(g.buf) {
		g.buf = append(g.buf, ev)
		return
	}
	g.buf[g.start] = ev
	g.start = (g.start + 1) % len(g.buf)
}

// last returns the newest n events, oldest first, never nil.
func (g *ring) last(n int) []Event {
	n = min(n, len(g.buf))
	out := make([]Event, 0, n)
	for i := len(g.buf) - n; i < len(g.buf); i++ {
		out = append(out, g.buf[(g.start+i)%len(g.buf)])
	}
	return out
}
