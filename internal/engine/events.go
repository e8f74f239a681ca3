package engine

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/protocol"
)

// EventKind names what happened.
type EventKind = protocol.EventKind

// Kinds of events the engine records.
const (
	EventProposalReceived       EventKind = "proposal_received"
	EventProposalFinished       EventKind = "proposal_finished"
	EventProposalRejected       EventKind = "proposal_rejected"  // an admission gate blocked it
	EventProposalCancelled      EventKind = "proposal_cancelled" // proposal.cancel stopped it
	EventActionStarted          EventKind = "action_started"
	EventActionSucceeded        EventKind = "action_succeeded"
	EventActionFailed           EventKind = "action_failed"
	EventActionRejected         EventKind = "action_rejected"
	EventActionSkipped          EventKind = "action_skipped"
	EventActionRetried          EventKind = "action_retried"
	EventStateChanged           EventKind = "state_changed"
	EventStateRolledBack        EventKind = "state_rolled_back"
	EventToolCancelled          EventKind = "tool_cancelled"
	EventToolDispatched         EventKind = "tool_dispatched"     // a daemon tool (an MCP connector's) answered: its source, connector and latency
	EventToolStreamStarted      EventKind = "tool_stream_started" // a detached tool started: its handle
	EventToolStreamEnded        EventKind = "tool_stream_ended"   // a handle ended: succeeded, failed or cancelled
	EventPolicyViolation        EventKind = "policy_violation"
	EventIdempotencyInvalidated EventKind = "idempotency_invalidated"
	EventActionSuperseded       EventKind = "action_superseded" // an idempotent call's claim was taken over while it ran: its result was refused
	EventPermissionDecision     EventKind = "permission_decision"
	EventApprovalRecorded       EventKind = "approval_recorded"
	EventSupervisionDecision    EventKind = "supervision_decision"
	EventAgentRun               EventKind = "agent_run" // one multi.* agent run
	// EventAuditHead is a signed head of the durable log's chain, delivered
	// to subscribers (Announce) and never appended: a witness keeps them.
	EventAuditHead EventKind = "audit.head"
)

// The event log's records and queries are the wire's: an event holds names
// and counts in its data, never parameter values; a query's set fields must
// all match; a retention policy bounds the log by count and age (nil fields
// are unbounded); the summary is the operational rollup of the retained
// events.
type (
	Event           = protocol.Event
	EventQuery      = protocol.EventsQueryParams
	RetentionPolicy = protocol.RetentionPolicy
	MetricsSummary  = protocol.MetricsSummary
)

// EventLog is the daemon's bounded, in-memory audit trail, optionally
// hash-chained. In a cluster (JoinCluster) every event is also handed to the
// cluster's durable log, and the reads that cover the whole cluster (the
// methods taking a context) read that. It is safe for concurrent use.
type EventLog struct {
	mu       sync.Mutex
	events   eventRing
	seq      uint64
	capacity int
	maxBytes int64 // bytes of events held (EventBytes), besides capacity
	bytes    int64 // EventBytes of the events held
	chained  bool
	lastHash string
	hashes   hashTexts // the text of each recorded event's hash
	policy   RetentionPolicy
	now      func() time.Time

	// Set once by JoinCluster, before anything is appended.
	node       string     // this daemon's id; "" alone
	cluster    ClusterLog // nil: the log lives in memory only
	raw        bool       // cluster keeps the data as encoded (an EventSyncer, the file store's): no jsonShaped
	followFrom int64      // the cluster position Follow starts after
	// cumulativeCost is every appended event's cost, counted at append:
	// retention never lowers it.
	cumulativeCost float64

	// Subscribers, replaced (never edited) under mu, so that an Append can
	// keep the slice it saw.
	subs []*eventSubscriber

	// Delivery to subscribers runs outside mu, in Seq order: an Append that
	// has subscribers takes the next ticket under mu and delivers once every
	// earlier ticket has been served.
	tickets   uint64
	deliverMu sync.Mutex
	served    uint64
	turn      *sync.Cond // signalled under deliverMu when served moves
}

// eventSubscriber is one Subscribe: its filter and where matching events go.
type eventSubscriber struct {
	filter EventQuery
	fn     func(Event)
}

// DefaultEventBytes bounds the bytes of the events the log keeps
// (event_log_bytes), besides their count: about 1,300 bytes an event at
// the default capacity, where an event of a 256-byte action id weighs about
// 500 (BENCHMARKS.md), so the count binds first for ordinary proposals.
const DefaultEventBytes = 128 << 20

// NewEventLog returns a log that keeps at most capacity events and
// DefaultEventBytes of them (oldest go first), whatever the retention
// policy says.
func NewEventLog(capacity int) *EventLog {
	return newEventLog(capacity, DefaultEventBytes)
}

// newEventLog is NewEventLog with a byte bound of its own (<= 0: the
// default).
func newEventLog(capacity int, maxBytes int64) *EventLog {
	if capacity <= 0 {
		capacity = 100_000
	}
	if maxBytes <= 0 {
		maxBytes = DefaultEventBytes
	}
	l := &EventLog{capacity: capacity, maxBytes: maxBytes, now: time.Now, chained: true}
	l.turn = sync.NewCond(&l.deliverMu)
	return l
}

// Append records e, stamping its sequence number, time and (when chaining is
// on) its hash link, then hands it to the subscribers whose filter it
// matches.
func (l *EventLog) Append(e Event) {
	l.mu.Lock()
	subs := l.subs
	var ticket uint64
	if len(subs) > 0 {
		l.tickets++
		ticket = l.tickets
	}
	e = l.record(e)
	l.mu.Unlock()
	if ticket != 0 {
		l.deliver(ticket, subs, e)
	}
}

// deliver hands e to the matching subscribers once every earlier ticket has
// been served, then serves its own, even if a subscriber panics.
func (l *EventLog) deliver(ticket uint64, subs []*eventSubscriber, e Event) {
	l.deliverMu.Lock()
	for l.served != ticket-1 {
		l.turn.Wait()
	}
	l.deliverMu.Unlock()
	defer func() {
		l.deliverMu.Lock()
		l.served = ticket
		l.turn.Broadcast()
		l.deliverMu.Unlock()
	}()
	for _, s := range subs {
		if eventMatches(&s.filter, &e) {
			s.fn(e)
		}
	}
}

// Subscribe calls fn with every event appended from now on that matches
// filter (its Kinds, ActionID, ProposalID and DataMatches; its Limit and
// times are ignored), in Seq order, on the appending goroutine. fn must not
// block and must not append to the log: it holds up every Append behind
// it. cursor is the Seq of the last event appended before the
// subscription took effect. After cancel returns, fn may still be called by
// an Append already under way.
func (l *EventLog) Subscribe(filter EventQuery, fn func(Event)) (cursor uint64, cancel func()) {
	filter.Since, filter.Until, filter.Limit, filter.AfterCursor = nil, nil, 0, 0
	s := &eventSubscriber{filter: filter, fn: fn}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs = append(l.subs[:len(l.subs):len(l.subs)], s)
	return l.seq, func() { l.unsubscribe(s) }
}

func (l *EventLog) unsubscribe(s *eventSubscriber) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.subs {
		if x == s {
			l.subs = append(l.subs[:i:i], l.subs[i+1:]...)
			return
		}
	}
}

// record stamps e, keeps it within the bounds (and, in a cluster, hands it
// to the durable log) and returns it as kept. The caller holds mu, so the
// durable log receives each daemon's events in Seq order.
func (l *EventLog) record(e Event) Event {
	observe(&e)
	l.seq++
	e.Seq = l.seq
	e.Node = l.node
	e.Timestamp = l.now().UTC()
	if l.cluster != nil && !l.raw {
		e.Data = jsonShaped(e.Data)
	}
	if l.raw {
		// The file store's log keeps the data as encoded here, once, in a
		// lent buffer: hashed, then written into the record's body, itself
		// lent: the log copies it (EventSyncer).
		db, bb := hashBufs.Get(), hashBufs.Get()
		*db = appendData(*db, &e)
		e.PrevHash = l.lastHash
		sum := sumWith(&e, *db)
		e.Hash = l.hashes.of(&sum)
		*bb = appendBody(*bb, &e, *db)
		l.cluster.Append(recordOf(&e, *bb))
		hashBufs.Put(db)
		hashBufs.Put(bb)
	} else {
		if l.chained {
			e.PrevHash = l.lastHash
			sum := eventSum(&e)
			e.Hash = l.hashes.of(&sum)
		}
		if l.cluster != nil {
			kept := e // encoding it takes its address: a copy, so that e stays off the heap elsewhere
			l.cluster.Append(durableRecord(&kept))
		}
	}
	if l.chained {
		l.lastHash = e.Hash
	}
	l.events.push(e)
	l.bytes += EventBytes(&e)
	if _, _, _, cost, ok := spendOf(&e); ok {
		l.cumulativeCost += cost
	}
	limit := l.capacity
	if l.policy.MaxEvents != nil && *l.policy.MaxEvents < uint64(limit) {
		limit = int(*l.policy.MaxEvents)
	}
	if over := l.events.len() - limit; over > 0 {
		l.dropOldest(over)
	}
	for l.bytes > l.maxBytes && l.events.len() > 1 { // the newest stays, however large
		l.dropOldest(1)
	}
	return e
}

// dropOldest forgets the k oldest events and their bytes. A kept event is
// never changed (its hash covers it), so its bytes are counted again here
// as they were at record.
func (l *EventLog) dropOldest(k int) {
	k = min(k, l.events.len())
	for i := range k {
		l.bytes -= EventBytes(l.events.at(i))
	}
	l.events.dropOldest(k)
}

// EventBytes is what an event costs the log (and a feed queue): the record, its strings and
// its data as JSON.
func EventBytes(e *Event) int64 {
	return int64(unsafe.Sizeof(*e)) + int64(len(e.Kind)+len(e.ProposalID)+len(e.ActionID)+len(e.Connection)+len(e.Hash)+len(e.PrevHash)+len(e.Node)) +
		jsonvalue.Size(e.Data, math.MaxInt64)
}

// Bytes is what the retained events cost (EventBytes), for server.status.
func (l *EventLog) Bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// Count is the number of retained events.
func (l *EventLog) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events.len()
}

// Query returns the matching events, newest first.
func (l *EventLog) Query(q EventQuery) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for i := l.events.len() - 1; i >= 0; i-- {
		e := l.events.at(i)
		if q.AfterCursor > 0 && e.Seq <= q.AfterCursor {
			break // Seq grows along the log
		}
		if !eventMatches(&q, e) {
			continue
		}
		out = append(out, *e)
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	if out == nil {
		out = []Event{}
	}
	return out
}

// eventMatches reports whether e passes every set field of q.
func eventMatches(q *EventQuery, e *Event) bool {
	if q.Node != "" && q.Node != e.Node {
		return false
	}
	if len(q.Kinds) > 0 {
		found := false
		for _, k := range q.Kinds {
			if k == e.Kind {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if q.ActionID != "" && q.ActionID != e.ActionID {
		return false
	}
	if q.ProposalID != "" && q.ProposalID != e.ProposalID {
		return false
	}
	if q.Since != nil && e.Timestamp.Before(*q.Since) {
		return false
	}
	if q.Until != nil && !e.Timestamp.Before(*q.Until) {
		return false
	}
	for k, want := range q.DataMatches {
		got, ok := e.Data[k]
		if !ok {
			return false
		}
		s, isStr := got.(string)
		if !isStr {
			s = string(jsonvalue.Canonical(got))
		}
		if s != want {
			return false
		}
	}
	return true
}

// EnableChain is kept for events.chain.enable: the chain is always on,
// and it changes nothing.
func (l *EventLog) EnableChain() {}

// VerifyChain checks every chained event's hash and its link to the chained
// event before it. It returns how many it verified, or the index of the
// first event that does not match (tampered >= 0).
func (l *EventLog) VerifyChain() (verified int, tampered int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := ""
	seenChained := false
	for i := range l.events.len() {
		e := l.events.at(i)
		if e.Hash == "" {
			if seenChained {
				return verified, i // an unchained event inside the chain
			}
			continue
		}
		if eventHash(e) != e.Hash || (seenChained && e.PrevHash != prev) {
			return verified, i
		}
		seenChained = true
		prev = e.Hash
		verified++
	}
	return verified, -1
}

// MaxAgeSecsLimit is the largest max_age_secs accepted (about 100 years).
const MaxAgeSecsLimit = 100 * 365 * 24 * 3600

// SetRetention installs p and applies its age bound now; it returns how many
// events were removed.
func (l *EventLog) SetRetention(p RetentionPolicy) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.policy = p
	drop := 0
	if p.MaxAgeSecs != nil {
		cutoff := l.now().Add(-time.Duration(*p.MaxAgeSecs) * time.Second)
		for drop < l.events.len() && l.events.at(drop).Timestamp.Before(cutoff) {
			drop++
		}
	}
	if keep := l.events.len() - drop; p.MaxEvents != nil && uint64(keep) > *p.MaxEvents {
		drop += int(uint64(keep) - *p.MaxEvents)
	}
	l.dropOldest(drop)
	return drop
}

// Retention returns the installed policy.
func (l *EventLog) Retention() RetentionPolicy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.policy
}

// Summary folds the retained events into a MetricsSummary.
func (l *EventLog) Summary() MetricsSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := summarize(&l.events)
	s.CumulativeCostUSD = l.cumulativeCost
	return s
}

// summarize folds events into a MetricsSummary, all but the cumulative cost.
func summarize(events eventSeq) MetricsSummary {
	s := MetricsSummary{TotalEvents: events.len()}
	var latency float64
	var timed int
	var callbacks []float64
	for i := range events.len() {
		e := events.at(i)
		switch e.Kind {
		case EventProposalReceived:
			s.ProposalsReceived++
		case EventActionSucceeded:
			s.ActionsSucceeded++
		case EventActionFailed:
			s.ActionsFailed++
		case EventActionRejected:
			s.ActionsRejected++
		case EventPolicyViolation:
			s.PolicyViolations++
		case EventActionSkipped:
			s.ActionsSkipped++
		case EventToolCancelled:
			s.ToolCancellations++
		case EventProposalRejected:
			s.GateRejections++
		case EventPermissionDecision:
			s.PermissionDecisions++
		case EventApprovalRecorded:
			s.ApprovalsRecorded++
		}
		if e.Kind == EventActionSucceeded || e.Kind == EventActionFailed {
			if d, ok := jsonvalue.ToFloat(e.Data["duration_ms"]); ok {
				latency += d
				timed++
				if e.Data["type"] == string(protocol.ActionToolCall) && e.Data["cache_hit"] == nil {
					callbacks = append(callbacks, d)
				}
			}
		}
	}
	if done := s.ActionsSucceeded + s.ActionsFailed; done > 0 {
		s.SuccessRate = float64(s.ActionsSucceeded) / float64(done)
		s.ErrorRate = float64(s.ActionsFailed) / float64(done)
	}
	if timed > 0 {
		s.AvgLatencyMs = latency / float64(timed)
	}
	foldSpend(events, &s)
	s.CallbackP50Ms = percentile(callbacks, 50)
	s.CallbackP99Ms = percentile(callbacks, 99)
	return s
}

// percentile is the nearest-rank p-th percentile of xs (sorted in place), 0
// for none.
func percentile(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	rank := (p*len(xs) + 99) / 100 // ceil(p/100 × n)
	return xs[max(rank, 1)-1]
}

// observe moves the Prometheus counters an event stands for.
func observe(e *Event) {
	switch e.Kind {
	case EventProposalReceived:
		metrics.Proposals.Inc()
	case EventActionSucceeded:
		metrics.Actions.WithLabelValues("succeeded").Inc()
	case EventActionFailed:
		metrics.Actions.WithLabelValues("failed").Inc()
	case EventActionRejected:
		metrics.Actions.WithLabelValues("rejected").Inc()
	case EventActionSkipped:
		metrics.Actions.WithLabelValues("skipped").Inc()
	case EventPermissionDecision:
		n := 1.0
		if c, ok := e.Data["actions"].(int); ok {
			n = float64(c)
		}
		metrics.GateDecisions.WithLabelValues("permission", fmt.Sprint(e.Data["decision"])).Add(n)
	case EventProposalRejected:
		metrics.GateDecisions.WithLabelValues(fmt.Sprint(e.Data["gate"]), "reject").Inc()
	case EventSupervisionDecision:
		metrics.GateDecisions.WithLabelValues("supervision", fmt.Sprint(e.Data["decision"])).Inc()
	case EventPolicyViolation:
		metrics.GateDecisions.WithLabelValues("policy", "deny").Inc()
	}
}

// eventHash is SHA-256 over the event's content and its link (and, in a
// cluster, its daemon's id, so an event moved to another daemon's chain does
// not verify): over the JSON json.Marshal writes for the struct {seq, kind,
// timestamp, proposal_id, action_id, connection, data, prev_hash, node
// (when set)}, which appendHashInput writes without reflection. It is the
// one definition: a cluster's verification recomputes it from the stored
// JSON, so there Data holds JSON-shaped values only (strings, numbers,
// booleans, maps and slices of them), which encode the same once decoded;
// the file store's keeps the data as encoded (rawRecord, CheckRecord).
func eventHash(e *Event) string {
	sum := eventSum(e)
	return hexText(&sum)
}
