package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/protocol"
)

// methods is the table of client → server methods. session.auth is absent:
// it is decided on the read loop (see conn.Handle).
var methods map[string]method

func init() {
	methods = map[string]method{
		protocol.MethodServerHandshake: {handle: (*conn).handleHandshake},
		protocol.MethodSessionInit:     {handle: (*conn).sessionInit},

		protocol.MethodToolsRegister:   {handle: (*conn).toolsRegister},
		protocol.MethodToolsList:       {handle: (*conn).toolsList},
		protocol.MethodToolsUnregister: {handle: (*conn).toolsUnregister},

		protocol.MethodStateGet:      {handle: (*conn).stateGet},
		protocol.MethodStateSet:      {handle: (*conn).stateSet},
		protocol.MethodStateExists:   {handle: (*conn).stateExists},
		protocol.MethodStateKeys:     {handle: (*conn).stateKeys},
		protocol.MethodStateSnapshot: {handle: (*conn).stateSnapshot},

		protocol.MethodProposalSubmit: {handle: (*conn).proposalSubmit, deadline: proposalDeadline},

		protocol.MethodEventsCount:       {handle: (*conn).eventsCount},
		protocol.MethodEventsQuery:       {handle: (*conn).eventsQuery},
		protocol.MethodEventsChainEnable: {handle: (*conn).eventsChainEnable},
		protocol.MethodEventsChainVerify: {handle: (*conn).eventsChainVerify},
		protocol.MethodEventsRetention:   {handle: (*conn).eventsRetention},
		protocol.MethodMetricsSummary:    {handle: (*conn).metricsSummary},
	}
}

func (c *conn) sessionInit(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SessionInitParams
	const shape = "{tools: ToolDefinition[], policies?: PolicyDefinition[]}"
	if err := optionalParams(params, &p, shape); err != nil {
		return nil, err
	}
	if len(p.Policies) > 0 {
		return nil, invalidParams("session.init: policies are not supported by this daemon yet; register the tools alone")
	}
	n, err := c.sess.Tools.Register(p.Tools)
	if err != nil {
		return nil, invalidParams("session.init: %v", err)
	}
	return protocol.SessionInitResult{SessionID: c.id, ToolsRegistered: n}, nil
}
