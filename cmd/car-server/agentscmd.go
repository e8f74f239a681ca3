package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/parslee-ai/car-server/config"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/postgres"
	"github.com/parslee-ai/car-server/protocol"
)

const agentsUsage = `usage:
  car-server agents issue-token AGENT_ID [--tenant T]... [--mcp-config]
                                             mint AGENT_ID's token and print it (only it) on stdout; replaces any
                                             earlier one (and closes the connection bound with it). The agent may
                                             use only the tenants named (--tenant '' is the default tenant); with
                                             no --tenant, the default tenant alone. --mcp-config prints instead a
                                             ready-to-paste MCP client configuration (the endpoint's url and the
                                             Authorization header with the token)
  car-server agents revoke AGENT_ID          refuse AGENT_ID's token from now on and close its live connection
  car-server agents list [--json]            the agents with a token and their tenants (never the tokens)

The daemon keeps only a hash of each token, with its tenants, in
$CAR_HOME/agent-tokens.json (0600), or, with store: postgres, in the shared database
(postgres_url), where every daemon reads it. It reads the hashes on every agent auth,
and notices a change to them within a second, closing the connection of an agent
whose token was revoked or replaced: no restart is needed. An agent presents its
token with session.auth {token, agent_id}. Tenants limit agents only: a plain
client (the daemon's ordinary token) may use any tenant.`

// agentsLockWait bounds how long a command waits for another holder of the
// agent token file's lock.
const agentsLockWait = 15 * time.Second

// tokenCommandLine checks the words of a token command (agents, people):
// list, or issue-token or revoke with a NAME that check accepts. It says
// what is wrong on stderr.
func tokenCommandLine(command string, rest []string, check func(string) error, usage string, stderr io.Writer) bool {
	switch {
	case len(rest) == 1 && rest[0] == "list":
	case len(rest) == 2 && (rest[0] == "issue-token" || rest[0] == "revoke"):
		if err := check(rest[1]); err != nil {
			fmt.Fprintf(stderr, "car-server %s %s: %v\n", command, rest[0], err)
			return false
		}
	default:
		fmt.Fprintln(stderr, usage)
		return false
	}
	return true
}

// runAgentsCommand serves agents issue-token, revoke and list.
func runAgentsCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("agents", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	tenants := fs.StringArray("tenant", nil, "a tenant the agent may use (repeatable)")
	mcpConfig := fs.Bool("mcp-config", false, "print an MCP client configuration with the token")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "car-server agents: %v\n%s\n", err, agentsUsage)
		return exitUsage
	}
	// The command line is checked whole before the store is opened: a
	// misspelled command is a usage error even when the store is down.
	rest := fs.Args()
	if !tokenCommandLine("agents", rest, func(id string) error { return runs.CheckID("AGENT_ID", id) }, agentsUsage, stderr) {
		return exitUsage
	}
	if fs.Changed("tenant") && rest[0] != "issue-token" {
		fmt.Fprintf(stderr, "car-server agents %s: --tenant belongs to issue-token (a token's tenants are set when it is issued)\n", rest[0])
		return exitUsage
	}
	if *mcpConfig && rest[0] != "issue-token" {
		fmt.Fprintf(stderr, "car-server agents %s: --mcp-config belongs to issue-token\n", rest[0])
		return exitUsage
	}
	cfg, code := loadConfig(command{}, nil, stdout, stderr)
	if cfg == nil {
		return code
	}
	var endpoint string
	if *mcpConfig {
		// Checked before the token is minted: a token nobody printed
		// would replace the agent's current one for nothing.
		var err error
		if endpoint, err = mcpURL(cfg); err != nil {
			fmt.Fprintf(stderr, "car-server agents issue-token: --mcp-config: %v\n", err)
			return exitUsage
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentsLockWait)
	defer cancel()
	if rest[0] == "revoke" {
		return revokeAgent(ctx, cfg, rest[1], stdout, stderr)
	}
	tokens, closeTokens, err := openAgentTokens(ctx, cfg)
	if err != nil {
		return storeFailed(stderr, "agents "+rest[0], err)
	}
	defer closeTokens()
	if rest[0] == "issue-token" {
		token, err := rpc.NewToken()
		if err == nil {
			err = tokens.Issue(ctx, rest[1], token, *tenants...)
		}
		if err != nil {
			return storeFailed(stderr, "agents "+rest[0], err)
		}
		if *mcpConfig {
			b, err := mcpClientConfig(endpoint, token)
			if err != nil {
				return storeFailed(stderr, "agents "+rest[0], err)
			}
			fmt.Fprintln(stdout, string(b))
			return exitOK
		}
		fmt.Fprintln(stdout, token)
		return exitOK
	}
	list, err := tokens.List(ctx)
	if err != nil {
		return storeFailed(stderr, "agents "+rest[0], err)
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"agents": list})
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tISSUED\tTENANTS")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", a.AgentID, a.IssuedAt.Format(time.RFC3339), agents.TenantList(a.Tenants))
	}
	_ = tw.Flush()
	return exitOK
}

// openAgentTokens opens where the agents' token hashes are kept: the token
// file, or the shared database when the store is postgres.
func openAgentTokens(ctx context.Context, cfg *config.Config) (store.AgentTokens, func(), error) {
	if cfg.Store != config.StorePostgres {
		return file.TokenFile(cfg.AgentTokensPath), func() {}, nil
	}
	return postgres.OpenTokens(ctx, postgresConfig(cfg, "", nil))
}

// revokeAgent revokes through the running daemon when one answers, so that
// it closes the agent's live connection at once, and in the token store
// otherwise: a daemon the command could not reach notices the change
// itself (it watches the token file, or, with store: postgres, the
// revoke's announcement) and closes the connection within a second.
func revokeAgent(ctx context.Context, cfg *config.Config, agentID string, stdout, stderr io.Writer) int {
	c, code := dialDaemon(ctx, cfg, io.Discard)
	if c == nil && code != exitUnreachable {
		fmt.Fprintln(stderr, "car-server agents revoke: the running daemon refused the operator's credential; it needs the host role (the host-token file or $CAR_HOST_TOKEN)")
		return code
	}
	if c == nil {
		tokens, closeTokens, err := openAgentTokens(ctx, cfg)
		if err != nil {
			return storeFailed(stderr, "agents revoke", err)
		}
		defer closeTokens()
		revoked, err := tokens.Revoke(ctx, agentID)
		if err != nil {
			return storeFailed(stderr, "agents revoke", err)
		}
		fmt.Fprintln(stdout, revokeLine(agentID, revoked, -1))
		return exitOK
	}
	defer c.Close()
	var res struct {
		Revoked bool `json:"revoked"`
		Closed  int  `json:"connections_closed"`
	}
	if err := c.Call(ctx, protocol.MethodAgentsRevoke, map[string]any{"agent_id": agentID}, &res); err != nil {
		fmt.Fprintf(stderr, "car-server agents revoke: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, revokeLine(agentID, res.Revoked, res.Closed))
	return exitOK
}

// revokeLine reports a revoke; closed is the connections the daemon
// closed, or -1 when no daemon answered.
func revokeLine(agentID string, revoked bool, closed int) string {
	switch {
	case !revoked:
		return fmt.Sprintf("agent %s had no token", agentID)
	case closed < 0:
		return fmt.Sprintf("revoked agent %s's token; no daemon answered on its socket, and a running one closes the agent's connection within a second of the change", agentID)
	}
	return fmt.Sprintf("revoked agent %s's token; closed %d connection(s)", agentID, closed)
}
