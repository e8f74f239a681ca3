package protocol

// Replanning over the wire: replan.set_config configures a connection's loop,
// replan.propose asks the submitting client for a replacement proposal.
const (
	MethodReplanSetConfig = "replan.set_config" // client → server
	MethodReplanPropose   = "replan.propose"    // server → client request: answer an ActionProposal, or null to give up
)

// ReplanConfig is upstream's flat replan.set_config shape. The zero value
// (max_replans 0) turns replanning off.
type ReplanConfig struct {
	MaxReplans          int    `json:"max_replans"`
	DelayMs             uint64 `json:"delay_ms,omitempty"`
	VerifyBeforeExecute bool   `json:"verify_before_execute,omitempty"`
	ReplanOnRejected    bool   `json:"replan_on_rejected,omitempty"`
}

// ReplanProposeParams are the params of the replan.propose callback: what
// the attempt that just ended did, after its rollback.
type ReplanProposeParams struct {
	ProposalID       string          `json:"proposal_id"` // the original proposal's id
	Attempt          int             `json:"attempt"`     // the replan asked for, from 1
	Failed           []ReplanFailure `json:"failed"`
	Succeeded        []string        `json:"succeeded"`          // action ids
	StateKeysWritten []string        `json:"state_keys_written"` // written, then rolled back
	RequestID        string          `json:"request_id"`         // the JSON-RPC id, as tools.cancel names it
}

// ReplanFailure is one action of the last attempt that failed or was
// rejected, or one verify error of an invalid replacement.
type ReplanFailure struct {
	ActionID string       `json:"action_id"`
	Tool     string       `json:"tool,omitempty"`
	Status   ActionStatus `json:"status"`
	Error    string       `json:"error"`
}

// Outcomes of one replan attempt.
const (
	ReplanSucceeded = "succeeded"
	ReplanFailed    = "failed"
	ReplanRejected  = "rejected"
	ReplanInvalid   = "invalid" // verify_before_execute refused it; it did not run
)

// Replan is one replacement proposal the loop tried.
type Replan struct {
	Attempt    int    `json:"attempt"`
	ProposalID string `json:"proposal_id"` // the replacement's id
	Outcome    string `json:"outcome"`
	Error      string `json:"error,omitempty"`
}
