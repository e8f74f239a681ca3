package rpc

import (
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// Every door a person decides a parked action through takes the engine's
// one decision path: the decision is recorded on the ledger once, the host
// row is resolved once, by the deciding connection, and the action runs. A
// second decision on the row that was already resolved (the same person
// through host.resolve_approval again, or through permission.approve)
// resolves nothing again.
func TestEveryApprovalDoorResolvesTheHostRowOnce(t *testing.T) {
	approved := true
	byID := func(a host.Approval) (string, any) {
		return protocol.MethodHostResolveApproval, protocol.HostResolveParams{ApprovalID: a.ID, Approved: &approved, Notes: "release window"}
	}
	byFingerprint := func(a host.Approval) (string, any) {
		fp, _ := a.Context["fingerprint"].(string)
		return protocol.MethodPermissionApprove, protocol.DecisionParams{Fingerprint: fp, RequiredTier: "full_access", Reason: "release window"}
	}
	for _, door := range []struct {
		name          string
		first, second func(host.Approval) (string, any)
		recorded      int // ledger decisions after both
	}{
		{"host.resolve_approval twice", byID, byID, 1}, // the row is no longer pending: nothing to record
		{"host.resolve_approval then permission.approve", byID, byFingerprint, 2},
		{"permission.approve then host.resolve_approval", byFingerprint, byID, 1},
	} {
		t.Run(door.name, func(t *testing.T) {
			ts := startHostServer(t, testTimeout, Options{})
			h, _ := subscribeHost(t, ts, &client.Options{})
			runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
			ch := submitAsync(t, runner.Client, deployPlan())
			a := approvalOf(t, h.next(t, host.KindApprovalRequested))

			method, params := door.first(a)
			if err := h.Call(ctxT(t), method, params, nil); err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			if st := statuses(awaitResult(t, ch, 2)); st["ship"] != protocol.StatusSucceeded {
				t.Fatalf("after %s: %v", method, st)
			}
			method, params = door.second(a)
			if err := h.Call(ctxT(t), method, params, nil); err != nil {
				t.Fatalf("again, %s: %v", method, err)
			}

			var recorded protocol.EventsQueryResult
			mustCall(t, runner, protocol.MethodEventsQuery, protocol.EventsQueryParams{Kinds: []protocol.EventKind{engine.EventApprovalRecorded}}, &recorded)
			if recorded.Count != door.recorded {
				t.Fatalf("%d decisions recorded on the ledger, want %d: %+v", recorded.Count, door.recorded, recorded.Events)
			}
			reviewer, _ := recorded.Events[len(recorded.Events)-1].Data["reviewer"].(string) // the first, oldest
			var evs protocol.HostEventsResult
			mustCall(t, runner, protocol.MethodHostEvents, protocol.HostEventsParams{Limit: 1000}, &evs)
			var resolved []host.Approval
			for _, ev := range evs.Events {
				if ev.Kind == host.KindApprovalResolved {
					resolved = append(resolved, approvalOf(t, ev))
				}
			}
			if len(resolved) != 1 || resolved[0].ID != a.ID || resolved[0].Status != host.ApprovalApproved {
				t.Fatalf("approval.resolved events %+v, want one for %s", resolved, a.ID)
			}
			if !strings.HasPrefix(reviewer, "conn:") || resolved[0].ResolvedBy != reviewer {
				t.Fatalf("the row was resolved by %q, the decision recorded by %q", resolved[0].ResolvedBy, reviewer)
			}
		})
	}
}
