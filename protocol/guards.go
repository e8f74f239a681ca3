package protocol

// Checkpoints and capability sets: methods and shapes of the guardrails
// that are ours (upstream has them in-process only).
const (
	MethodCheckpointSave    = "checkpoint.save"
	MethodCheckpointList    = "checkpoint.list"
	MethodCheckpointRestore = "checkpoint.restore" // needs full_access through the approval ledger
	MethodCheckpointDelete  = "checkpoint.delete"

	MethodSessionCapabilitiesSet = "session.capabilities.set" // narrow only, unless the host role
	MethodSessionCapabilitiesGet = "session.capabilities.get"
)

// CheckpointSaveParams are the params of checkpoint.save. Without a
// tenant_id every namespace is saved.
type CheckpointSaveParams struct {
	Name     string  `json:"name,omitempty"`
	TenantID *string `json:"tenant_id,omitempty"`
}

// CheckpointSaveResult is the reply to checkpoint.save.
type CheckpointSaveResult struct {
	CheckpointID string `json:"checkpoint_id"`
	Keys         int    `json:"keys"`
	Bytes        int64  `json:"bytes"`
	CreatedAt    string `json:"created_at"`
}

// CheckpointIDParams are the params of checkpoint.restore and
// checkpoint.delete.
type CheckpointIDParams struct {
	CheckpointID string `json:"checkpoint_id"`
}

// CheckpointRestoreResult is the reply to checkpoint.restore: the number of
// keys state holds from the checkpoint.
type CheckpointRestoreResult struct {
	RestoredKeys int `json:"restored_keys"`
}

// CapabilitySet is what session.capabilities.set takes and .get returns.
// Tools are names or prefixes ending in '*', state_keys prefixes or exact
// keys. In .set an omitted field keeps what is in force; in .get null means
// unrestricted, [] nothing allowed and max_actions 0 the daemon's limit.
type CapabilitySet struct {
	Tools      []string `json:"tools" jsonschema:"nullable"`
	StateKeys  []string `json:"state_keys" jsonschema:"nullable"`
	MaxActions int      `json:"max_actions"`
}

// CapabilitiesSetParams are the params of session.capabilities.set: a
// CapabilitySet whose every field may be omitted.
type CapabilitiesSetParams struct {
	Tools      []string `json:"tools,omitempty"`
	StateKeys  []string `json:"state_keys,omitempty"`
	MaxActions int      `json:"max_actions,omitempty"`
}

// CheckpointInfo is one checkpoint in checkpoint.list.
type CheckpointInfo struct {
	CheckpointID string  `json:"checkpoint_id"`
	Name         string  `json:"name,omitempty"`
	TenantID     *string `json:"tenant_id,omitempty"`
	CreatedAt    string  `json:"created_at"`
	Keys         int     `json:"keys"`
	Bytes        int64   `json:"bytes"`
	Corrupt      string  `json:"corrupt,omitempty"` // why the file cannot be restored
}

// CheckpointListResult is the reply to checkpoint.list, oldest first.
type CheckpointListResult struct {
	Checkpoints []CheckpointInfo `json:"checkpoints"`
}

// CheckpointDeleteResult is the reply to checkpoint.delete.
type CheckpointDeleteResult struct {
	Deleted string `json:"deleted"`
}
