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
// holds a list, in the order the runs started.
type running struct {
	mu   sync.Mutex
	byID map[string]*runningProposal // the first run of each id
}

// runningProposal is one Submit in progress.
type runningProposal struct {
	session   string // the submitting connection
	cancel    context.CancelCauseFunc
	cancelled bool             // Cancel has stopped it once; later calls leave it be
	next      *runningProposal // the next run of the same id
}

// track registers a run of proposal id submitted by session; untrack
// unregisters it.
func (rg *running) track(id, session string, cancel context.CancelCauseFunc) *runningProposal {
	rp := &runningProposal{session: session, cancel: cancel}
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if rg.byID == nil {
		rg.byID = make(map[string]*runningProposal)
	}
	link := rg.byID[id]
	if link == nil {
		rg.byID[id] = rp
		return rp
	}
	for link.next != nil {
		link = link.next
	}
	link.next = rp
	return rp
}

// untrack unregisters rp, a run of proposal id.
func (rg *running) untrack(id string, rp *runningProposal) {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	first := rg.byID[id]
	if first == rp {
		if rp.next == nil {
			delete(rg.byID, id)
		} else {
			rg.byID[id] = rp.next
		}
		return
	}
	for link := first; link != nil; link = link.next {
		if link.next == rp {
			link.next = rp.next
			return
		}
	}
}

// take marks as cancelled, and returns, the runs of id that by may cancel
// and that no earlier Cancel stopped.
func (rg *running) take(id, by string, host bool) []*runningProposal {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	var out []*runningProposal
	for rp := rg.byID[id]; rp != nil; rp = rp.next {
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
