package protocol

// The harness config: daemon-wide defaults of the retry loop and of the
// replan budget, read with harness.get and changed with harness.set and
// harness.update.
const (
	MethodHarnessGet    = "harness.get"
	MethodHarnessSet    = "harness.set"
	MethodHarnessUpdate = "harness.update"
)

// Bounds of the harness config's fields.
const (
	HarnessMaxRetriesLimit         = MaxRetriesLimit // as an action's own max_retries
	HarnessRetryBackoffLimit       = 60_000          // retry_backoff_ms
	HarnessPlanningMaxReplansLimit = 32              // as replan.set_config's max_replans
)

// HarnessConfig is the harness config.
//   - MaxRetries: the retries of an action with failure_behavior retry that
//     does not carry max_retries itself (default 3, the IR's default).
//   - RetryBackoffMs: the wait before the first retry, doubled per retry up
//     to the daemon's cap (default the daemon's retry base, 100).
//   - PlanningMaxReplans: the replan budget of a proposal submitted on a
//     connection that did not call replan.set_config (default 0: none).
type HarnessConfig struct {
	MaxRetries         int64 `json:"max_retries"`
	RetryBackoffMs     int64 `json:"retry_backoff_ms"`
	PlanningMaxReplans int64 `json:"planning_max_replans"`
}

// HarnessFields names some of the harness config's fields: the params of
// harness.set, and the set and add of harness.update.
type HarnessFields struct {
	MaxRetries         *int64 `json:"max_retries,omitempty"`
	RetryBackoffMs     *int64 `json:"retry_backoff_ms,omitempty"`
	PlanningMaxReplans *int64 `json:"planning_max_replans,omitempty"`
}

// HarnessUpdateParams are the params of harness.update: set replaces the
// named fields, then add adds to the named fields, in one atomic step.
type HarnessUpdateParams struct {
	Set *HarnessFields `json:"set,omitempty"`
	Add *HarnessFields `json:"add,omitempty"`
}
