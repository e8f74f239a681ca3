package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/store"
)

// agentTokens keeps the agents' token hashes in car_agent_tokens, each with
// the tenants it admits (NULL: the default tenant alone). Every Verify
// reads the row, so an issue or a revoke on any daemon (or by an
// operator's command) is in force on every daemon at once. A revoke
// announces itself on store.TopicAgentRevoked in its transaction, and an
// issue (which replaces the token) on agentIssuedTopic, so every daemon's
// Watch asks again about the agent's live connection.
type agentTokens struct {
	pool    *pgxpool.Pool
	bus     *bus // nil for the operator's handle (OpenTokens), which watches nothing
	timeout time.Duration
}

// agentIssuedTopic carries the id of an agent whose token was (re)issued:
// a connection bound with the token it replaced is closed.
const agentIssuedTopic = "agents.issued"

var _ store.AgentTokens = (*agentTokens)(nil)

func (a *agentTokens) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// Issue stores the hash of token as agentID's, admitting tenants (none:
// NULL, the default tenant alone), replacing any earlier one, and
// announces it in the same transaction.
func (a *agentTokens) Issue(ctx context.Context, agentID, token string, tenants ...string) error {
	if err := storable("agent_id", agentID); err != nil {
		return err
	}
	var granted []string // NULL
	if len(tenants) > 0 {
		granted = agents.Tenants(tenants)
		for _, t := range granted {
			if err := storable("tenant", t); err != nil {
				return err
			}
		}
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO car_agent_tokens (agent_id, hash, issued_at, tenants) VALUES ($1, $2, $3, $4)
			ON CONFLICT (agent_id) DO UPDATE SET hash = EXCLUDED.hash, issued_at = EXCLUDED.issued_at, tenants = EXCLUDED.tenants`,
			agentID, store.HashToken(token), time.Now().UTC(), granted); err != nil {
			return err
		}
		return announce(ctx, tx, agentIssuedTopic, agentID)
	})
	if err != nil {
		return fmt.Errorf("issue agent %s's token: %w", agentID, unavailable(err))
	}
	return nil
}

// Revoke deletes agentID's token and, when there was one, announces it.
func (a *agentTokens) Revoke(ctx context.Context, agentID string) (bool, error) {
	if storable("agent_id", agentID) != nil {
		return false, nil // it could never have been issued
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	revoked := false
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM car_agent_tokens WHERE agent_id = $1", agentID)
		if err != nil {
			return err
		}
		revoked = tag.RowsAffected() == 1
		if !revoked {
			return nil
		}
		return announce(ctx, tx, store.TopicAgentRevoked, agentID)
	})
	if err != nil {
		return false, fmt.Errorf("revoke agent %s's token: %w", agentID, unavailable(err))
	}
	return revoked, nil
}

// announce notifies topic of agentID in tx; an id NOTIFY cannot carry is
// announced as "" (every agent), which has each daemon ask again about
// all its bound connections rather than miss this one.
func announce(ctx context.Context, tx pgx.Tx, topic, agentID string) error {
	payload := agentID
	if checkPayload(topic, []byte(agentID)) != nil {
		payload = ""
	}
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", channelOf(topic), payload)
	return err
}

// List names the agents with a token, by id (in byte order).
func (a *agentTokens) List(ctx context.Context) ([]store.IssuedAgent, error) {
	ctx, cancel := a.bound(ctx)
	defer cancel()
	rows, err := a.pool.Query(ctx, `SELECT agent_id, issued_at, tenants FROM car_agent_tokens ORDER BY agent_id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list the agents with a token: %w", unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.IssuedAgent, error) {
		var ia store.IssuedAgent
		err := r.Scan(&ia.AgentID, &ia.IssuedAt, &ia.Tenants)
		ia.IssuedAt = ia.IssuedAt.UTC()
		ia.Tenants = agents.Tenants(ia.Tenants)
		return ia, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the agents with a token: %w", unavailable(err))
	}
	if out == nil {
		out = []store.IssuedAgent{}
	}
	return out, nil
}

// Verify compares token's hash with agentID's, in constant time.
func (a *agentTokens) Verify(ctx context.Context, agentID, token string) (bool, error) {
	_, ok, err := a.Grant(ctx, agentID, token)
	return ok, err
}

// Grant is Verify, with the tenants read from the same row.
func (a *agentTokens) Grant(ctx context.Context, agentID, token string) ([]string, bool, error) {
	if storable("agent_id", agentID) != nil {
		return nil, false, nil
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	var hash string
	var tenants []string
	err := a.pool.QueryRow(ctx, "SELECT hash, tenants FROM car_agent_tokens WHERE agent_id = $1", agentID).Scan(&hash, &tenants)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("read agent %s's token: %w", agentID, unavailable(err))
	}
	match := store.VerifyHash(hash, token) // hashed whether or not the agent has a token
	if !found || !match {
		return nil, false, nil
	}
	return agents.Tenants(tenants), true, nil
}

// Identify names the agent whose token hashes to token's hash.
func (a *agentTokens) Identify(ctx context.Context, token string) (string, []string, bool, error) {
	if token == "" {
		return "", nil, false, nil
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	var agentID string
	var tenants []string
	err := a.pool.QueryRow(ctx, "SELECT agent_id, tenants FROM car_agent_tokens WHERE hash = $1", store.HashToken(token)).Scan(&agentID, &tenants)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("identify an agent token: %w", unavailable(err))
	}
	return agentID, agents.Tenants(tenants), true, nil
}

// Watch calls fn with the agent of every revoke and issue announced by any
// daemon or command, and fn("") when the bus resyncs (a notification may
// have been missed).
func (a *agentTokens) Watch(fn func(agentID string)) (cancel func()) {
	if a.bus == nil {
		return func() {}
	}
	follow := func(payload []byte) { fn(string(payload)) } // nil, on a resync: ""
	stopRevoked := a.bus.Subscribe(store.TopicAgentRevoked, follow)
	stopIssued := a.bus.Subscribe(agentIssuedTopic, follow)
	var once sync.Once
	return func() {
		once.Do(func() {
			stopRevoked()
			stopIssued()
		})
	}
}

// posturesTopic carries the version of each posture policy change.
const posturesTopic = "agents.postures"

// postures keeps the per-agent posture policy in the one row of
// car_agent_postures. A change locks the row, bumps its version and
// notifies every daemon in its transaction; a daemon that may have missed
// a notification (a resync of the bus, or a re-check that finds another
// version than it read) reads the policy again.
type postures struct {
	pool    *pgxpool.Pool
	bus     *bus
	timeout time.Duration
	recheck time.Duration

	mu       sync.Mutex
	seen     int64           // the version last read or written here
	watching map[*int]func() // the stop of every Watch not yet cancelled
}

var _ store.Postures = (*postures)(nil)

func (p *postures) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.timeout)
}

// see records a version read or written here.
func (p *postures) see(v int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = max(p.seen, v)
}

// Read returns the policy; version 0 is the row an Update made before
// writing anything (none was written).
func (p *postures) Read(ctx context.Context) (json.RawMessage, bool, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	var doc string
	var version int64
	err := p.pool.QueryRow(ctx, "SELECT policy::text, version FROM car_agent_postures WHERE id").Scan(&doc, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the agent permissions: %w", unavailable(err))
	}
	p.see(version)
	if version == 0 {
		return nil, false, nil
	}
	return json.RawMessage(doc), true, nil
}

// Update changes the policy under the row's lock, in one transaction with
// its notification.
func (p *postures) Update(ctx context.Context, change func(json.RawMessage, bool) (json.RawMessage, error)) error {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	var version int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO car_agent_postures (id, policy, version, updated_at) VALUES (true, 'null', 0, now())
			ON CONFLICT (id) DO NOTHING`); err != nil {
			return err
		}
		var cur string
		var old int64
		if err := tx.QueryRow(ctx, "SELECT policy::text, version FROM car_agent_postures WHERE id FOR UPDATE").Scan(&cur, &old); err != nil {
			return err
		}
		var doc json.RawMessage
		if old > 0 {
			doc = json.RawMessage(cur)
		}
		next, err := change(doc, old > 0)
		if err != nil {
			return err
		}
		if !json.Valid(next) {
			return errors.New("the agent permissions policy to store is not JSON")
		}
		if err := tx.QueryRow(ctx, "UPDATE car_agent_postures SET policy = $1::json, version = version + 1, updated_at = now() WHERE id RETURNING version",
			string(next)).Scan(&version); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", channelOf(posturesTopic), strconv.FormatInt(version, 10))
		return err
	})
	if err != nil {
		return fmt.Errorf("change the agent permissions: %w", unavailable(err))
	}
	p.see(version)
	return nil
}

// Watch calls fn when another daemon changed the policy (its notification
// names a version newer than this daemon's), when the bus resyncs, and when
// a re-check every recheck interval finds another version than the one
// last seen here.
func (p *postures) Watch(fn func()) (cancel func()) {
	unsubscribe := p.bus.Subscribe(posturesTopic, func(payload []byte) {
		if payload != nil {
			v, err := strconv.ParseInt(string(payload), 10, 64)
			p.mu.Lock()
			seen := p.seen
			p.mu.Unlock()
			if err == nil && v <= seen {
				return // written or read here already
			}
		}
		fn()
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go every(ctx, p.recheck, done, func(ctx context.Context) {
		cctx, cancel := p.bound(ctx)
		var version int64
		err := p.pool.QueryRow(cctx, "SELECT version FROM car_agent_postures WHERE id").Scan(&version)
		cancel()
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return // an outage: the next tick retries
		}
		p.mu.Lock()
		behind := version != p.seen
		p.mu.Unlock()
		if behind {
			fn()
		}
	})
	var once sync.Once
	key := new(int)
	cancel = func() {
		once.Do(func() {
			unsubscribe()
			stop()
			<-done
			p.mu.Lock()
			delete(p.watching, key)
			p.mu.Unlock()
		})
	}
	p.mu.Lock()
	if p.watching == nil {
		p.watching = map[*int]func(){}
	}
	p.watching[key] = cancel
	p.mu.Unlock()
	return cancel
}

// close cancels every Watch still in force.
func (p *postures) close() {
	p.mu.Lock()
	var stops []func()
	for _, c := range p.watching {
		stops = append(stops, c)
	}
	p.mu.Unlock()
	for _, c := range stops {
		c()
	}
}
