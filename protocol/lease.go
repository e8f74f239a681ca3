package protocol

// LeaseAcquireParams are the params of lease.acquire. TTLMs absent takes
// the daemon's lease_default_ttl.
type LeaseAcquireParams struct {
	AgentID string `json:"agent_id"`
	TTLMs   *int64 `json:"ttl_ms,omitempty"`
}

// LeaseRenewParams are the params of lease.renew.
type LeaseRenewParams struct {
	AgentID string `json:"agent_id"`
	Epoch   uint64 `json:"epoch"`
	TTLMs   *int64 `json:"ttl_ms,omitempty"`
}

// LeaseReleaseParams are the params of lease.release.
type LeaseReleaseParams struct {
	AgentID string `json:"agent_id"`
	Epoch   uint64 `json:"epoch"`
}

// Lease is an agent id's lease: lease.acquire's and lease.renew's result,
// and lease.release's and lease.status's. Epoch is the fencing token: it
// grows by one on every acquire and is never handed out twice; a renew
// keeps it. Holder is the principal holding the lease ("agent X", "host",
// "plain client"), null when it is free; ExpiresAtMs is the expiry in Unix
// milliseconds, null when free. Epoch 0 is an id never acquired.
type Lease struct {
	AgentID     string  `json:"agent_id"`
	Holder      *string `json:"holder" jsonschema:"nullable"`
	Epoch       uint64  `json:"epoch"`
	ExpiresAtMs *int64  `json:"expires_at_ms" jsonschema:"nullable"`
}
