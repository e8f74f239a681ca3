package engine

import (
	"context"
	"fmt"
	"sync"
)

// DefaultCancelReason stands in for a proposal.cancel that gives no reason.
const DefaultCancelReason = "no reason given"

// running is the registry of proposals being executed, so that proposal.cancel
// can stop them. Proposal ids come from clients and may repeat, so each id
// holds a list.
type running struct {
	mu   sync.Mutex
	byID map[string][]*runningProposal
}

// runningProposal is one Submit in progress.
type runningProposal struct {
	session   string // the submitting connection
	cancel    context.CancelCauseFunc
	cancelled bool // Cancel has stopped it once; later calls leave it be
}

// track registers a run of proposal id submitted by session; the returned
// func unregisters it.
func (rg *running) track(id, session string, cancel context.CancelCauseFunc) (untrack func()) {
	rp := &runningProposal{session: session, cancel: cancel}
	rg.mu.Lock()
	if rg.byID == nil {
		rg.byID = make(map[string][]*runningProposal)
	}
	rg.byID[id] = append(rg.byID[id], rp)
	rg.mu.Unlock()
	return func() {
		rg.mu.Lock()
		defer rg.mu.Unlock()
		list := rg.byID[id]
		for i, x := range list {
			if x == rp {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(rg.byID, id)
		} else {
			rg.byID[id] = list
		}
	}
}

// take marks as cancelled, and returns, the runs of id that by may cancel
// and that no earlier Cancel stopped.
func (rg *running) take(id, by string, host bool) []*runningProposal {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	var out []*runningProposal
	for _, rp := range rg.byID[id] {
		if rp.cancelled || (rp.session != by && !host) {
			continue
		}
		rp.cancelled = true
		out = append(out, rp)
	}
	return out
}

// Cancel stops every running proposal with this id that the session by
// submitted, or every one of them when host is set (a host-role connection).
// The proposal's context ends with the cause "cancelled: <reason>": running
// callbacks get tools.cancel with that text, actions not started end
// skipped, running ones failed, and the proposal rolls back as on any
// failure; its running stream handles end cancelled, their tools told. It reports whether it stopped anything; an unknown or finished
// id, or another connection's proposal, is false.
func (rt *Runtime) Cancel(proposalID, reason, by string, host bool) (cancelled bool) {
	if reason == "" {
		reason = DefaultCancelReason
	}
	runs := rt.running.take(proposalID, by, host)
	for _, rp := range runs {
		rt.Events.Append(Event{Kind: EventProposalCancelled, ProposalID: proposalID, Connection: rp.session,
			Data: map[string]any{"reason": reason, "by": by, "host": host}})
		rp.cancel(fmt.Errorf("cancelled: %s", reason))
	}
	// Its detached tools may run on after the proposal has finished.
	handles := rt.Streams.CancelProposal(proposalID, by, host, "cancelled: "+reason)
	return len(runs) > 0 || handles > 0
}
