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

// TaintedBy says where the first tainted data the session received came
// from, or "" while it has received none.
func (s *Session) TaintedBy() string {
	if p := s.integ.tainted.Load(); p != nil {
		return *p
	}
	return ""
}

// noteTainted records that the session received tainted data; the first
// origin stays, so what the session keeps is bounded.
func (s *Session) noteTainted(origin string) {
	origin = boundOrigin(origin)
	s.integ.tainted.CompareAndSwap(nil, &origin)
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
