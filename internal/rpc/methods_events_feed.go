package rpc

import (
	"context"
	"encoding/json"
	"maps"
	"sync"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/protocol"
)

// eventSub is one events.subscribe of a connection. pushed and nodes
// belong to the event log's delivery, which calls in order one at a time;
// the rest is guarded by mu.
type eventSub struct {
	pushed uint64          // matching events handed to the feed so far
	nodes  map[string]bool // in a cluster, the daemons whose events were handed to the feed

	mu      sync.Mutex
	cancel  func() // ends the log subscription
	sentN   uint64 // ordinal (1, 2, 3…) of the last event delivered
	sentSeq uint64 // its Seq; the subscribe cursor until one is delivered
	// cursors is, in a cluster, per daemon, the Seq of its last event
	// delivered, or the Seq before its first event handed to the feed: where
	// a backfill of that daemon's chain starts after a gap.
	cursors map[string]uint64
}

// feedEvent is one queued events.event: the event, the subscription it was
// matched for and its ordinal there.
type feedEvent struct {
	sub   *eventSub
	n     uint64
	event engine.Event
}

// eventNotice is the params of events.event.
type eventNotice = protocol.EventNotice

const eventsSubscribeShape = "{kinds?: string[], proposal_id?: string}"

// eventsSubscribe starts (or, when one is running, replaces) this
// connection's events.event feed.
func (c *conn) eventsSubscribe(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.EventsSubscribeParams
	if err := optionalParams(params, &p, eventsSubscribeShape); err != nil {
		return nil, err
	}
	filter := protocol.EventsQueryParams{Kinds: p.Kinds, ProposalID: p.ProposalID}
	feed := c.eventFeed()
	sub := &eventSub{}
	// sub is current before the log can call it, and its fields are set
	// before the feed reads them (under sub.mu).
	sub.mu.Lock()
	c.mu.Lock()
	old := c.eventSub
	c.eventSub = sub
	c.mu.Unlock()
	cursor, cancel := c.srv.rt.Events.Subscribe(filter, func(e engine.Event) {
		sub.pushed++
		if e.Node != "" && !sub.nodes[e.Node] {
			sub.firstOf(e)
		}
		feed.Push(feedEvent{sub: sub, n: sub.pushed, event: e})
	})
	sub.cancel, sub.sentSeq = cancel, cursor
	sub.mu.Unlock()
	old.end()
	return protocol.EventsSubscribeResult{Subscribed: true, Cursor: cursor}, nil
}

func (c *conn) eventsUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	return protocol.SubscriptionResult{WasSubscribed: c.endEventSub()}, nil
}

// endEventSub ends this connection's events.subscribe, if it has one;
// events already queued for it are not sent.
func (c *conn) endEventSub() (was bool) {
	c.mu.Lock()
	old := c.eventSub
	c.eventSub = nil
	c.mu.Unlock()
	old.end()
	return old != nil
}

// firstOf notes the first event of a daemon of the cluster handed to s's
// feed: a gap before it is backfilled after the Seq before it.
func (s *eventSub) firstOf(e engine.Event) {
	if s.nodes == nil {
		s.nodes = map[string]bool{}
	}
	s.nodes[e.Node] = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursors == nil {
		s.cursors = map[string]uint64{}
	}
	if _, ok := s.cursors[e.Node]; !ok {
		s.cursors[e.Node] = e.Seq - 1
	}
}

// end stops the log from feeding s; a nil s has nothing to end.
func (s *eventSub) end() {
	if s == nil {
		return
	}
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	cancel()
}

// eventFeed is this connection's events.event queue, made on first use; run
// closes it when the connection ends.
func (c *conn) eventFeed() *fanout.Queue[feedEvent] {
	return feed(c, &c.events, c.deliverEvent)
}

// deliverEvent writes one queued event, saying how many matching events
// were dropped before it. An event of a subscription that has ended since it
// was queued is let go.
func (c *conn) deliverEvent(ctx context.Context, it fanout.Item[feedEvent]) error {
	fe := it.Value
	c.mu.Lock()
	current := c.eventSub == fe.sub
	c.mu.Unlock()
	if !current {
		return nil
	}
	n := eventNotice{Cursor: fe.event.Seq, Event: fe.event}
	fe.sub.mu.Lock()
	if gap := fe.n - fe.sub.sentN - 1; gap > 0 {
		n.Missed = &protocol.EventsMissed{Count: gap, AfterCursor: fe.sub.sentSeq, Cursors: maps.Clone(fe.sub.cursors)}
	}
	fe.sub.mu.Unlock()
	if err := c.notify(ctx, protocol.MethodEventsEvent, n); err != nil {
		return err
	}
	fe.sub.mu.Lock()
	fe.sub.sentN, fe.sub.sentSeq = fe.n, fe.event.Seq
	if fe.event.Node != "" {
		fe.sub.cursors[fe.event.Node] = fe.event.Seq
	}
	fe.sub.mu.Unlock()
	return nil
}
