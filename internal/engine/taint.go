package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

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

// maxTaintOriginBytes bounds what one ledger entry says about where its
// taint came from: taint that passes from key to key would otherwise carry
// a longer story at every step. The head (the nearest step) and the tail
// (the untrusted source) are kept.
const maxTaintOriginBytes = 1024

// taintLedger is the ledger: tenant → key → entry, kept by a store.Taint
// (Options.Taint), which on a shared store is the cluster's, so every
// daemon reads the same keys.
type taintLedger struct {
	store store.Taint
	max   int
}

// load takes the ledger to use; nil keeps one in memory.
func (l *taintLedger) load(d store.Taint) {
	if d == nil {
		d = store.NewMemoryTaint()
	}
	l.store = d
}

// full reports whether the ledger holds its most.
func (l *taintLedger) full(ctx context.Context) (bool, error) {
	n, err := l.store.Count(ctx)
	return n >= l.max, err
}

// update records the keys tainted writes reached and clears the keys
// trusted writes replaced. A taint past max is recorded all the same (a
// security rule is never dropped); admission refuses new untrusted work
// while the ledger is full.
func (l *taintLedger) update(ctx context.Context, tenant string, taint map[string]protocol.TaintEntry, clean []string) error {
	var errs []error
	if len(clean) > 0 {
		_, err := l.store.Delete(ctx, tenant, clean)
		errs = append(errs, err)
	}
	if len(taint) > 0 {
		entries := make([]protocol.TaintEntry, 0, len(taint))
		for _, e := range taint {
			e.Origin = boundOrigin(e.Origin)
			entries = append(entries, e)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
		errs = append(errs, l.store.Put(ctx, tenant, entries))
	}
	return errors.Join(errs...)
}

// boundOrigin keeps an origin within maxTaintOriginBytes: its head and its
// tail, on rune boundaries, around an ellipsis.
func boundOrigin(s string) string {
	if len(s) <= maxTaintOriginBytes {
		return s
	}
	const mark = " … "
	half := (maxTaintOriginBytes - len(mark)) / 2
	head, tail := half, len(s)-half
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + mark + s[tail:]
}

// TaintList answers taint.list; keys over max_tainted_keys are refused.
func (rt *Runtime) TaintList(ctx context.Context, tenant string, keys []string) ([]protocol.TaintEntry, error) {
	if len(keys) > rt.opts.MaxTaintedKeys {
		return nil, &LimitError{Msg: fmt.Sprintf("keys: %d keys asked about; at most %d are accepted (max_tainted_keys): ask in parts", len(keys), rt.opts.MaxTaintedKeys)}
	}
	return rt.integ.ledger.store.List(ctx, tenant, keys)
}

// TaintClear clears the taint of keys and records who did it.
func (rt *Runtime) TaintClear(ctx context.Context, tenant string, keys []string, by string) ([]string, error) {
	if len(keys) == 0 {
		return nil, errors.New("keys: name at least one key to clear (taint.list shows the tainted ones)")
	}
	if len(keys) > rt.opts.MaxTaintedKeys {
		return nil, &LimitError{Msg: fmt.Sprintf("keys: %d keys; at most %d are accepted (max_tainted_keys): clear in parts", len(keys), rt.opts.MaxTaintedKeys)}
	}
	cleared, err := rt.integ.ledger.store.Delete(ctx, tenant, keys)
	if err != nil {
		return nil, fmt.Errorf("the taint ledger could not clear the keys, and their taint stands: %w", err)
	}
	if cleared == nil {
		cleared = []string{}
	}
	rt.Events.Append(Event{Kind: EventTaintCleared, Connection: by, Data: map[string]any{"tenant": tenant, "keys": cleared}})
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
	session   string   // the session had received tainted data: every key it writes is tainted
}

// analyzeTaint follows taint through a proposal: from untrusted tools and
// tainted keys in the ledger, along $id.output references and the keys
// actions of the proposal write and read. g is the proposal's graph, or
// nil to build it. The ledger is asked once, for every key the proposal
// reads; when it cannot answer, the analysis fails (a gate that cannot
// tell refuses).
func (rt *Runtime) analyzeTaint(ctx context.Context, sub *Submission, g *graph, intents ...*WorkIntent) (*taintAnalysis, error) {
	actions := sub.Proposal.Actions
	n := len(actions)
	an := &taintAnalysis{tainted: make([]bool, n), influence: make([]string, n), untrusted: make([]bool, n), origin: make([]string, n),
		session: rt.TaintedBy(sub.Session)}
	any := false
	var reads []string
	for i := range actions {
		if actions[i].Type == protocol.ActionToolCall && rt.untrusted(actions[i].Tool, intents...) {
			an.untrusted[i] = true
			any = true
		}
		reads = append(reads, taintReads(&actions[i])...)
	}
	var ledger map[string]protocol.TaintEntry
	if len(reads) > 0 {
		var err error
		if ledger, err = rt.integ.ledger.store.Lookup(ctx, sub.Tenant, reads); err != nil {
			return nil, fmt.Errorf("the taint ledger cannot be read, so whether this proposal reads tainted keys cannot be told: %w", err)
		}
	}
	if !any && len(ledger) == 0 {
		return an, nil // nothing can be tainted: the common case costs one pass
	}
	if g == nil {
		g = buildGraph(actions)
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
			if e, ok := ledger[k]; ok {
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
			an.origin[i] = boundOrigin("tainted because " + an.influence[i])
		}
		mark[i] = done
	}
	for i := range actions {
		visit(i)
	}
	return an, nil
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
func (rt *Runtime) taintGuard(ctx context.Context, an *taintAnalysis, writes bool) error {
	if an == nil || !slices.Contains(an.tainted, true) && !(an.session != "" && writes) {
		return nil
	}
	return rt.taintRoom(ctx)
}

// taintRoom refuses more taint while the ledger holds max_tainted_keys.
func (rt *Runtime) taintRoom(ctx context.Context) error {
	full, err := rt.integ.ledger.full(ctx)
	if err != nil {
		return fmt.Errorf("the taint ledger cannot be read, so the taint this work would leave cannot be recorded: %w", err)
	}
	if full {
		return &LimitError{Msg: fmt.Sprintf("the taint ledger holds %d keys (max_tainted_keys) and this would taint more: a person clears keys with taint.clear, or a trusted write replaces them", rt.opts.MaxTaintedKeys)}
	}
	return nil
}

// noteTaint records in the ledger the keys this proposal's succeeded
// actions wrote: tainted ones taint them, trusted ones clear them. Keys a
// session that had received tainted data writes are tainted whatever the
// action. A succeeded tainted action's output went back to the client, so
// its session has received tainted data from then on.
func (rt *Runtime) noteTaint(ctx context.Context, sub *Submission, res *protocol.ProposalResult) {
	an := sub.taint
	if an == nil {
		return
	}
	session := an.session
	if session == "" {
		session = rt.TaintedBy(sub.Session)
	}
	var taint map[string]protocol.TaintEntry
	var clean []string
	at := time.Now().UTC().Format(time.RFC3339Nano)
	for i, r := range res.Results {
		if r.Status != protocol.StatusSucceeded || i >= len(an.tainted) {
			continue
		}
		a := &sub.Proposal.Actions[i]
		origin := an.origin[i]
		if an.tainted[i] {
			rt.noteTainted(sub.Session, fmt.Sprintf("proposal %s action '%s' %s", sub.Proposal.ID, a.ID, origin))
		} else if session != "" {
			origin = "written by connection " + sub.Session.ID + ", which had received tainted data: " + session
		}
		if len(r.StateChanges) == 0 {
			continue
		}
		if origin == "" {
			for k := range r.StateChanges {
				clean = append(clean, k)
			}
			continue
		}
		if taint == nil {
			taint = map[string]protocol.TaintEntry{}
		}
		for k := range r.StateChanges {
			taint[k] = protocol.TaintEntry{Key: k, ProposalID: sub.Proposal.ID, ActionID: a.ID, Tool: a.Tool, Origin: origin, At: at}
		}
	}
	if taint != nil || clean != nil {
		if err := rt.integ.ledger.update(ctx, sub.Tenant, taint, clean); err != nil {
			res.Warnings = append(res.Warnings, "the taint ledger could not record this proposal's writes (a key it tainted may read as clean, a key it cleared stays tainted): "+err.Error())
		}
	}
}
