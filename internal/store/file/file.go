// Package file is the store of a single daemon: the journals under
// $CAR_HOME (the approval ledger, the idempotency cache, the messaging dedup
// ledger, one journal per agent run), the agent token and posture files,
// shared state in memory, and a bus and a member list that stay in this
// process. It is the default store; nothing in it can become
// unavailable, so its Health is always nil.
package file

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// Kind is the Store.Kind of this store.
const Kind = "file"

// Config says where the journals are and who this daemon is.
type Config struct {
	IdempotencyPath string // the idempotency journal
	ApprovalsPath   string // the approval ledger
	MessagesPath    string // delivered messaging.send idempotency keys
	RunsDir         string // agent run traces, one journal per run; "": runs are off
	AgentTokensPath string // the agents' token hashes; "": no agent can bind
	PosturesPath    string // the per-agent posture policy; "": postures are off
	Node            string // this daemon's member id
	Version         string // this daemon's version, in its member row
	Journal         []journal.Option
}

// Report is what replaying each journal found.
type Report struct {
	Idempotency, Approvals, Messages journal.Report
	Runs                             RunsReport
}

// Open replays the journals and returns the store over them. On an error
// nothing stays open.
func Open(cfg Config) (*store.Store, Report, error) {
	var rep Report
	idem, r, err := OpenIdempotency(cfg.IdempotencyPath, cfg.Journal...)
	rep.Idempotency = r
	if err != nil {
		return nil, rep, err
	}
	ledger, r, err := OpenApprovals(cfg.ApprovalsPath, cfg.Journal...)
	rep.Approvals = r
	if err != nil {
		return nil, rep, errors.Join(err, idem.Close())
	}
	messages, r, err := OpenMessages(cfg.MessagesPath, cfg.Journal...)
	rep.Messages = r
	if err != nil {
		return nil, rep, errors.Join(err, idem.Close(), ledger.Close())
	}
	var runLog *Runs
	closeRuns := func() error { return nil }
	if cfg.RunsDir != "" {
		runLog, rep.Runs, err = OpenRuns(cfg.RunsDir)
		if err != nil {
			return nil, rep, errors.Join(err, idem.Close(), ledger.Close(), messages.Close())
		}
		closeRuns = runLog.Close
	}
	bus := NewBus()
	st := &store.Store{
		Kind:        Kind,
		Node:        cfg.Node,
		Approvals:   ledger,
		Idempotency: idem,
		Messages:    messages,
		State:       NewState(),
		Bus:         bus,
		Members:     NewMembers(cfg.Node, cfg.Version),
		Health:      func() error { return nil },
		Close: func() error {
			bus.Close()
			return errors.Join(idem.Close(), ledger.Close(), messages.Close(), closeRuns())
		},
	}
	if runLog != nil {
		st.Runs = runLog
	}
	if cfg.AgentTokensPath != "" {
		st.AgentTokens = TokenFile(cfg.AgentTokensPath)
	}
	if cfg.PosturesPath != "" {
		st.Postures = PostureFile(cfg.PosturesPath)
	}
	return st, rep, nil
}

// Members is the member list of a daemon alone: itself, alive.
type Members struct {
	self store.Member
}

var _ store.Members = (*Members)(nil)

// NewMembers returns the list of the daemon node, started now.
func NewMembers(node, version string) *Members {
	return &Members{self: store.Member{ID: node, Version: version, StartedAt: time.Now().UTC(), Alive: true}}
}

// List returns this daemon, its heartbeat now: it is the one answering.
func (m *Members) List(context.Context) ([]store.Member, error) {
	self := m.self
	self.LastHeartbeat = time.Now().UTC()
	return []store.Member{self}, nil
}

// busQueue bounds what one subscription may have undelivered before the
// oldest payload is dropped.
const busQueue = 1024

// Bus carries notifications within this process: each subscription has its
// own bounded queue and goroutine, so a slow subscriber holds up nobody
// (past busQueue its oldest payloads are dropped).
type Bus struct {
	mu     sync.Mutex
	subs   map[string]map[*fanout.Queue[[]byte]]struct{}
	closed bool
}

var _ store.Bus = (*Bus)(nil)

// NewBus returns a bus without subscribers; Close stops the ones left.
func NewBus() *Bus {
	return &Bus{subs: make(map[string]map[*fanout.Queue[[]byte]]struct{})}
}

// Publish hands a copy of payload to every subscriber of topic. It never
// blocks and never fails.
func (b *Bus) Publish(_ context.Context, topic string, payload []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs[topic]) == 0 {
		return nil
	}
	p := append([]byte(nil), payload...)
	for q := range b.subs[topic] {
		q.Push(p)
	}
	return nil
}

// Subscribe calls fn with every payload published on topic from now on, in
// order, on a goroutine of its own, until cancel (which waits for a call in
// progress). After Close it subscribes to nothing.
func (b *Bus) Subscribe(topic string, fn func(payload []byte)) (cancel func()) {
	q := fanout.New(func(_ context.Context, it fanout.Item[[]byte]) error {
		fn(it.Value)
		return nil
	}, fanout.Options{Capacity: busQueue})
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		q.Close()
		return func() {}
	}
	set := b.subs[topic]
	if set == nil {
		set = make(map[*fanout.Queue[[]byte]]struct{})
		b.subs[topic] = set
	}
	set[q] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if set := b.subs[topic]; set != nil {
				delete(set, q)
				if len(set) == 0 {
					delete(b.subs, topic)
				}
			}
			b.mu.Unlock()
			q.Close()
		})
	}
}

// Close stops every subscription still open and waits for their goroutines.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	var qs []*fanout.Queue[[]byte]
	for _, set := range b.subs {
		for q := range set {
			qs = append(qs, q)
		}
	}
	b.subs = map[string]map[*fanout.Queue[[]byte]]struct{}{}
	b.mu.Unlock()
	for _, q := range qs {
		q.Close()
	}
}
