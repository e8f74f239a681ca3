package protocol

import "encoding/json"

// StateKeyParams are the params of state.get and state.exists. With
// with_version, state.get answers a StateVersioned.
type StateKeyParams struct {
	Key         string `json:"key"`
	TenantID    string `json:"tenant_id,omitempty"`
	WithVersion bool   `json:"with_version,omitempty"`
}

// StateSetParams are the params of state.set. A missing value sets null.
type StateSetParams struct {
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value,omitempty"`
	TenantID string          `json:"tenant_id,omitempty"`
}

// TenantParams are the params of state.keys and state.snapshot.
type TenantParams struct {
	TenantID string `json:"tenant_id,omitempty"`
}
