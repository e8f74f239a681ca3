package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// methods is the table of client → server methods. session.auth is absent:
// it is decided on the read loop (see conn.Handle). protocol.Methods
// describes each one for openrpc.json; a test keeps the two in step.
var methods map[string]method

func init() {
	methods = map[string]method{
		protocol.MethodServerHandshake:   {handle: (*conn).handleHandshake},
		protocol.MethodSessionInit:       {handle: (*conn).sessionInit},
		protocol.MethodServerStatus:      {handle: (*conn).serverStatus},
		protocol.MethodApprovalsList:     {handle: (*conn).approvalsList},
		protocol.MethodServerConnections: {handle: (*conn).serverConnections},
		protocol.MethodRPCDiscover:       {handle: (*conn).rpcDiscover},

		protocol.MethodSessionPolicyOpen:  {handle: (*conn).sessionPolicyOpen},
		protocol.MethodSessionPolicyClose: {handle: (*conn).sessionPolicyClose},
		protocol.MethodPolicyRegister:     {handle: (*conn).policyRegister},
		protocol.MethodPolicyUnregister:   {handle: (*conn).policyUnregister},
		protocol.MethodPolicyList:         {handle: (*conn).policyList},

		protocol.MethodToolsRegister: {handle: (*conn).toolsRegister},
		protocol.MethodToolsList:     {handle: (*conn).toolsList},
		protocol.MethodToolsFeedback: {handle: (*conn).toolsFeedback},

		protocol.MethodHarnessGet:      {handle: (*conn).harnessGet},
		protocol.MethodHarnessSet:      {handle: (*conn).harnessSet},
		protocol.MethodHarnessUpdate:   {handle: (*conn).harnessUpdate},
		protocol.MethodToolsUnregister: {handle: (*conn).toolsUnregister},

		protocol.MethodToolsPoll:              {handle: (*conn).toolsPoll},
		protocol.MethodToolsCancel:            {handle: (*conn).toolsCancel},
		protocol.MethodToolsStreamSubscribe:   {handle: (*conn).toolsStreamSubscribe},
		protocol.MethodToolsStreamUnsubscribe: {handle: (*conn).toolsStreamUnsubscribe},
		protocol.MethodToolsHandles:           {handle: (*conn).toolsHandles},

		protocol.MethodStateGet:      {handle: (*conn).stateGet},
		protocol.MethodStateSet:      {handle: (*conn).stateSet},
		protocol.MethodStateExists:   {handle: (*conn).stateExists},
		protocol.MethodStateKeys:     {handle: (*conn).stateKeys},
		protocol.MethodStateSnapshot: {handle: (*conn).stateSnapshot},

		protocol.MethodCheckpointSave:    {handle: (*conn).checkpointSave},
		protocol.MethodCheckpointList:    {handle: (*conn).checkpointList},
		protocol.MethodCheckpointRestore: {handle: (*conn).checkpointRestore},
		protocol.MethodCheckpointDelete:  {handle: (*conn).checkpointDelete},

		protocol.MethodSessionCapabilitiesSet: {handle: (*conn).capabilitiesSet},
		protocol.MethodSessionCapabilitiesGet: {handle: (*conn).capabilitiesGet},

		protocol.MethodSessionIntentSet:           {handle: (*conn).intentSet},
		protocol.MethodSessionIntentGet:           {handle: (*conn).intentGet},
		protocol.MethodSessionIntentClear:         {handle: (*conn).intentClear},
		protocol.MethodTaintList:                  {handle: (*conn).taintList},
		protocol.MethodTaintClear:                 {handle: (*conn).taintClear},
		protocol.MethodSessionTransactionCheckSet: {handle: (*conn).transactionCheckSet},
		protocol.MethodReceiptsVerify:             {handle: (*conn).receiptsVerify},

		protocol.MethodProposalSubmit: {handle: (*conn).proposalSubmit, budgeted: true, followsClient: true},
		protocol.MethodProposalCancel: {handle: (*conn).proposalCancel},
		protocol.MethodProposalScore:  {handle: (*conn).proposalScore},
		protocol.MethodProposalPlan:   {handle: (*conn).proposalPlan, budgeted: true, followsClient: true},

		protocol.MethodReplanSetConfig:  {handle: (*conn).replanSetConfig},
		protocol.MethodSessionBudgetSet: {handle: (*conn).sessionBudgetSet},

		protocol.MethodMultiSwarm:      {handle: (*conn).multiSwarm, followsClient: true},
		protocol.MethodMultiPipeline:   {handle: (*conn).multiPipeline, followsClient: true},
		protocol.MethodMultiSupervisor: {handle: (*conn).multiSupervisor, followsClient: true},
		protocol.MethodMultiMapReduce:  {handle: (*conn).multiMapReduce, followsClient: true},
		protocol.MethodMultiVote:       {handle: (*conn).multiVote, followsClient: true},
		protocol.MethodMultiTournament: {handle: (*conn).multiTournament, followsClient: true},
		protocol.MethodMultiSubtask:    {handle: (*conn).multiSubtask, followsClient: true},

		protocol.MethodVerify:           {handle: (*conn).verify},
		protocol.MethodSimulate:         {handle: (*conn).simulate},
		protocol.MethodEquivalent:       {handle: (*conn).equivalent},
		protocol.MethodOptimize:         {handle: (*conn).optimize},
		protocol.MethodVerifyMonteCarlo: {handle: (*conn).monteCarlo, followsClient: true},

		protocol.MethodPermissionGetTier:  {handle: (*conn).permissionGetTier},
		protocol.MethodPermissionSetTier:  {handle: (*conn).permissionSetTier},
		protocol.MethodPermissionClassify: {handle: (*conn).permissionClassify},
		protocol.MethodPermissionEvaluate: {handle: (*conn).permissionEvaluate},
		protocol.MethodPermissionPending:  {handle: (*conn).permissionPending},
		protocol.MethodPermissionApprove:  {handle: (*conn).permissionApprove},
		protocol.MethodPermissionReject:   {handle: (*conn).permissionReject},

		protocol.MethodSupervisionSubscribe:   {handle: (*conn).supervisionSubscribe},
		protocol.MethodSupervisionUnsubscribe: {handle: (*conn).supervisionUnsubscribe},
		protocol.MethodSupervisionPending:     {handle: (*conn).supervisionPending},
		protocol.MethodSupervisionDecide:      {handle: (*conn).supervisionDecide},

		protocol.MethodHostSubscribe:       {handle: (*conn).hostSubscribe},
		protocol.MethodHostUnsubscribe:     {handle: (*conn).hostUnsubscribe},
		protocol.MethodHostAgents:          {handle: (*conn).hostAgents},
		protocol.MethodHostApprovals:       {handle: (*conn).hostApprovals},
		protocol.MethodHostEvents:          {handle: (*conn).hostEventsList},
		protocol.MethodHostRegisterAgent:   {handle: (*conn).hostRegisterAgent},
		protocol.MethodHostUnregisterAgent: {handle: (*conn).hostUnregisterAgent},
		protocol.MethodHostSetStatus:       {handle: (*conn).hostSetStatus},
		protocol.MethodHostNotify:          {handle: (*conn).hostNotify},
		protocol.MethodHostRequestApproval: {handle: (*conn).hostRequestApproval},
		protocol.MethodHostResolveApproval: {handle: (*conn).hostResolveApproval},

		protocol.MethodEventsCount:       {handle: (*conn).eventsCount},
		protocol.MethodEventsQuery:       {handle: (*conn).eventsQuery},
		protocol.MethodEventsChainEnable: {handle: (*conn).eventsChainEnable},
		protocol.MethodEventsChainVerify: {handle: (*conn).eventsChainVerify},
		protocol.MethodEventsRetention:   {handle: (*conn).eventsRetention},
		protocol.MethodEventsSubscribe:   {handle: (*conn).eventsSubscribe},
		protocol.MethodEventsUnsubscribe: {handle: (*conn).eventsUnsubscribe},
		protocol.MethodMetricsSummary:    {handle: (*conn).metricsSummary},
		protocol.MethodMetricsAlerts:     {handle: (*conn).metricsAlerts},
		protocol.MethodEventsCostByAgent: {handle: (*conn).eventsCostByAgent},

		protocol.MethodRunsStart:       {handle: (*conn).runsStart},
		protocol.MethodRunsComplete:    {handle: (*conn).runsComplete},
		protocol.MethodRunsRecordTurns: {handle: (*conn).runsRecordTurns},
		protocol.MethodRunsSubscribe:   {handle: (*conn).runsSubscribe},
		protocol.MethodRunsUnsubscribe: {handle: (*conn).runsUnsubscribe},
		protocol.MethodRunsList:        {handle: (*conn).runsList},
		protocol.MethodRunsGetTrace:    {handle: (*conn).runsGetTrace},

		protocol.MethodAgentPermissionsGet:        {handle: (*conn).agentPermissionsGet},
		protocol.MethodAgentPermissionsSet:        {handle: (*conn).agentPermissionsSet},
		protocol.MethodAgentPermissionsSetDefault: {handle: (*conn).agentPermissionsSetDefault},
		protocol.MethodAgentPermissionsReset:      {handle: (*conn).agentPermissionsReset},
		protocol.MethodAgentPermissionsEvaluate:   {handle: (*conn).agentPermissionsEvaluate},
		protocol.MethodAgentsRevoke:               {handle: (*conn).agentsRevoke},

		protocol.MethodLeaseAcquire: {handle: (*conn).leaseAcquire},
		protocol.MethodLeaseRenew:   {handle: (*conn).leaseRenew},
		protocol.MethodLeaseRelease: {handle: (*conn).leaseRelease},
		protocol.MethodLeaseStatus:  {handle: (*conn).leaseStatus},

		protocol.MethodConnectorsAdd:          {handle: (*conn).connectorsAdd},
		protocol.MethodConnectorsAddStdio:     {handle: (*conn).connectorsAddStdio},
		protocol.MethodConnectorsList:         {handle: (*conn).connectorsList},
		protocol.MethodConnectorsTools:        {handle: (*conn).connectorsTools},
		protocol.MethodConnectorsEnableTools:  {handle: (*conn).connectorsEnableTools},
		protocol.MethodConnectorsDisableTools: {handle: (*conn).connectorsDisableTools},
		protocol.MethodConnectorsRefresh:      {handle: (*conn).connectorsRefresh},
		protocol.MethodConnectorsRemove:       {handle: (*conn).connectorsRemove},
	}
}

func (c *conn) sessionInit(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SessionInitParams
	const shape = "{tools: ToolDefinition[], policies?: PolicyDefinition[]}"
	if err := optionalParams(params, &p, shape); err != nil {
		return nil, err
	}
	defs := make([]protocol.PolicyDefinition, len(p.Policies))
	for i, raw := range p.Policies {
		if err := json.Unmarshal(raw, &defs[i]); err != nil {
			return nil, invalidParams("session.init: policies[%d] must be %s", i, policyDefinitionShape)
		}
		if _, err := policy.FromDefinition(defs[i]); err != nil {
			return nil, invalidParams("session.init: policies[%d]: %v; nothing was registered", i, err)
		}
		if defs[i].SessionID != "" {
			if _, err := c.policyLayer(defs[i].SessionID); err != nil {
				return nil, err
			}
		}
	}
	n, err := c.sess.Tools.Register(p.Tools)
	if err != nil {
		return nil, invalidParams("session.init: %v; nothing was registered", err)
	}
	for _, d := range defs {
		if err := c.registerPolicy(d); err != nil {
			return nil, err
		}
	}
	return protocol.SessionInitResult{SessionID: c.id, ToolsRegistered: n, PoliciesRegistered: len(defs)}, nil
}
