package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/fanout"
)

// The bus carries notifications between daemons over LISTEN/NOTIFY.
//
// One listening connection per daemon, opened outside the pool (a daemon
// holds at most MaxConns+1 connections), LISTENs to the channel of every
// topic that has a subscriber. Each subscription has its own goroutine and a
// bounded queue (busQueue payloads), so one slow subscriber delays only
// itself, and its payloads arrive in the order the database delivered them.
//
// A nil payload means "resync": the subscriber may have missed
// notifications and must re-read what it caches. It is delivered
//   - once the subscription's channel is LISTENed to (the first one tells
//     the subscriber that notifications published from then on reach it),
//   - after every reconnection, when the listening connection was lost and
//     opened again (with backoff, busBackoffMin doubling to busBackoffMax),
//   - in place of the payloads a subscriber fell too far behind on: when its
//     queue is full, the oldest payloads are dropped and the next delivery
//     is preceded by a resync. Nothing is lost silently.
//
// Publish sends through the pool with pg_notify, so a notification is sent
// when (and only if) its transaction commits. A payload is text under 8000
// bytes: publish an id and let subscribers re-read the row.
const (
	busQueue      = 1024
	busBackoffMin = 50 * time.Millisecond
	busBackoffMax = 5 * time.Second
	busPing       = 10 * time.Second // a silent listening connection is pinged this often
	maxPayload    = 7999             // PostgreSQL refuses a NOTIFY payload of 8000 bytes or more
)

// errPayloadTooLarge is wrapped by Publish's refusal of a large payload.
var errPayloadTooLarge = errors.New("notification payload too large")

// channelOf maps a topic to its notification channel: "car:" and the topic
// when that fits a PostgreSQL identifier (63 bytes) and is plain text,
// else "car:#" and a digest of the topic, so any topic string is safe.
func channelOf(topic string) string {
	if len(topic)+4 <= 63 && utf8.ValidString(topic) && !strings.ContainsRune(topic, 0) {
		return "car:" + topic
	}
	sum := sha256.Sum256([]byte(topic))
	return "car:#" + hex.EncodeToString(sum[:20])
}

// checkPayload refuses what NOTIFY cannot carry.
func checkPayload(topic string, payload []byte) error {
	if len(payload) > maxPayload {
		return fmt.Errorf("%w: %d bytes on topic %q, PostgreSQL carries at most %d; publish an id and let subscribers re-read the row", errPayloadTooLarge, len(payload), topic, maxPayload)
	}
	if !utf8.Valid(payload) || bytes.IndexByte(payload, 0) >= 0 {
		return fmt.Errorf("notification payload on topic %q is not text (invalid UTF-8 or a NUL byte); publish an id or encode it", topic)
	}
	return nil
}

// bus is the store.Bus of one daemon.
type bus struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig
	timeout time.Duration // bound of one Publish, LISTEN or ping

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the listener and subscription queues being closed

	mu         sync.Mutex
	subs       map[string]map[*subscription]struct{} // by channel
	dirty      bool                                  // subs changed since the listener last looked
	waitCancel context.CancelFunc                    // interrupts the listener's wait
	connected  bool
	reconnects int // listening connections opened after the first
	closed     bool

	// onConnect, when set (tests), is called by the listener after each
	// connection is opened and before it LISTENs; guarded by mu.
	onConnect func()
}

// subscription is one Subscribe.
type subscription struct {
	channel string
	fn      func([]byte)
	q       *fanout.Queue[[]byte]
	stopped atomic.Bool
	ready   bool // guarded by bus.mu: resync delivered on the current connection
}

func newBus(pool *pgxpool.Pool, timeout time.Duration) *bus {
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "car-server listen"
	ctx, cancel := context.WithCancel(context.Background())
	b := &bus{pool: pool, connCfg: cfg, timeout: timeout, ctx: ctx, cancel: cancel, subs: make(map[string]map[*subscription]struct{})}
	b.wg.Add(1)
	go b.listen()
	return b
}

// Publish notifies every daemon's subscribers of topic (this one's too).
func (b *bus) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := checkPayload(topic, payload); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if _, err := b.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channelOf(topic), string(payload)); err != nil {
		return fmt.Errorf("publish on topic %q: %w", topic, unavailable(err))
	}
	return nil
}

// PublishEach notifies every daemon's subscribers of topic once per
// payload, in the order given, in one statement: one round trip and one
// transaction for the lot. Subscribers receive each payload as from its own
// Publish, except that PostgreSQL delivers identical payloads sent in one
// transaction once. A payload NOTIFY cannot carry refuses the whole call.
//
// The transaction commits without waiting for its WAL flush
// (synchronous_commit off for it alone): it writes nothing but its commit
// record, the notifications go out at commit either way, and one that a
// crash unwinds only made a subscriber re-read. Waiting would hold the
// cluster's notification queue lock for a disk flush per publish.
func (b *bus) PublishEach(ctx context.Context, topic string, payloads []string) error {
	for _, p := range payloads {
		if err := checkPayload(topic, []byte(p)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if _, err := b.pool.Exec(ctx, "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, p) FROM unnest($2::text[]) AS p", channelOf(topic), payloads); err != nil {
		return fmt.Errorf("publish %d notifications on topic %q: %w", len(payloads), topic, unavailable(err))
	}
	return nil
}

// Subscribe calls fn with every payload published on topic from the moment
// the listener LISTENs to it (announced by fn(nil)), in order, on the
// subscription's own goroutine; fn(nil) asks for a resync. cancel stops the
// calls: none starts after it returns, though one in progress may finish.
func (b *bus) Subscribe(topic string, fn func(payload []byte)) (cancel func()) {
	s := &subscription{channel: channelOf(topic), fn: fn}
	s.q = fanout.New(func(_ context.Context, it fanout.Item[[]byte]) error {
		if it.Dropped > 0 && it.Value != nil && !s.stopped.Load() {
			s.fn(nil) // payloads were dropped: re-read instead
		}
		if !s.stopped.Load() {
			s.fn(it.Value)
		}
		return nil
	}, fanout.Options{Capacity: busQueue, WriteTimeout: time.Hour})
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.q.Close()
		return func() {}
	}
	set := b.subs[s.channel]
	if set == nil {
		set = make(map[*subscription]struct{})
		b.subs[s.channel] = set
	}
	set[s] = struct{}{}
	b.kickLocked()
	b.mu.Unlock()
	return func() { b.unsubscribe(s) }
}

func (b *bus) unsubscribe(s *subscription) {
	if s.stopped.Swap(true) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return // close stops every queue
	}
	if set := b.subs[s.channel]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(b.subs, s.channel)
		}
	}
	b.kickLocked()
	// Not waited for here: cancel may be called from within fn, on the
	// queue's own goroutine. close waits for it.
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		s.q.Close()
	}()
}

// kickLocked tells the listener the subscriptions changed.
func (b *bus) kickLocked() {
	b.dirty = true
	if b.waitCancel != nil {
		b.waitCancel()
	}
}

// close stops the listener and every subscription, and waits for them.
func (b *bus) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	var queues []*fanout.Queue[[]byte]
	for _, set := range b.subs {
		for s := range set {
			s.stopped.Store(true)
			queues = append(queues, s.q)
		}
	}
	b.subs = nil
	b.mu.Unlock()
	b.cancel()
	for _, q := range queues {
		q.Close()
	}
	b.wg.Wait()
}

// status says whether the listening connection is up, and how many times
// it was opened again after the first.
func (b *bus) status() (connected bool, reconnects int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connected, b.reconnects
}

// listen keeps one listening connection open, with backoff between
// attempts, until close.
func (b *bus) listen() {
	defer b.wg.Done()
	wait := busBackoffMin
	for first := true; b.ctx.Err() == nil; {
		cctx, cancel := context.WithTimeout(b.ctx, b.timeout)
		conn, err := pgx.ConnectConfig(cctx, b.connCfg)
		cancel()
		if err != nil {
			if !sleepCtx(b.ctx, wait) {
				return
			}
			wait = min(2*wait, busBackoffMax)
			continue
		}
		b.mu.Lock()
		b.connected = true
		if !first {
			b.reconnects++
		}
		first = false
		hook := b.onConnect
		b.mu.Unlock()
		if hook != nil {
			hook()
		}
		served := b.serve(conn)
		b.mu.Lock()
		b.connected = false
		b.mu.Unlock()
		cctx, cancel = context.WithTimeout(context.Background(), b.timeout)
		_ = conn.Close(cctx)
		cancel()
		if served {
			wait = busBackoffMin // it listened: the next attempt starts the backoff afresh
		}
		if !sleepCtx(b.ctx, wait) {
			return
		}
		wait = min(2*wait, busBackoffMax)
	}
}

// serve LISTENs to the subscribed channels on conn and dispatches what
// arrives until conn fails or the bus closes. It reports whether it got as
// far as listening.
func (b *bus) serve(conn *pgx.Conn) (served bool) {
	listening := map[string]bool{}
	b.mu.Lock()
	b.dirty = true
	for _, set := range b.subs {
		for s := range set {
			s.ready = false
		}
	}
	b.mu.Unlock()
	for {
		if err := b.sync(conn, listening); err != nil {
			return served
		}
		served = true
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return served
		}
		if b.dirty {
			b.mu.Unlock()
			continue
		}
		wctx, cancel := context.WithTimeout(b.ctx, busPing)
		b.waitCancel = cancel
		b.mu.Unlock()
		n, err := conn.WaitForNotification(wctx)
		b.mu.Lock()
		b.waitCancel = nil
		b.mu.Unlock()
		werr := wctx.Err()
		cancel()
		switch {
		case err == nil:
			b.dispatch(n.Channel, []byte(n.Payload))
		case b.ctx.Err() != nil, werr == nil, conn.IsClosed():
			return served // closing, or the connection failed
		case errors.Is(werr, context.DeadlineExceeded):
			pctx, pcancel := context.WithTimeout(b.ctx, b.timeout)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil {
				return served
			}
		}
		// Otherwise a Subscribe or cancel interrupted the wait: sync.
	}
}

// sync makes conn LISTEN to exactly the subscribed channels, then resyncs
// every subscription that has not been told it is listened to since conn
// opened.
func (b *bus) sync(conn *pgx.Conn, listening map[string]bool) error {
	b.mu.Lock()
	b.dirty = false
	want := make(map[string]bool, len(b.subs))
	for ch := range b.subs {
		want[ch] = true
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
	defer cancel()
	for ch := range want {
		if !listening[ch] {
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
			listening[ch] = true
		}
	}
	for ch := range listening {
		if !want[ch] {
			if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
			delete(listening, ch)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch, set := range b.subs {
		if !listening[ch] {
			continue // subscribed since the snapshot: the next sync has it
		}
		for s := range set {
			if !s.ready {
				s.ready = true
				s.q.Push(nil)
			}
		}
	}
	return nil
}

// dispatch queues payload for every subscription of channel.
func (b *bus) dispatch(channel string, payload []byte) {
	if payload == nil {
		payload = []byte{} // nil is the resync signal
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[channel] {
		if s.ready {
			s.q.Push(payload)
		}
	}
}

// sleepCtx waits d and reports true, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
