package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// The taint ledger: the state keys that untrusted data reached, daemon-wide
// (every connection's proposals read and write the same state), with the
// action that wrote each and where its taint came from. A successful
// action's output is tainted when its tool is untrusted or any of its
// inputs was; the keys it wrote become tainted. A trusted write of a key
// clears its taint. An action that reads a tainted key, or references a
// tainted output, is influenced: the intent gate refuses it when it is out
// of intent.

// DefaultMaxTaintedKeys bounds the ledger.
const DefaultMaxTaintedKeys = 100_000

// EventTaintCleared records a person's taint.clear.
const EventTaintCleared EventKind = "taint_cleared"

// taintLedger is the ledger: tenant → key → entry, written through to
// durable (Options.Taint) when the daemon keeps it on disk.
type taintLedger struct {
	mu      sync.Mutex
	keys    map[string]map[string]protocol.TaintEntry
	n       int
	max     int
	durable store.Taint // nil: in memory only
}

// load takes what the durable ledger holds (at start).
func (l *taintLedger) load(d store.Taint) {
	l.durable = d
	if d == nil {
		return
	}
	l.keys = d.Load()
	for _, space := range l.keys {
		l.n += len(space)
	}
}

// lookup returns the entry of a tainted key.
func (l *taintLedger) lookup(tenant, key string) (protocol.TaintEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.keys[tenant][key]
	return e, ok
}

// empty reports whether nothing is tainted.
func (l *taintLedger) empty() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n == 0
}

// full reports whether the ledger holds its most.
func (l *taintLedger) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n >= l.max
}

// update records the keys tainted writes reached and clears the keys
// trusted writes replaced. A taint past max is recorded all the same (a
// security rule is never dropped); admission refuses new untrusted work
// while the ledger is full. The copy in memory changes whatever the
// durable ledger says; an error says the change is not on disk.
func (l *taintLedger) update(tenant string, taint map[string]protocol.TaintEntry, clean []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	space := l.keys[tenant]
	var gone []string
	for _, k := range clean {
		if _, ok := space[k]; ok {
			delete(space, k)
			l.n--
			gone = append(gone, k)
		}
	}
	if l.durable != nil && len(gone) > 0 {
		errs = append(errs, l.durable.Delete(tenant, gone))
	}
	if len(taint) == 0 {
		return errors.Join(errs...)
	}
	if space == nil {
		if l.keys == nil {
			l.keys = map[string]map[string]protocol.TaintEntry{}
		}
		space = map[string]protocol.TaintEntry{}
		l.keys[tenant] = space
	}
	entries := make([]protocol.TaintEntry, 0, len(taint))
	for k, e := range taint {
		if _, ok := space[k]; !ok {
			l.n++
		}
		space[k] = e
		entries = append(entries, e)
	}
	if l.durable != nil {
		sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
		errs = append(errs, l.durable.Put(tenant, entries))
	}
	return errors.Join(errs...)
}

// list returns the tainted keys among keys (nil: all), sorted.
func (l *taintLedger) list(tenant string, keys []string) []protocol.TaintEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []protocol.TaintEntry{}
	space := l.keys[tenant]
	if keys == nil {
		for _, e := range space {
			out = append(out, e)
		}
	} else {
		for _, k := range keys {
			if e, ok := space[k]; ok {
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return slices.CompactFunc(out, func(a, b protocol.TaintEntry) bool { return a.Key == b.Key })
}

// TaintList answers taint.list; keys over max_tainted_keys are refused.
func (rt *Runtime) TaintList(tenant string, keys []string) ([]protocol.TaintEntry, error) {
	if len(keys) > rt.opts.MaxTaintedKeys {
		return nil, &LimitError{Msg: fmt.Sprintf("keys: %d keys asked about; at most %d are accepted (max_tainted_keys): ask in parts", len(keys), rt.opts.MaxTaintedKeys)}
	}
	return rt.integ.ledger.list(tenant, keys), nil
}

// TaintClear clears the taint of keys and records who did it.
func (rt *Runtime) TaintClear(tenant string, keys []string, by string) ([]string, error) {
	if len(keys) == 0 {
		return nil, errors.New("keys: name at least one key to clear (taint.list shows the tainted ones)")
	}
	if len(keys) > rt.opts.MaxTaintedKeys {
		return nil, &LimitError{Msg: fmt.Sprintf("keys: %d keys; at most %d are accepted (max_tainted_keys): clear in parts", len(keys), rt.opts.MaxTaintedKeys)}
	}
	had := rt.integ.ledger.list(tenant, keys)
	cleared := make([]string, len(had))
	for i, e := range had {
		cleared[i] = e.Key
	}
	err := rt.integ.ledger.update(tenant, nil, cleared)
	rt.Events.Append(Event{Kind: EventTaintCleared, Connection: by, Data: map[string]any{"tenant": tenant, "keys": cleared}})
	if err != nil {
		return cleared, fmt.Errorf("the taint of %d keys was cleared in memory, but the durable ledger could not record it (a restart would taint them again): %w", len(cleared), err)
	}
	return cleared, nil
}

// taintAnalysis is what the intent gate found about one proposal: for each
// action, whether its output will be tainted and, when it is influenced,
// by what.
type taintAnalysis struct {
	tainted   []bool
	influence []string // "" when not influenced
	untrusted []bool   // the action's own tool is untrusted
	origin    []string // for a tainted action: where its taint comes from
}

// analyzeTaint follows taint through a proposal: from untrusted tools and
// tainted keys in the ledger, along $id.output references and the keys
// actions of the proposal write and read. g is the proposal's graph, or
// nil to build it.
func (rt *Runtime) analyzeTaint(sub *Submission, g *graph, intents ...*WorkIntent) *taintAnalysis {
	actions := sub.Proposal.Actions
	if g == nil {
		g = buildGraph(actions)
	}
	n := len(actions)
	an := &taintAnalysis{tainted: make([]bool, n), influence: make([]string, n), untrusted: make([]bool, n), origin: make([]string, n)}
	ledgerEmpty := rt.integ.ledger.empty()
	any := false
	for i := range actions {
		if actions[i].Type == protocol.ActionToolCall && rt.untrusted(actions[i].Tool, intents...) {
			an.untrusted[i] = true
			any = true
		}
	}
	if !any && ledgerEmpty {
		return an // nothing can be tainted: the common case costs one pass
	}
	writers := map[string][]int{}
	for i := range actions {
		for _, k := range taintWrites(&actions[i]) {
			writers[k] = append(writers[k], i)
		}
	}
	const (
		unseen = iota
		visiting
		done
	)
	mark := make([]uint8, n)
	var visit func(i int)
	visit = func(i int) {
		if mark[i] != unseen {
			return
		}
		mark[i] = visiting
		a := &actions[i]
		for _, j := range g.refs[i] {
			visit(j)
			if an.tainted[j] && an.influence[i] == "" {
				an.influence[i] = fmt.Sprintf("it references the output of action '%s', %s", actions[j].ID, an.origin[j])
			}
		}
		for _, k := range taintReads(a) {
			if an.influence[i] != "" {
				break
			}
			if e, ok := rt.integ.ledger.lookup(sub.Tenant, k); ok {
				an.influence[i] = fmt.Sprintf("it reads state key '%s', tainted by %s", k, describeTaint(e))
				break
			}
			for _, j := range writers[k] {
				if j == i {
					continue
				}
				visit(j)
				if an.tainted[j] {
					an.influence[i] = fmt.Sprintf("it reads state key '%s', which action '%s' writes, %s", k, actions[j].ID, an.origin[j])
					break
				}
			}
		}
		switch {
		case an.untrusted[i]:
			an.tainted[i] = true
			an.origin[i] = fmt.Sprintf("whose data comes from untrusted tool '%s'", a.Tool)
		case an.influence[i] != "":
			an.tainted[i] = true
			an.origin[i] = "tainted because " + an.influence[i]
		}
		mark[i] = done
	}
	for i := range actions {
		visit(i)
	}
	return an
}

// describeTaint says where a ledger entry's taint came from.
func describeTaint(e protocol.TaintEntry) string {
	s := fmt.Sprintf("proposal %s action '%s'", e.ProposalID, e.ActionID)
	if e.Tool != "" {
		s += fmt.Sprintf(" (%s)", e.Tool)
	}
	return s + " at " + e.At + ": " + e.Origin
}

// taintReads are the keys an action reads, for taint: state_read keys,
// state_dependencies, read_set and the assumptions' keys.
func taintReads(a *protocol.Action) []string {
	keys := append(readKeys(a), a.ReadSet...)
	return append(keys, assumptionKeys(a)...)
}

// taintWrites are the keys an action declares it writes.
func taintWrites(a *protocol.Action) []string {
	return append(writtenKeys(a), a.WriteSet...)
}

// assumptionKeys are the keys of an action's assumptions that decode.
func assumptionKeys(a *protocol.Action) []string {
	var keys []string
	for _, raw := range a.Assumptions {
		var as protocol.Assumption
		if json.Unmarshal(raw, &as) == nil && as.Key != "" {
			keys = append(keys, as.Key)
		}
	}
	return keys
}

// taintGuard refuses a proposal with untrusted work while the ledger is
// full: its taint must be recorded, and the ledger's bound must hold.
func (rt *Runtime) taintGuard(an *taintAnalysis) error {
	if an == nil || !slices.Contains(an.tainted, true) || !rt.integ.ledger.full() {
		return nil
	}
	return &LimitError{Msg: fmt.Sprintf("the taint ledger holds %d keys (max_tainted_keys) and this proposal would taint more: a person clears keys with taint.clear, or a trusted write replaces them", rt.opts.MaxTaintedKeys)}
}

// noteTaint records in the ledger the keys this proposal's succeeded
// actions wrote: tainted ones taint them, trusted ones clear them.
func (rt *Runtime) noteTaint(sub *Submission, res *protocol.ProposalResult) {
	an := sub.taint
	if an == nil {
		return
	}
	ledgerEmpty := rt.integ.ledger.empty()
	var taint map[string]protocol.TaintEntry
	var clean []string
	at := time.Now().UTC().Format(time.RFC3339Nano)
	for i, r := range res.Results {
		if r.Status != protocol.StatusSucceeded || i >= len(an.tainted) || len(r.StateChanges) == 0 {
			continue
		}
		a := &sub.Proposal.Actions[i]
		if !an.tainted[i] {
			if !ledgerEmpty {
				for k := range r.StateChanges {
					clean = append(clean, k)
				}
			}
			continue
		}
		if taint == nil {
			taint = map[string]protocol.TaintEntry{}
		}
		for k := range r.StateChanges {
			taint[k] = protocol.TaintEntry{Key: k, ProposalID: sub.Proposal.ID, ActionID: a.ID, Tool: a.Tool, Origin: an.origin[i], At: at}
		}
	}
	if taint != nil || clean != nil {
		if err := rt.integ.ledger.update(sub.Tenant, taint, clean); err != nil {
			res.Warnings = append(res.Warnings, "the taint ledger could not record this proposal's writes durably (they are recorded until the daemon stops): "+err.Error())
		}
	}
}
