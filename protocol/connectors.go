package protocol

// Methods of the daemon's MCP connectors: MCP servers the daemon is a client
// of, whose enabled tools every session sees as mcp_<slug>_<tool>.
const (
	MethodConnectorsAdd          = "connectors.add"
	MethodConnectorsAddStdio     = "connectors.add_stdio"
	MethodConnectorsList         = "connectors.list"
	MethodConnectorsTools        = "connectors.tools"
	MethodConnectorsEnableTools  = "connectors.enable_tools"
	MethodConnectorsDisableTools = "connectors.disable_tools"
	MethodConnectorsRefresh      = "connectors.refresh"
	MethodConnectorsRemove       = "connectors.remove"
)

// ConnectorStatus is one connector as the daemon sees it. It never holds a
// header value or an environment value: those are secrets.
type ConnectorStatus struct {
	Slug         string `json:"slug"`
	Name         string `json:"name"`
	URL          string `json:"url,omitempty"`     // a Streamable HTTP server
	Command      string `json:"command,omitempty"` // a stdio server: the program (its args are not shown: they may hold a secret)
	Connected    bool   `json:"connected"`
	ToolCount    int    `json:"tool_count"`
	EnabledCount int    `json:"enabled_count"`
	LastError    string `json:"last_error,omitempty"`
	// FromFile: declared in the operator's connectors.toml, so it cannot be
	// removed over the wire.
	FromFile bool `json:"from_file,omitempty"`
	// Protocol is the MCP protocol revision the server and the daemon agreed on.
	Protocol string `json:"protocol,omitempty"`
}

// ConnectorsAddParams are the params of connectors.add: a Streamable HTTP
// MCP server. Headers are secret values (Authorization, API keys): kept in
// a file of their own, never returned, logged or put in events.
type ConnectorsAddParams struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ConnectorsAddStdioParams are the params of connectors.add_stdio: an MCP
// server the daemon runs as a child process and speaks to over stdio. Env
// values are kept like headers: never returned.
type ConnectorsAddStdioParams struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// ConnectorsListResult is the reply to connectors.list, sorted by slug.
type ConnectorsListResult struct {
	Connectors []ConnectorStatus `json:"connectors"`
}

// ConnectorSlugParams name one connector.
type ConnectorSlugParams struct {
	Slug string `json:"slug"`
}

// ConnectorToolsParams name tools of one connector by their MCP names.
type ConnectorToolsParams struct {
	Slug  string   `json:"slug"`
	Tools []string `json:"tools"`
}

// ConnectorTool is one tool a connector's server lists.
type ConnectorTool struct {
	Name        string `json:"name"`      // the server's name
	Canonical   string `json:"canonical"` // mcp_<slug>_<name>: the name a proposal calls
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	// Tier is the classification its annotations give (read_only,
	// sandbox_edit, full_access); Idempotent comes from idempotentHint.
	Tier       string `json:"tier,omitempty"`
	Idempotent bool   `json:"idempotent,omitempty"`
	// Error says why the tool cannot be enabled (a name outside
	// [A-Za-z0-9_-], a schema past the bounds); empty when it can.
	Error string `json:"error,omitempty"`
}

// ConnectorEnableResult is the reply to connectors.enable_tools: the
// connector's enabled tools after the call, by their MCP names.
type ConnectorEnableResult struct {
	Enabled []string `json:"enabled"`
}

// ConnectorDisableResult is the reply to connectors.disable_tools: the
// tools the call disabled.
type ConnectorDisableResult struct {
	Disabled []string `json:"disabled"`
}

// ConnectorRemoveResult is the reply to connectors.remove.
type ConnectorRemoveResult struct {
	Removed string `json:"removed"`
}
