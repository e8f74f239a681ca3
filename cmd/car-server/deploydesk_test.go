package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// deployDesk is a daemon with a person watching (a host subscriber), so
// that a full_access deploy_service parks for them, and a runner that
// registers and answers deploy_service. The approval tests share it.
type deployDesk struct {
	person, runner *client.Client
}

func newDeployDesk(t *testing.T, d *daemon) *deployDesk {
	t.Helper()
	dd := &deployDesk{person: d.dial(t), runner: d.dial(t)}
	t.Cleanup(func() { dd.person.Close(); dd.runner.Close() })
	if err := dd.person.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}
	dd.runner.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"deployed": true}, nil
	})
	if err := dd.runner.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "deploy_service"}}, nil); err != nil {
		t.Fatal(err)
	}
	return dd
}

// deployPlan is the proposal the runner submits: one deploy to prod.
var deployPlan = map[string]any{"proposal": map[string]any{"actions": []any{
	map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}},
}}}

// submit sends deployPlan without waiting; done gets the call's error once
// res holds its result.
func (dd *deployDesk) submit(t *testing.T) (done chan error, res *protocol.ProposalResult) {
	done, res = make(chan error, 1), &protocol.ProposalResult{}
	go func() { done <- dd.runner.Call(ctxT(t), protocol.MethodProposalSubmit, deployPlan, res) }()
	return done, res
}

// pending waits for a pending approval request other than the one with id
// not, and returns it.
func (dd *deployDesk) pending(t *testing.T, not string) host.Approval {
	t.Helper()
	var waiting host.Approval
	testwait.Eventually(t, waitLimit, "the proposal's approval request", func() bool {
		var list protocol.HostApprovalsResult
		if err := dd.person.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil {
			return false
		}
		for _, a := range list.Approvals {
			if a.ID != not && a.Status == host.ApprovalPending {
				waiting = a
				return true
			}
		}
		return false
	})
	return waiting
}
