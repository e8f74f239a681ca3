// Package store is the seam for what several daemons must share: the
// approval ledger, the idempotency cache with its claims, the messaging
// dedup ledger, shared state, the durable event log, cross-daemon
// notifications, the member list, agent run traces, agent identity
// (the agents' token hashes and their postures), and the agents' leases.
//
// Two implementations stand behind it, one file per part each: store/file
// (the journals under $CAR_HOME, the default; one daemon) and
// store/postgres (several daemons on one PostgreSQL). What both backends
// share lives here (the approval watchers, the token hash, CheckRunRecord).
// cmd/car-server opens one backend and hands its parts out: the engine is
// given these interfaces (engine.Options), the rpc layer these and the
// domain types built over them (runs.Store, agents.Postures). Neither
// imports a backend, and neither learns SQL.
//
// The arrows run downward: store may import the domain packages' plain
// types (runs, agents, policy), which never import store or journal back.
// Where an interface's consumer is a domain package (runs.Store over
// runs.Log, agents.Postures over agents.PostureStore), that package
// defines it and store names it too (RunLog, Postures). imports_test.go
// fails when a domain package comes to import store or journal, or the
// engine a backend.
//
// Every method that can reach a database takes a context and returns an
// error that wraps ErrUnavailable when the store cannot be reached, so
// callers can say so instead of guessing.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/protocol"
)

// ErrUnavailable is wrapped by every error caused by a store that cannot be
// reached (a database down, a pool exhausted past its timeout). Nothing is
// acknowledged on such an error: the write did not commit.
var ErrUnavailable = errors.New("the shared store is unavailable")

// ErrSuperseded is wrapped by the error of a Commit whose claim was
// superseded: a later claim of the same key (a higher epoch) was taken
// while its call ran. The result was not stored and must not be
// acknowledged; the newer holder's result stands.
var ErrSuperseded = errors.New("the idempotency claim was superseded by a newer claim of its key")

// Wrap is how a caller reports an error of the store met while doing what:
// the result wraps ErrUnavailable and err, and its message says once that
// the store is unavailable. A nil err stays nil.
func Wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// Store bundles one implementation of every part of the seam.
type Store struct {
	Kind        string // "file" or "postgres"
	Node        string // this daemon's member id
	Approvals   Approvals
	Idempotency Idempotency
	Messages    Messages
	State       State
	Events      Events // nil: the event log lives in memory only
	Bus         Bus
	Members     Members
	Supervisors Supervisors
	Runs        RunLog      // agent run traces; nil: runs.* are off
	AgentTokens AgentTokens // the agents' token hashes; nil: no connection can bind an agent
	Postures    Postures    // the per-agent posture policy; nil: agent_permissions.* are off
	People      People      // the people's host-role token hashes; nil: only the daemon's host token has the host role
	// Trajectories records every dispatched attempt; nil: nothing is
	// recorded and tools.feedback has no data.
	Trajectories Trajectories
	Leases       Leases // the agents' leases; nil: lease.* are off
	// Harness keeps the daemon-wide harness config; nil: it lives in
	// memory only and a restart forgets it.
	Harness Harness
	// Taint is the intent gate's taint ledger when the store shares it
	// with a cluster; nil: the daemon keeps its own (the file backend's is
	// $CAR_HOME/taint.jsonl).
	Taint Taint
	// Health is nil when the store is reachable, else an error wrapping
	// ErrUnavailable; /healthz reports it.
	Health func() error
	Close  func() error
}

// Approvals is the approval ledger: one current decision per fingerprint,
// with its history. Decision and List read a local copy and never wait on
// I/O; Record commits durably (on every daemon's copy) before it returns.
type Approvals interface {
	Record(r protocol.ApprovalRecord) (protocol.ApprovalRecord, error)
	Decision(fingerprint string) (protocol.ApprovalRecord, bool)
	// Watch returns a channel that receives the next decision for
	// fingerprint recorded after the call (on any daemon), and a stop
	// function. Watch first, then read Decision, so nothing is missed.
	Watch(fingerprint string) (<-chan protocol.ApprovalRecord, func())
	List() []protocol.ApprovalRecord
	// Refresh re-reads the decisions on fingerprints from the store into
	// the local copy, so that Decision then sees every decision committed
	// before the call, on any daemon (the copy otherwise follows the other
	// daemons a notification behind). The permission gate calls it only
	// before it would ask a person or refuse for want of an approval.
	Refresh(ctx context.Context, fingerprints ...string) error
	// Use takes one use of fingerprint's approval, atomically across every
	// daemon: ok when its current decision is an approval that is live
	// (approvals.Live) at now, and then one of its uses, if it counts them,
	// is spent. Two admissions racing for the last use: exactly one gets it.
	Use(ctx context.Context, fingerprint string, now time.Time) (rec protocol.ApprovalRecord, ok bool, err error)
}

// Idempotency is the cache of idempotent results. Begin is called before a
// dispatch: a stored result is a hit; otherwise the caller holds a Claim on
// the key and dispatches under it. A key claimed by another daemon is
// waited for (its result is then a hit) until the holder's lease expires,
// when the waiter takes the claim over. The file store's claims are local
// and do not merge in-flight duplicates.
type Idempotency interface {
	Begin(ctx context.Context, key, tool, proposalID string) (out any, hit bool, c Claim, err error)
	// Result reads the stored result of key without claiming it: for keys
	// no daemon claims any more, those an older daemon gave its results
	// (idempotency.Key), read back after an upgrade.
	Result(ctx context.Context, key string) (out any, ok bool, err error)
	// Invalidate deletes the results proposalID stored under keys (the
	// proposal rolled back); a key whose result another proposal stored
	// keeps it.
	Invalidate(ctx context.Context, keys []string, proposalID string) error
	Len() int
}

// IdempotencyLegacyBeginner is an Idempotency that reads the key an older
// daemon gave a call (idempotency.Key) in the same round trip as the claim
// (the PostgreSQL store). BeginOrLegacy is Begin, except that when it would
// return a claim and legacy holds a result, it releases the claim and
// returns that result as a hit: what the engine does with Begin and Result
// in turn for a plain client's call.
type IdempotencyLegacyBeginner interface {
	BeginOrLegacy(ctx context.Context, key, legacy, tool, proposalID string) (out any, hit bool, c Claim, err error)
}

// IdempotencyFlusher is an Idempotency whose Commit may return before the
// result is flushed to disk (journal_sync = proposal): on the file store the
// result is written, so a process crash keeps it, but a power loss may
// not; on PostgreSQL it is committed without waiting for the flush, or
// sent without waiting for the answer. Flush returns once every result
// committed, and every result Begin or Result returned, before the call is
// on disk, and with an error when a result proposalID committed was not
// stored after all; the engine calls it before it answers a proposal that
// committed or read one.
//
// Proposal ids come from clients, so two runs may share one: the engine
// marks each run's context (WithRun), and a store that keeps anything per
// run between Begin and Flush keys it by RunOf(ctx), not by proposalID.
type IdempotencyFlusher interface {
	Flush(ctx context.Context, proposalID string) error
}

// runKey is the context key of WithRun.
type runKey struct{}

// WithRun marks ctx as one run of a proposal, id unique in this process.
func WithRun(ctx context.Context, id uint64) context.Context {
	return context.WithValue(ctx, runKey{}, id)
}

// RunOf is the run WithRun marked ctx with, and false when there is none.
func RunOf(ctx context.Context) (uint64, bool) {
	id, ok := ctx.Value(runKey{}).(uint64)
	return id, ok
}

// Claim is the right to dispatch one idempotent call. Exactly one of Commit
// or Release ends it.
//
// Every claim carries an epoch, the key's fencing token: the store gives a
// key's claims increasing epochs, 1 for its first, and never the same one
// twice, across releases, rollbacks, take-overs and restarts. A claim is
// superseded once a later claim of its key was taken (a take-over of a
// lapsed claim on a shared store; a second Begin while it runs on the file
// store). A superseded claim's Commit is refused with ErrSuperseded and
// stores nothing: the newer holder's result is never overwritten.
type Claim interface {
	// Epoch is the claim's fencing token.
	Epoch() uint64
	// Commit stores the result durably; it returns after the commit, so an
	// ack that follows it is never for a result a crash can lose (for an
	// IdempotencyFlusher, an ack that follows its Flush). A Commit
	// that fails ends the claim too: the caller does not Release it.
	Commit(ctx context.Context, output any) error
	// Release gives the claim up without a result (the call failed).
	Release()
}

// Receipt is what a delivered message left behind.
type Receipt struct {
	Channel   string  `json:"channel"`
	MessageID *string `json:"message_id,omitempty"`
}

// Messages remembers which messaging idempotency keys were delivered.
type Messages interface {
	Delivered(ctx context.Context, key string) (Receipt, bool, error)
	Record(ctx context.Context, key string, r Receipt) error
}

// Prior is what a key held before a write: enough to put it back.
type Prior struct {
	Value   any
	Existed bool
	Version uint64 // the version of Value; 0 when the key did not exist
}

// State is the shared key/value store, one namespace per tenant ("" is
// the unscoped one). Values are decoded JSON and immutable once stored.
// Every write stamps the key with a fresh version; Restore puts a prior back
// only while the key still holds the given version (the last committed
// write wins, the rollback of an overwritten key keeps the later write).
type State interface {
	Get(ctx context.Context, tenant, key string) (any, bool, error)
	Set(ctx context.Context, tenant, key string, value any) error
	Write(ctx context.Context, tenant, key string, value any) (version uint64, prior Prior, err error)
	Restore(ctx context.Context, tenant, key string, version uint64, prior Prior) (bool, error)
	Keys(ctx context.Context, tenant string) ([]string, error)
	Snapshot(ctx context.Context, tenant string) (map[string]any, error)
	// Export copies one tenant's namespace (tenant non-nil) or all.
	Export(ctx context.Context, tenant *string) (map[string]map[string]any, error)
	// Replace swaps one namespace (or all) for spaces and returns the
	// number of keys written.
	Replace(ctx context.Context, tenant *string, spaces map[string]map[string]any) (int, error)
}

// EventRecord is one audit event as the durable log keeps it: the daemon
// that wrote it, its place in that daemon's hash chain, and the event's
// JSON as the engine encoded it.
type EventRecord struct {
	Pos        int64 // the cluster-wide position (Since's cursor); 0 until stored
	Node       string
	Seq        uint64
	At         time.Time
	Kind       string
	ProposalID string
	Hash       string
	PrevHash   string
	Body       json.RawMessage
}

// Events is the cluster's durable event log. Append never blocks on the
// database: records are written in batches in the background and spooled
// to disk while the database cannot be reached.
type Events interface {
	Append(r EventRecord)
	// Since returns up to limit records with a cluster-wide position after
	// cursor, of every daemon but skip ("" skips none), and the cursor to
	// read on from: the position of the last record returned, or, when
	// fewer than limit came back, of the newest record looked at, skipped
	// ones included, so that a daemon reading the others' records does
	// not pass over its own again.
	Since(ctx context.Context, cursor int64, limit int, skip string) ([]EventRecord, int64, error)
	// Query returns the records matching q, oldest first; with a Limit, the
	// newest Limit of them.
	Query(ctx context.Context, q EventFilter) ([]EventRecord, error)
	Count(ctx context.Context) (int, error)
	// LastOf returns the seq and hash of the newest record of node's chain,
	// counting this daemon's records not yet written out (0 and "" when
	// there is none), so a restarted daemon continues its chain and its seq.
	LastOf(ctx context.Context, node string) (seq uint64, hash string, err error)
	// Head is the cluster-wide position of the newest record (0 for an
	// empty log): Since(Head) returns what is appended afterwards.
	Head(ctx context.Context) (int64, error)
}

// EventFilter selects durable events; zero fields do not filter. Since is
// inclusive, Until exclusive. Limit keeps the NEWEST Limit matching records
// (by cluster-wide position), still returned oldest first.
type EventFilter struct {
	Kinds      []string
	ProposalID string
	Node       string
	Since      time.Time
	Until      time.Time
	Limit      int
}

// TopicEvents is the Bus topic on which the durable event log announces
// each committed batch, with the writing daemon's node id as the payload:
// the other daemons then read the new records with Since instead of
// waiting for their next poll.
const TopicEvents = "events"

// Bus carries notifications between daemons (the file store's stays in
// this process). A subscriber is called in order for one topic, on one
// goroutine per subscription; it must not block for long. A nil payload
// asks the subscriber to resync (re-read what it caches): it may have
// missed notifications, because the bus started or lost its connection, or
// because the subscriber fell too far behind. Published payloads arrive
// non-nil (empty at least), so they are never mistaken for it.
type Bus interface {
	Publish(ctx context.Context, topic string, payload []byte) error
	Subscribe(topic string, fn func(payload []byte)) (cancel func())
}

// Member is one daemon of the cluster, as server.status reports it.
type Member = protocol.Member

// Members lists the daemons that share the store.
type Members interface {
	List(ctx context.Context) ([]Member, error)
}

// Supervisor is one supervisor subscription, on some daemon.
type Supervisor struct {
	Node    string          `json:"node"`
	Session string          `json:"session"`
	Filter  json.RawMessage `json:"filter,omitempty"`
	Since   time.Time       `json:"since"`
}

// Supervisors registers the supervisor subscriptions of every daemon, so
// that a daemon without a supervisor of its own knows that one exists
// somewhere, and parks rather than runs unsupervised. A daemon's
// subscriptions go when it closes, and count only while it is alive.
type Supervisors interface {
	Register(ctx context.Context, session string, filter any) error
	Unregister(ctx context.Context, session string) error
	// Alive lists the subscriptions of live daemons.
	Alive(ctx context.Context) ([]Supervisor, error)
	// AnyAlive says whether a live daemon has a subscription.
	AnyAlive(ctx context.Context) (bool, error)
}

// Run statuses and record kinds, as the run log keeps them (package runs
// names them).
const (
	RunInProgress = runs.StatusInProgress
	RunCompleted  = runs.StatusCompleted
	RunIncomplete = runs.StatusIncomplete

	RunStarted = runs.KindStarted
	RunTurn    = runs.KindTurn
	RunEnded   = runs.KindEnded
)

// ErrRunNotFound and ErrRunEnded are runs.ErrNotFound and runs.ErrEnded.
var (
	ErrRunNotFound = runs.ErrNotFound
	ErrRunEnded    = runs.ErrEnded
)

// The run log is package runs' own interface (runs.Log): its consumer,
// runs.Store, defines it, and the backends implement it.
type (
	RunLog    = runs.Log
	RunHead   = runs.Head
	RunRecord = runs.LogRecord
	RunBatch  = runs.Batch
	RunEnd    = runs.End
)

// CheckRunRecord refuses a body that is not a JSON object; i is its place
// in the batch, for the error.
func CheckRunRecord(i int, body json.RawMessage) error {
	if b := bytes.TrimSpace(body); !json.Valid(b) || b[0] != '{' {
		return fmt.Errorf("record %d of the batch is not a JSON object", i)
	}
	return nil
}

// IssuedAgent is an agent with a token (agents.IssuedAgent).
type IssuedAgent = agents.IssuedAgent

// TopicAgentRevoked is the Bus topic on which a revoke is announced, the
// agent id as the payload, so that every daemon closes that agent's
// connection. The postgres store's Revoke announces it in its transaction.
const TopicAgentRevoked = "agents.revoked"

// AgentTokens keeps the agents' own tokens, as hashes only, each with the
// tenants it admits. Issue and Revoke are in force on every daemon as soon
// as they return; Watch tells a daemon to look again at the connections it
// bound, so that a revoked or replaced token loses its connection too.
type AgentTokens interface {
	// Issue makes token agentID's token, replacing any earlier one. The
	// token admits tenants (agents.Tenants: none is the default tenant
	// alone).
	Issue(ctx context.Context, agentID, token string, tenants ...string) error
	// Revoke removes agentID's token; it reports whether there was one.
	Revoke(ctx context.Context, agentID string) (bool, error)
	// List names the agents with a token, by id, with their tenants.
	List(ctx context.Context) ([]IssuedAgent, error)
	// Verify reports whether token is agentID's current token.
	Verify(ctx context.Context, agentID, token string) (bool, error)
	// Grant is Verify that also returns the tenants the token admits
	// (agents.Tenants), read in the same look at the store.
	Grant(ctx context.Context, agentID, token string) (tenants []string, ok bool, err error)
	// Identify names the agent whose current token token is, with the
	// tenants it admits: the token alone identifies the agent (the MCP
	// endpoint's bearer token). ok is false when no agent holds it.
	Identify(ctx context.Context, token string) (agentID string, tenants []string, ok bool, err error)
	// Watch calls fn, on a goroutine of the store's, whenever a token may
	// have been revoked or replaced, until cancel: with the agent's id when
	// the store knows which, with "" when any may have been (a shared
	// store's watch also starts so, once it listens). fn then asks Grant
	// again for the connections it holds.
	Watch(fn func(agentID string)) (cancel func())
}

// IssuedPerson is a person with a host-role token, never the token.
type IssuedPerson struct {
	Name     string    `json:"name"`
	IssuedAt time.Time `json:"issued_at"`
}

// People keeps the people's own host-role tokens, as hashes only, so that
// each decision names the person who made it. Issue and Revoke are in
// force on every daemon as soon as they return.
type People interface {
	// Issue makes token name's token, replacing any earlier one.
	Issue(ctx context.Context, name, token string) error
	// Revoke removes name's token; it reports whether there was one.
	Revoke(ctx context.Context, name string) (bool, error)
	// List names the people with a token, by name.
	List(ctx context.Context) ([]IssuedPerson, error)
	// Identify names the person whose current token token is; ok is false
	// when nobody holds it.
	Identify(ctx context.Context, token string) (name string, ok bool, err error)
}

// Postures keeps the per-agent posture policy: package agents defines
// what it needs of the store (agents.PostureStore), and the backends
// implement it.
type Postures = agents.PostureStore

// Lease is one agent id's lease as the store holds it. Epoch is the last
// epoch handed out for the id (0: never acquired); it only grows, and a
// release keeps it, so an epoch is never handed out twice. Holder is ""
// and ExpiresAt zero while the lease is free (released, or never held);
// a lease whose ExpiresAt has passed is free too, though it still names
// its last holder.
type Lease struct {
	AgentID   string
	Holder    string
	Epoch     uint64
	ExpiresAt time.Time
}

// HeldAt reports whether the lease is held at now.
func (l Lease) HeldAt(now time.Time) bool {
	return l.Holder != "" && now.Before(l.ExpiresAt)
}

// ErrLeaseHeld is returned by Acquire while another acquisition's lease
// has not expired; ErrLeaseLost by Renew and Release when the lease is no
// longer held at the given epoch by the given holder (it expired, was
// released, or was acquired again since).
var (
	ErrLeaseHeld = errors.New("the lease is held")
	ErrLeaseLost = errors.New("the lease is not held at that epoch by that holder")
)

// Leases are the agents' leases: one per agent id, with a fencing epoch.
// Every method is one linearizable step against the store (on PostgreSQL,
// across every daemon of the cluster); expiry is judged by the store's
// clock (the database's on PostgreSQL).
type Leases interface {
	// Acquire takes agentID's lease for holder for ttl, with the next
	// epoch, when it is free; else it returns the lease as it stands and
	// an error wrapping ErrLeaseHeld.
	Acquire(ctx context.Context, agentID, holder string, ttl time.Duration) (Lease, error)
	// Renew extends the lease to ttl from now, keeping its epoch, while
	// holder holds it at epoch; else the lease as it stands and an error
	// wrapping ErrLeaseLost.
	Renew(ctx context.Context, agentID, holder string, epoch uint64, ttl time.Duration) (Lease, error)
	// Release frees the lease while holder holds it at epoch, so the next
	// Acquire succeeds at once; else the lease as it stands and an error
	// wrapping ErrLeaseLost.
	Release(ctx context.Context, agentID, holder string, epoch uint64) (Lease, error)
	// Status returns the lease of agentID (Epoch 0 when never acquired).
	Status(ctx context.Context, agentID string) (Lease, error)
}

// Harness keeps the daemon-wide harness config as one JSON document. Load
// returns nil when nothing was ever saved. Save replaces it durably: once
// it returns, a restart loads what it wrote.
type Harness interface {
	Load(ctx context.Context) (json.RawMessage, error)
	Save(ctx context.Context, doc json.RawMessage) error
}
