package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// The transaction check: before a proposal runs, each action's read set is
// checked against the write sets of the actions that can run at the same
// time as it (of this proposal, and of proposals in flight on other
// connections), and each action's assumptions against state as it is now.
// Off by default; warn records what it finds, strict refuses the proposal.

// EventTransactionConflict records one finding in warn mode.
const EventTransactionConflict EventKind = "transaction_conflict"

// DefaultMaxAssumptions bounds the assumptions one proposal may carry:
// each is a state read at admission.
const DefaultMaxAssumptions = 1024

// ParseTransactionCheck checks a mode name.
func ParseTransactionCheck(mode string) (string, error) {
	switch mode {
	case protocol.TransactionCheckOff, protocol.TransactionCheckWarn, protocol.TransactionCheckStrict:
		return mode, nil
	}
	return "", fmt.Errorf("mode: '%s' is not a transaction check mode (off, warn or strict)", mode)
}

// TransactionCheck is the session's mode: its own, else the daemon's.
func (rt *Runtime) TransactionCheck(s *Session) string {
	if m := s.integ.txMode.Load(); m != nil {
		return *m
	}
	return rt.opts.TransactionCheck
}

// SetTransactionCheck sets the session's mode.
func (s *Session) SetTransactionCheck(mode string) { s.integ.txMode.Store(&mode) }

// txInFlight is the write sets of the proposals admitted and not finished:
// proposal id → its session and tenant → key → action id.
type txInFlight struct {
	mu   sync.Mutex
	byID map[string]txWrites
}

type txWrites struct {
	id, session, tenant string
	keys                map[string]string
}

func (f *txInFlight) add(w txWrites) {
	id := w.session + "\x00" + w.id
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byID == nil {
		f.byID = map[string]txWrites{}
	}
	f.byID[id] = w
}

func (f *txInFlight) remove(session, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byID, session+"\x00"+id)
}

// others finds, for each key, a writer among the proposals in flight on
// other sessions in tenant: "proposal P action A".
func (f *txInFlight) others(session, tenant string, keys map[string]bool) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out map[string]string
	for _, w := range f.byID {
		if w.session == session || w.tenant != tenant {
			continue
		}
		for k := range keys {
			if a, ok := w.keys[k]; ok {
				if out == nil {
					out = map[string]string{}
				}
				if _, seen := out[k]; !seen {
					out[k] = fmt.Sprintf("proposal %s action '%s'", w.id, a)
				}
			}
		}
	}
	return out
}

// txReads is an action's read set: read_set when given, else its state
// dependencies (and a state_read's keys) plus its assumptions' keys. Keys
// still holding a reference are left out.
func txReads(a *protocol.Action) []string {
	var keys []string
	if a.ReadSet != nil {
		keys = slices.Clone(a.ReadSet)
	} else {
		keys = append(readKeys(a), assumptionKeys(a)...)
	}
	return slices.DeleteFunc(keys, refPattern.MatchString)
}

// txWritesOf is an action's write set: write_set when given, else its
// expected effects' keys and a state_write's key.
func txWritesOf(a *protocol.Action) []string {
	keys := a.WriteSet
	if keys == nil {
		keys = writtenKeys(a)
	}
	return slices.DeleteFunc(slices.Clone(keys), refPattern.MatchString)
}

// transactionConflicts finds the conflicts of sub's proposal. An error is
// an assumption that cannot be read, or state that cannot be.
func (rt *Runtime) transactionConflicts(ctx context.Context, sub *Submission, g *graph) ([]protocol.TransactionConflict, error) {
	actions := sub.Proposal.Actions
	if g == nil {
		g = buildGraph(actions)
	}
	var out []protocol.TransactionConflict
	readers, writers := map[string][]int{}, map[string][]int{}
	mine := map[string]bool{}
	nAssume := 0
	for i := range actions {
		for _, k := range txReads(&actions[i]) {
			readers[k] = append(readers[k], i)
			mine[k] = true
		}
		for _, k := range txWritesOf(&actions[i]) {
			writers[k] = append(writers[k], i)
			mine[k] = true
		}
		nAssume += len(actions[i].Assumptions)
	}
	if nAssume > rt.opts.MaxAssumptions {
		return nil, &LimitError{Msg: fmt.Sprintf("assumptions: the proposal carries %d; at most %d are checked (max_assumptions): split it", nAssume, rt.opts.MaxAssumptions)}
	}
	// Pairs within the proposal that no dependency path orders.
	var targets []int
	for k, ws := range writers {
		if len(ws)+len(readers[k]) > 1 {
			targets = append(targets, ws...)
			targets = append(targets, readers[k]...)
		}
	}
	if len(targets) > 0 {
		reach := newReachability(g, targets)
		concurrent := func(i, j int) bool { return i != j && !reach.reaches(i, j) && !reach.reaches(j, i) }
		for _, k := range sortedKeys(writers) {
			ws := writers[k]
			for x, i := range ws {
				for _, j := range ws[x+1:] {
					if concurrent(i, j) {
						out = append(out, protocol.TransactionConflict{Kind: protocol.ConflictWriteWrite, Key: k, ActionID: actions[i].ID, Other: actions[j].ID,
							Detail: fmt.Sprintf("actions '%s' and '%s' both write '%s' and nothing orders them", actions[i].ID, actions[j].ID, k)})
					}
				}
			}
			for _, r := range readers[k] {
				for _, w := range ws {
					if concurrent(r, w) {
						out = append(out, protocol.TransactionConflict{Kind: protocol.ConflictReadWrite, Key: k, ActionID: actions[r].ID, Other: actions[w].ID,
							Detail: fmt.Sprintf("action '%s' reads '%s' while action '%s' may write it at the same time", actions[r].ID, k, actions[w].ID)})
					}
				}
			}
		}
	}
	// Writes of proposals in flight on other connections.
	if others := rt.integ.inFlight.others(sub.Session.ID, sub.Tenant, mine); len(others) > 0 {
		for _, k := range sortedKeys(others) {
			for _, i := range writers[k] {
				out = append(out, protocol.TransactionConflict{Kind: protocol.ConflictWriteWrite, Key: k, ActionID: actions[i].ID, Other: others[k],
					Detail: fmt.Sprintf("action '%s' writes '%s', which %s in flight on another connection writes too", actions[i].ID, k, others[k])})
			}
			for _, i := range readers[k] {
				out = append(out, protocol.TransactionConflict{Kind: protocol.ConflictReadWrite, Key: k, ActionID: actions[i].ID, Other: others[k],
					Detail: fmt.Sprintf("action '%s' reads '%s', which %s in flight on another connection writes", actions[i].ID, k, others[k])})
			}
		}
	}
	// Assumptions against state as it is now.
	vr, _ := rt.opts.State.(store.VersionReader)
	for i := range actions {
		a := &actions[i]
		for n, raw := range a.Assumptions {
			var as protocol.Assumption
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&as); err != nil || as.Key == "" {
				why := "a key is required"
				if err != nil {
					why = err.Error()
				}
				return nil, fmt.Errorf("action '%s': assumptions[%d] must be {key, expected_value?, read_version?}: %s", a.ID, n, why)
			}
			if refPattern.MatchString(as.Key) {
				continue
			}
			h, err := rt.checkAssumption(ctx, vr, sub.Tenant, as)
			if err != nil {
				return nil, fmt.Errorf("action '%s': assumption on '%s' cannot be checked: %w", a.ID, as.Key, err)
			}
			if h.stale {
				out = append(out, protocol.TransactionConflict{Kind: protocol.ConflictStaleRead, Key: as.Key, ActionID: a.ID,
					Detail: fmt.Sprintf("action '%s' read '%s' at version %d; it is at version %d now", a.ID, as.Key, *as.ReadVersion, h.version)})
			}
			if h.diverged {
				out = append(out, protocol.TransactionConflict{Kind: protocol.ConflictBeliefDivergence, Key: as.Key, ActionID: a.ID,
					Detail: fmt.Sprintf("action '%s' assumes a value of '%s' that state does not hold now", a.ID, as.Key)})
			}
		}
	}
	return out, nil
}

// assumptionHolds is how one assumption stands against state now: read
// at an older version than the key's (stale), or expecting a value the key
// does not hold (diverged). version is the key's version (0 without a
// versioned store).
type assumptionHolds struct {
	stale, diverged bool
	version         uint64
}

// checkAssumption reads as.Key in tenant (with its version when vr is set)
// and compares it with what as expects.
func (rt *Runtime) checkAssumption(ctx context.Context, vr store.VersionReader, tenant string, as protocol.Assumption) (assumptionHolds, error) {
	var h assumptionHolds
	var cur any
	var err error
	if vr != nil {
		cur, h.version, _, err = vr.GetVersioned(ctx, tenant, as.Key)
	} else {
		cur, _, err = rt.State.Get(ctx, tenant, as.Key)
	}
	if err != nil {
		return h, err
	}
	h.stale = as.ReadVersion != nil && vr != nil && *as.ReadVersion < h.version
	h.diverged = len(as.ExpectedValue) > 0 && !holdsJSON(as.ExpectedValue, cur)
	return h, nil
}

// holdsJSON reports whether state value v is the JSON value raw.
func holdsJSON(raw json.RawMessage, v any) bool {
	b, err := json.Marshal(v)
	return err == nil && sameJSON(raw, b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// describeConflicts names at most 20 conflicts (limitList) and counts the
// rest.
func describeConflicts(cs []protocol.TransactionConflict) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Kind + " on '" + c.Key + "': " + c.Detail
	}
	return limitList(parts)
}

// txGate runs the transaction check at admission and, for the proposals
// that write state, registers their write sets as in flight.
type txGate struct{ rt *Runtime }

func (txGate) Name() string { return "transaction_check" }

func (g txGate) Admit(ctx context.Context, sub *Submission) error {
	rt := g.rt
	mode := rt.TransactionCheck(sub.Session)
	if mode != protocol.TransactionCheckOff {
		cs, err := rt.transactionConflicts(ctx, sub, sub.graph)
		if err != nil {
			return err
		}
		if len(cs) > 0 && mode == protocol.TransactionCheckStrict {
			return fmt.Errorf("transaction check (strict) refused the proposal: %s", describeConflicts(cs))
		}
		for _, c := range cs {
			rt.Events.Append(Event{Kind: EventTransactionConflict, ProposalID: sub.Proposal.ID, ActionID: c.ActionID, Connection: sub.Session.ID, Data: map[string]any{
				"kind": c.Kind, "key": c.Key, "other": c.Other,
			}})
		}
		if len(cs) > 0 {
			sub.txWarnings = append(sub.txWarnings, "transaction check: "+describeConflicts(cs))
		}
	}
	var keys map[string]string
	for i := range sub.Proposal.Actions {
		for _, k := range txWritesOf(&sub.Proposal.Actions[i]) {
			if keys == nil {
				keys = map[string]string{}
			}
			if _, ok := keys[k]; !ok {
				keys[k] = sub.Proposal.Actions[i].ID
			}
		}
	}
	if keys != nil {
		rt.integ.inFlight.add(txWrites{id: sub.Proposal.ID, session: sub.Session.ID, tenant: sub.Tenant, keys: keys})
		sub.txRegistered = true
	}
	return nil
}

// VerifyTransactions adds the transaction check's findings to a verify
// result as warnings, whatever the mode.
func (rt *Runtime) VerifyTransactions(ctx context.Context, res *VerifyResult, p *protocol.ActionProposal, s *Session, tenant string) {
	c := protocol.CheckRecord{Name: "transaction_check", Ran: true, Tier: TierDecision,
		Verifies:     "no two actions that can run at the same time write a key the other reads or writes (nor a proposal in flight on another connection), and every assumption holds against state now",
		CannotVerify: "keys named only by references, and writes a tool makes without declaring them"}
	cs, err := rt.transactionConflicts(ctx, &Submission{Proposal: p, Session: s, Tenant: tenant}, nil)
	if err != nil {
		c.Findings++
		res.Issues = append(res.Issues, protocol.VerifyIssue{Severity: "warning", Tier: c.Tier, Message: "transaction check: " + err.Error()})
	}
	for _, x := range cs {
		c.Findings++
		res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: x.ActionID, Severity: "warning", Tier: c.Tier,
			Message: fmt.Sprintf("transaction check: %s on '%s': %s", x.Kind, x.Key, x.Detail)})
	}
	res.Evidence.Checks = append(res.Evidence.Checks, c)
}

// noteTransactions ends a proposal's stay in flight and puts the warn
// mode's findings in its result.
func (rt *Runtime) noteTransactions(sub *Submission, res *protocol.ProposalResult) {
	if sub.txRegistered {
		rt.integ.inFlight.remove(sub.Session.ID, sub.Proposal.ID)
	}
	res.Warnings = append(res.Warnings, sub.txWarnings...)
}

// DefaultTransactionCheck is the daemon's mode (transaction_check).
func (rt *Runtime) DefaultTransactionCheck() string { return rt.opts.TransactionCheck }

// TransactionCheckRank orders the modes from the laxest.
func TransactionCheckRank(mode string) int {
	switch mode {
	case protocol.TransactionCheckWarn:
		return 1
	case protocol.TransactionCheckStrict:
		return 2
	}
	return 0
}

// GetVersioned reads a key with the version of the write that stored it
// (0 when it does not exist, or when state is off).
func (rt *Runtime) GetVersioned(ctx context.Context, tenant, key string) (any, uint64, error) {
	if vr, ok := rt.opts.State.(store.VersionReader); ok {
		v, version, _, err := vr.GetVersioned(ctx, tenant, key)
		return v, version, err
	}
	v, _, err := rt.State.Get(ctx, tenant, key)
	return v, 0, err
}
