package host

import (
	"maps"
	"math"

	"github.com/google/uuid"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Event kinds.
const (
	KindAgentRegistered    = "agent.registered"
	KindAgentUnregistered  = "agent.unregistered"
	KindAgentStatusChanged = "agent.status_changed"
	KindApprovalRequested  = "approval.requested"
	KindApprovalResolved   = "approval.resolved"
	// KindApprovalCounted: a person's approval counted toward a quorum
	// and the approval still waits for more (its approvers say who).
	KindApprovalCounted = "approval.counted"
	KindNotification    = "host.notification"
)

// reservedKinds are the kinds only the registry itself may produce, so a
// dashboard can trust an approval.resolved it sees.
var reservedKinds = map[string]bool{
	KindAgentRegistered:    true,
	KindAgentUnregistered:  true,
	KindAgentStatusChanged: true,
	KindApprovalRequested:  true,
	KindApprovalResolved:   true,
	KindApprovalCounted:    true,
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

// ring keeps the newest events, dropping the oldest past its count or its
// bytes (EventBytes); the newest stays, however large.
type ring struct {
	evs      []Event // oldest first
	sizes    []int64 // EventBytes of evs[i]
	bytes    int64
	capacity int
	maxBytes int64
}

func newRing(capacity int, maxBytes int64) ring { return ring{capacity: capacity, maxBytes: maxBytes} }

func (g *ring) len() int { return len(g.evs) }

func (g *ring) push(ev Event) {
	n := EventBytes(&ev)
	g.evs = append(g.evs, ev)
	g.sizes = append(g.sizes, n)
	g.bytes += n
	drop := 0
	for len(g.evs)-drop > g.capacity || (g.bytes > g.maxBytes && len(g.evs)-drop > 1) {
		g.bytes -= g.sizes[drop]
		drop++
	}
	if drop > 0 {
		clear(g.evs[:drop]) // let the dropped payloads be collected
		g.evs, g.sizes = g.evs[drop:], g.sizes[drop:]
	}
}

// last returns the newest n events, oldest first, never nil.
func (g *ring) last(n int) []Event {
	n = min(n, len(g.evs))
	return append(make([]Event, 0, n), g.evs[len(g.evs)-n:]...)
}

// EventBytes is what an event costs the ring (and a feed queue): its strings and its payload
// as JSON.
func EventBytes(ev *Event) int64 {
	return int64(len(ev.ID)+len(ev.Kind)+len(ev.AgentID)+len(ev.Message)+len(ev.Node)) + jsonvalue.Size(ev.Payload, math.MaxInt64)
}

// RingStats is what the host event ring holds, for server.status.
func (r *Registry) RingStats() (events int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ring.len(), r.ring.bytes
}
