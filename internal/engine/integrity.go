package engine

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/parslee-ai/car-server/internal/store"

	"github.com/parslee-ai/car-server/protocol"
)

// The integrity gates' share of the Runtime, the Session and a Submission:
// the intents and the taint ledger (intentgate.go, taint.go), the
// transaction check (txcheck.go) and tool receipts (receipts.go).

// IntegrityOptions bound the integrity gates' inputs (Options embeds them).
type IntegrityOptions struct {
	// TransactionCheck is the daemon's default mode: off (""), warn or
	// strict.
	TransactionCheck string
	// MaxIntentPatterns bounds the patterns and capabilities of one intent.
	MaxIntentPatterns int
	// MaxIntentTextBytes bounds an intent's text.
	MaxIntentTextBytes int
	// MaxTaintedKeys bounds the taint ledger, and the keys of one
	// taint.list or taint.clear.
	MaxTaintedKeys int
	// MaxAssumptions bounds the assumptions one proposal may carry.
	MaxAssumptions int
	// MaxReceiptClaims bounds the claims of one receipts.verify.
	MaxReceiptClaims int
	// Taint keeps the taint ledger durably; nil keeps it in memory only.
	Taint store.Taint
}

func (o *IntegrityOptions) setDefaults() {
	if o.TransactionCheck == "" {
		o.TransactionCheck = protocol.TransactionCheckOff
	}
	if o.MaxIntentPatterns <= 0 {
		o.MaxIntentPatterns = DefaultMaxIntentPatterns
	}
	if o.MaxIntentTextBytes <= 0 {
		o.MaxIntentTextBytes = DefaultMaxIntentTextBytes
	}
	if o.MaxTaintedKeys <= 0 {
		o.MaxTaintedKeys = DefaultMaxTaintedKeys
	}
	if o.MaxAssumptions <= 0 {
		o.MaxAssumptions = DefaultMaxAssumptions
	}
	if o.MaxReceiptClaims <= 0 {
		o.MaxReceiptClaims = DefaultMaxReceiptClaims
	}
}

// runtimeIntegrity is the Runtime's part: one ledger for its life, whatever
// the intents in force.
type runtimeIntegrity struct {
	intents  intents
	ledger   taintLedger
	inFlight txInFlight
	agents   agentTaint
}

// sessionIntegrity is a Session's part.
type sessionIntegrity struct {
	mu     sync.Mutex // one intent change at a time
	intent atomic.Pointer[WorkIntent]
	txMode atomic.Pointer[string]
	// tainted says where the first tainted data this connection received
	// came from (bounded); nil while it has received none. From then on
	// every key it writes is tainted.
	tainted atomic.Pointer[string]
}

// TaintedBy says where the first tainted data the session's connection
// received came from, or "" while it has received none (the connection
// alone: Runtime.TaintedBy adds its agent's).
func (s *Session) TaintedBy() string {
	if p := s.integ.tainted.Load(); p != nil {
		return *p
	}
	return ""
}

// agentTaint is what the Runtime keeps of the agents whose connections
// received tainted data: agent id → the first origin (bounded), so an
// agent that reconnects is not clean again. One entry per agent id bound
// to a connection; agent tokens are the host's to issue.
type agentTaint struct {
	mu     sync.Mutex
	agents map[string]string
}

// agentOf is the agent a session's connection is bound to, or "".
func agentOf(s *Session) string {
	if s.RequestedBy == nil {
		return ""
	}
	return s.RequestedBy().AgentID
}

// TaintedBy says where the first tainted data the session received came
// from: on its connection, or on any earlier connection of the agent it
// is bound to (on this daemon, since it started). "" while none.
func (rt *Runtime) TaintedBy(s *Session) string {
	if by := s.TaintedBy(); by != "" {
		return by
	}
	agent := agentOf(s)
	if agent == "" {
		return ""
	}
	rt.integ.agents.mu.Lock()
	defer rt.integ.agents.mu.Unlock()
	if by, ok := rt.integ.agents.agents[agent]; ok {
		return "agent '" + agent + "' received on an earlier connection " + by
	}
	return ""
}

// noteTainted records that the session received tainted data; the first
// origin stays, for the connection and for its agent, so what either
// keeps is bounded.
func (rt *Runtime) noteTainted(s *Session, origin string) {
	origin = boundOrigin(origin)
	s.integ.tainted.CompareAndSwap(nil, &origin)
	agent := agentOf(s)
	if agent == "" {
		return
	}
	rt.integ.agents.mu.Lock()
	defer rt.integ.agents.mu.Unlock()
	if rt.integ.agents.agents == nil {
		rt.integ.agents.agents = map[string]string{}
	}
	if _, ok := rt.integ.agents.agents[agent]; !ok {
		rt.integ.agents.agents[agent] = origin
	}
}

// submissionIntegrity is what the gates found about one proposal, for
// what it leaves behind when it ends.
type submissionIntegrity struct {
	taint        *taintAnalysis
	txWarnings   []string
	txRegistered bool
	noPark       bool // an escalation names the fingerprint instead of waiting (multi.* runs)
}

// noteIntegrity records what a finished proposal leaves behind: the taint
// of the keys it wrote, its end in flight, and its warnings.
func (rt *Runtime) noteIntegrity(ctx context.Context, sub *Submission, res *protocol.ProposalResult) {
	rt.noteTaint(ctx, sub, res)
	rt.noteTransactions(sub, res)
}

// GateNames are the names of the admission gates, in order.
func (rt *Runtime) GateNames() []string {
	names := make([]string, len(rt.gates))
	for i, g := range rt.gates {
		names[i] = g.Name()
	}
	return names
}
