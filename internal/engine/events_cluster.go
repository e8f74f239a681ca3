package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// The event log of a cluster. Every daemon appends its events to one
// durable log (store.Events), each event carrying the daemon's node id and
// its place in that daemon's own hash chain, which continues across the
// daemon's restarts. The reads that cover the whole cluster (CountAll,
// QueryAll, SummaryAll, CostByAgentAll, AlertsAll, VerifyAll) read the
// durable log; alone, they read the in-memory log as Count, Query, Summary,
// CostByAgent, Alerts and VerifyChain do. Follow delivers the other daemons'
// events to this daemon's subscribers; its own are delivered as they are
// appended.

// ClusterLog is the durable event log of a cluster, with what a daemon
// needs to continue its chain and to start following the others.
type ClusterLog = store.Events

// Bounds of the cluster's reads.
const (
	// followPage is how many records Follow reads at once.
	followPage = 500
	// verifyPage is how many records VerifyAll reads at once.
	verifyPage = 1000
	// defaultFollowEvery is how often Follow polls without a wake.
	defaultFollowEvery = time.Second
	// summaryWindow is how many of the newest records metrics.summary
	// decodes and folds in a cluster: decoding makes a fold about 45 times
	// the cost of folding the same events in memory, and a dashboard reads
	// the summary every 5 s.
	summaryWindow = 10_000
)

// JoinCluster makes l this daemon's part of the cluster's log: from now on
// every event carries node, is hash-chained, and is handed to cl. The chain
// continues from node's newest durable record, so a restarted daemon keeps
// one chain. Call it once, before anything is appended.
func (l *EventLog) JoinCluster(ctx context.Context, node string, cl ClusterLog) error {
	if node == "" {
		return errors.New("join the cluster's event log: the node id is empty; every daemon of a cluster needs its own id")
	}
	seq, hash, err := cl.LastOf(ctx, node)
	if err != nil {
		return fmt.Errorf("read where node %q's event chain stands in the cluster's log: %w", node, err)
	}
	head, err := cl.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the head of the cluster's event log: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cluster != nil {
		return fmt.Errorf("join the cluster's event log: already joined as node %q", l.node)
	}
	if l.seq != 0 {
		return fmt.Errorf("join the cluster's event log: %d events were appended before; join before anything is appended", l.seq)
	}
	l.node, l.cluster, l.followFrom = node, cl, head
	_, l.raw = cl.(EventSyncer)
	l.chained, l.seq, l.lastHash = true, seq, hash
	return nil
}

// EventSyncer is a durable log that can say when what was appended is on
// disk (the file store's): Sync returns once every record appended before
// the call is durable. Its Append copies the record's body: the log lends
// the body from a pool and reuses it once Append returns.
type EventSyncer interface {
	Sync(ctx context.Context) error
}

// EventFlusher is a durable log that keeps the data in the shape it reads
// back (jsonShaped, so not an EventSyncer) and can say when what was
// appended is durable (the PostgreSQL store's): Flush returns once every
// record appended before the call is flushed, or kept where it will be.
type EventFlusher interface {
	Flush(ctx context.Context) error
}

// Durable returns once every event appended before the call is in the
// durable log, when the log can say so (EventSyncer, EventFlusher); at once
// otherwise. The reply to a proposal waits for it, so that a crash loses no
// event of an answered proposal.
func (l *EventLog) Durable(ctx context.Context) error {
	var err error
	switch s := l.clusterLog().(type) {
	case EventSyncer:
		err = s.Sync(ctx)
	case EventFlusher:
		err = s.Flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("write the events to the durable log: %w", err)
	}
	return nil
}

// Announce hands e to the subscribers whose filter it matches, in turn
// with the appended events, without appending it: a notice about the log
// itself (audit.head, a signed head of the chain).
func (l *EventLog) Announce(e Event) { l.deliverRemote(e) }

// Node is this daemon's id in its cluster, "" when it is alone.
func (l *EventLog) Node() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.node
}

// clusterLog is the durable log, nil when the daemon is alone.
func (l *EventLog) clusterLog() ClusterLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cluster
}

// jsonShaped is data as it reads back from its JSON: numbers as their text
// (json.Number), invalid UTF-8 replaced, structs as maps. A daemon of a
// cluster hashes and keeps this form, so the hash recomputed from the
// stored JSON is the same. Data that does not encode (a NaN) is replaced by
// the encoding error.
func jsonShaped(data map[string]any) map[string]any {
	if data == nil {
		return nil
	}
	b, err := json.Marshal(data)
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var out map[string]any
		if err = d.Decode(&out); err == nil {
			return out
		}
	}
	return map[string]any{"unencodable_data": err.Error()}
}

// durableRecord is e as the durable log keeps it; e's data is jsonShaped.
func durableRecord(e *Event) store.EventRecord {
	body, err := json.Marshal(e)
	if err != nil { // not for jsonShaped data; kept, so that nothing is lost
		body, _ = json.Marshal(map[string]string{"unencodable_event": err.Error()})
	}
	return store.EventRecord{Node: e.Node, Seq: e.Seq, At: e.Timestamp, Kind: string(e.Kind),
		ProposalID: e.ProposalID, Hash: e.Hash, PrevHash: e.PrevHash, Body: body}
}

// decodeRecord is the event a durable record holds. Numbers stay as their
// text (json.Number), so the event encodes, and hashes, as it was recorded.
func decodeRecord(r *store.EventRecord) (Event, error) {
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	var e Event
	if err := d.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("event %d of node %q in the cluster's log does not decode: %w", r.Seq, r.Node, err)
	}
	return e, nil
}

// FollowOptions say how Follow learns of the other daemons' events.
type FollowOptions struct {
	Bus     store.Bus     // wakes Follow on store.TopicEvents; nil: it polls only
	Every   time.Duration // poll interval without a wake (1 s)
	OnError func(error)   // told of a read that failed (retried at the next wake or poll) or a record that does not decode (skipped); may be nil
}

// Follow delivers the other daemons' events to this daemon's subscribers,
// in the order of the cluster's log, until ctx ends. It starts after the
// newest record of the log when JoinCluster ran, reads on every Bus
// notification of another daemon's batch and every o.Every, and returns at
// once for a daemon that is alone. The caller owns the goroutine: run it
// once, and end it with ctx.
func (l *EventLog) Follow(ctx context.Context, o FollowOptions) {
	l.mu.Lock()
	cl, node, cursor := l.cluster, l.node, l.followFrom
	l.mu.Unlock()
	if cl == nil {
		return
	}
	if o.Every <= 0 {
		o.Every = defaultFollowEvery
	}
	report := func(err error) {
		if o.OnError != nil {
			o.OnError(err)
		}
	}
	wake := make(chan struct{}, 1)
	if o.Bus != nil {
		cancel := o.Bus.Subscribe(store.TopicEvents, func(payload []byte) {
			if string(payload) == node {
				return // this daemon's own batch: its events were delivered already
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		defer cancel()
	}
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for {
		for ctx.Err() == nil {
			recs, next, err := cl.Since(ctx, cursor, followPage, node)
			if err != nil {
				if ctx.Err() == nil {
					report(fmt.Errorf("read the other daemons' events from the cluster's log: %w", err))
				}
				break
			}
			for i := range recs {
				e, err := decodeRecord(&recs[i])
				if err != nil {
					report(err)
					continue
				}
				l.deliverRemote(e)
			}
			cursor = next
			if len(recs) < followPage {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
	}
}

// deliverRemote hands another daemon's event to the subscribers whose
// filter it matches, in turn with this daemon's own appends.
func (l *EventLog) deliverRemote(e Event) {
	l.mu.Lock()
	subs := l.subs
	if len(subs) == 0 {
		l.mu.Unlock()
		return
	}
	l.tickets++
	ticket := l.tickets
	l.mu.Unlock()
	l.deliver(ticket, subs, e)
}

// queryWindow bounds how many durable records one events.query decodes: as
// many as one daemon keeps in memory.
func (l *EventLog) queryWindow() int { return l.capacity }

// summaryWindow bounds how many durable records one summary folds.
func (l *EventLog) summaryWindow() int { return min(l.capacity, summaryWindow) }

// CountAll is the number of events: in a cluster, of the durable log;
// alone, the retained ones (Count).
func (l *EventLog) CountAll(ctx context.Context) (int, error) {
	cl := l.clusterLog()
	if cl == nil {
		return l.Count(), nil
	}
	n, err := cl.Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count the cluster's events: %w", err)
	}
	return n, nil
}

// QueryAll returns the matching events, newest first: in a cluster, of the
// durable log; alone, as Query. A cluster query decodes at most the newest
// window of records the store can select (by kinds, proposal, node and
// times); truncated says that older records were not looked at, so older
// matches may exist (narrow the query by those fields, or by time).
func (l *EventLog) QueryAll(ctx context.Context, q EventQuery) (events []Event, truncated bool, err error) {
	cl := l.clusterLog()
	if cl == nil {
		return l.Query(q), false, nil
	}
	f := store.EventFilter{ProposalID: q.ProposalID, Node: q.Node}
	for _, k := range q.Kinds {
		f.Kinds = append(f.Kinds, string(k))
	}
	if q.Since != nil {
		f.Since = *q.Since
	}
	if q.Until != nil {
		f.Until = *q.Until
	}
	window := l.queryWindow()
	storeFilters := q.ActionID == "" && len(q.DataMatches) == 0 && q.AfterCursor == 0
	if storeFilters && q.Limit > 0 && q.Limit < window {
		window = q.Limit
	}
	f.Limit = window + 1 // one more says whether older records exist
	recs, err := cl.Query(ctx, f)
	if err != nil {
		return nil, false, fmt.Errorf("query the cluster's events: %w", err)
	}
	if len(recs) > window {
		recs, truncated = recs[len(recs)-window:], true
	}
	events = []Event{}
	for i := len(recs) - 1; i >= 0; i-- {
		e, err := decodeRecord(&recs[i])
		if err != nil {
			continue // events.chain.verify reports it
		}
		if !eventMatches(&q, &e) || (q.AfterCursor > 0 && e.Seq <= q.AfterCursor) {
			continue
		}
		events = append(events, e)
		if q.Limit > 0 && len(events) >= q.Limit {
			break
		}
	}
	truncated = truncated && (q.Limit == 0 || len(events) < q.Limit)
	return events, truncated, nil
}

// window reads and decodes the newest summaryWindow records of the durable
// log, oldest first, with the count of all of them.
func (l *EventLog) window(ctx context.Context, cl ClusterLog) (events []Event, total int, err error) {
	total, err = cl.Count(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("count the cluster's events: %w", err)
	}
	recs, err := cl.Query(ctx, store.EventFilter{Limit: l.summaryWindow()})
	if err != nil {
		return nil, 0, fmt.Errorf("read the cluster's newest events: %w", err)
	}
	events = make([]Event, 0, len(recs))
	for i := range recs {
		if e, err := decodeRecord(&recs[i]); err == nil {
			events = append(events, e)
		}
	}
	return events, max(total, len(events)), nil
}

// SummaryAll is metrics.summary: in a cluster, over the newest window of
// the durable log (SummarizedEvents says how many; TotalEvents counts the
// whole log, and the cumulative cost is the window's); alone, Summary.
func (l *EventLog) SummaryAll(ctx context.Context) (MetricsSummary, error) {
	cl := l.clusterLog()
	if cl == nil {
		return l.Summary(), nil
	}
	events, total, err := l.window(ctx, cl)
	if err != nil {
		return MetricsSummary{}, err
	}
	s := summarize(eventSlice(events))
	n := len(events)
	s.TotalEvents, s.SummarizedEvents, s.CumulativeCostUSD = total, &n, s.CostUSD
	return s, nil
}

// CostByAgentAll is events.cost_by_agent: in a cluster, over the same
// window as SummaryAll; alone, CostByAgent.
func (l *EventLog) CostByAgentAll(ctx context.Context) ([]AgentCost, error) {
	if l.clusterLog() == nil {
		return l.CostByAgent(), nil
	}
	s, err := l.SummaryAll(ctx)
	if err != nil {
		return nil, err
	}
	return s.CostByAgent, nil
}

// AlertsAll is metrics.alerts: th judged against SummaryAll.
func (l *EventLog) AlertsAll(ctx context.Context, th AlertThresholds) (MetricsSummary, []Alert, error) {
	if l.clusterLog() == nil {
		s, alerts := l.Alerts(th)
		return s, alerts, nil
	}
	s, err := l.SummaryAll(ctx)
	if err != nil {
		return MetricsSummary{}, nil, err
	}
	return s, judge(&s, th), nil
}

// VerifyAll is events.chain.verify. In a cluster it verifies every daemon's
// chain in the durable log, reading it in pages (memory grows with the
// number of daemons, not of records), by recomputing each record's hash from
// its stored JSON: a daemon's chain breaks at its first record whose body
// does not hash to its hash, whose columns disagree with its body, or that
// does not link to the record before it. Alone, VerifyChain: Verified or
// TamperedAt, and no Nodes.
func (l *EventLog) VerifyAll(ctx context.Context) (protocol.ChainVerifyResult, error) {
	cl := l.clusterLog()
	if cl == nil {
		verified, tampered := l.VerifyChain()
		if tampered >= 0 {
			return protocol.ChainVerifyResult{TamperedAt: &tampered}, nil
		}
		return protocol.ChainVerifyResult{Verified: &verified}, nil
	}
	l.mu.Lock()
	raw := l.raw
	l.mu.Unlock()
	return VerifyChains(ctx, func(ctx context.Context, cursor int64, limit int) ([]store.EventRecord, int64, error) {
		return cl.Since(ctx, cursor, limit, "")
	}, raw)
}

// ReadSince reads a shared log's records after cursor, oldest first, up to
// limit, and the cursor to read on from (store.Events.Since of every
// daemon).
type ReadSince func(ctx context.Context, cursor int64, limit int) ([]store.EventRecord, int64, error)

// VerifyChains verifies every daemon's chain of a shared log read through
// read, in pages (memory grows with the number of daemons, not of
// records), by recomputing each record's hash from its stored JSON (over
// the data as kept when raw, the file store's way): a daemon's chain
// breaks at its first record whose body does not hash to its hash, whose
// columns disagree with its body, or that does not link to the record
// before it. events.chain.verify in a cluster, and car-server audit verify
// --store.
func VerifyChains(ctx context.Context, read ReadSince, raw bool) (protocol.ChainVerifyResult, error) {
	type state struct {
		protocol.NodeChain
		prev string
	}
	nodes := map[string]*state{}
	var total int
	var tamperedAt *int
	var cursor int64
	index := 0
	for {
		recs, next, err := read(ctx, cursor, verifyPage)
		if err != nil {
			return protocol.ChainVerifyResult{}, fmt.Errorf("read the cluster's events to verify their chains: %w", err)
		}
		for i := range recs {
			r := &recs[i]
			st := nodes[r.Node]
			if st == nil {
				st = &state{NodeChain: protocol.NodeChain{Node: r.Node}}
				nodes[r.Node] = st
			}
			if st.Tampered == nil {
				if recordVerifies(r, raw, st.Verified > 0, st.prev) {
					st.Verified++
					st.prev = r.Hash
					total++
				} else {
					seq := r.Seq
					st.Tampered = &seq
					if tamperedAt == nil {
						at := index
						tamperedAt = &at
					}
				}
			}
			index++
		}
		if len(recs) < verifyPage {
			break
		}
		cursor = next
	}
	rep := protocol.ChainVerifyResult{Verified: &total, TamperedAt: tamperedAt, Nodes: make([]protocol.NodeChain, 0, len(nodes))}
	for _, st := range nodes {
		rep.Nodes = append(rep.Nodes, st.NodeChain)
	}
	sort.Slice(rep.Nodes, func(i, j int) bool { return rep.Nodes[i].Node < rep.Nodes[j].Node })
	return rep, nil
}

// recordVerifies says whether r's body hashes to its hash with the engine's
// eventHash, agrees with r's columns, and (linked) follows prev. A raw
// log's record (the file store's) is hashed over its data as kept
// (CheckRecord).
func recordVerifies(r *store.EventRecord, raw, linked bool, prev string) bool {
	if raw {
		return CheckRecord(r) == nil && (!linked || r.PrevHash == prev)
	}
	e, err := decodeRecord(r)
	if err != nil || r.Hash == "" {
		return false
	}
	if e.Node != r.Node || e.Seq != r.Seq || e.Hash != r.Hash || e.PrevHash != r.PrevHash {
		return false
	}
	if eventHash(&e) != e.Hash {
		return false
	}
	return !linked || e.PrevHash == prev
}
