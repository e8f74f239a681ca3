package protocol

import "encoding/json"

// ToolSchema describes a tool a client registers. Every field of the IR's
// ToolSchema is kept and returned by tools.list, so what a tool accepts is part
// of the surface a client can prove. ToolDefinition (tools.register) is the
// same shape.
type ToolSchema struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters"`
	Returns      json.RawMessage `json:"returns,omitempty"`
	Idempotent   bool            `json:"idempotent"`
	CacheTTLSecs *uint64         `json:"cache_ttl_secs,omitempty"`
	RateLimit    *ToolRateLimit  `json:"rate_limit,omitempty"`
	// Source and Connector say where a daemon-wide tool comes from
	// ("mcp" and the connector's slug); tools.list fills them, and a
	// client's registration leaves them out.
	Source    string `json:"source,omitempty"`
	Connector string `json:"connector,omitempty"`
}

// ToolRateLimit bounds how often a tool may be dispatched: at most MaxCalls
// per IntervalSecs, as a token bucket.
type ToolRateLimit struct {
	MaxCalls     uint32  `json:"max_calls"`
	IntervalSecs float64 `json:"interval_secs"`
}

// ToolsListResult is the reply to tools.list; Tools is sorted by name.
type ToolsListResult struct {
	Tools []ToolSchema `json:"tools"`
	Count int          `json:"count"`
}

// ToolsUnregisterParams are the params of tools.unregister.
type ToolsUnregisterParams struct {
	Name string `json:"name"`
}

// ToolsUnregisterResult is the reply to tools.unregister; Removed is 0 when
// the tool was not registered.
type ToolsUnregisterResult struct {
	Unregistered string `json:"unregistered"`
	Removed      int    `json:"removed"`
}
