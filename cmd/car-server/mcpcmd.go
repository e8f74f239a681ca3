package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/mcpserve"
	"github.com/parslee-ai/car-server/internal/runs"
)

const mcpUsage = `usage:
  car-server mcp [--agent AGENT_ID [--token-file FILE]]
                 a stdio MCP server for a client that only launches stdio servers: it forwards
                 the client's session to the running daemon's MCP endpoint (mcp_bind, /mcp),
                 where every call is governed as an HTTP client's is. Without --agent it
                 speaks as a plain client, with the daemon's token from its token file; with
                 --agent, as that agent, with its token from --token-file FILE or else from
                 CAR_AGENT_TOKEN (car-server agents issue-token AGENT_ID prints one). It
                 exits 0 when the client closes stdin, and 1, saying so on stderr, when the
                 daemon is not reachable or goes away.`

// mcpTokenEnv holds an agent's token for car-server mcp --agent.
const mcpTokenEnv = "CAR_AGENT_TOKEN"

// runMCPCommand serves car-server mcp: stdio in front of the daemon's MCP
// endpoint (mcpserve.Forward). It forwards to the endpoint, not to the
// WebSocket: one MCP path through the daemon, one mapping of MCP onto
// proposals, the same principal, bounds and record as an HTTP client's.
func runMCPCommand(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mcp", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	agent := fs.String("agent", "", "speak as this agent, with its own token")
	tokenFile := fs.String("token-file", "", "the agent's token file (else "+mcpTokenEnv+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintln(stderr, mcpUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "car-server mcp: %v\n%s\n", err, mcpUsage)
		return exitUsage
	}
	if fs.NArg() > 0 || (*tokenFile != "" && *agent == "") {
		fmt.Fprintln(stderr, mcpUsage)
		return exitUsage
	}
	cfg, code := loadConfig(command{name: "car-server mcp"}, nil, io.Discard, stderr)
	if cfg == nil {
		return code
	}
	endpoint, err := mcpURL(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "car-server mcp: %v\n", err)
		return exitUsage
	}
	token, err := mcpToken(cfg, *agent, *tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "car-server mcp: %v\n", err)
		return exitFailed
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := mcpserve.Forward(ctx, stdin, stdout, endpoint, token, version); err != nil {
		if errors.Is(err, mcpserve.ErrDaemonDown) {
			fmt.Fprintf(stderr, "car-server mcp: %v (is the daemon running, with its MCP endpoint on? start car-server; mcp_bind says where the endpoint listens)\n", err)
		} else {
			fmt.Fprintf(stderr, "car-server mcp: %v\n", err)
		}
		return exitFailed
	}
	return exitOK
}

// mcpToken is the token car-server mcp presents: the daemon's, read from
// its token file, or the agent's.
func mcpToken(cfg *config.Config, agent, tokenFile string) (string, error) {
	if agent == "" {
		if cfg.NoAuth {
			return "", nil
		}
		b, err := os.ReadFile(cfg.TokenPath)
		if err != nil {
			return "", fmt.Errorf("read the daemon's token: %w (is the daemon running? it writes the token there when it starts)", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if err := runs.CheckID("--agent", agent); err != nil {
		return "", err
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", fmt.Errorf("read agent %s's token: %w", agent, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if t := strings.TrimSpace(os.Getenv(mcpTokenEnv)); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("agent %s's token: give --token-file FILE or set %s (car-server agents issue-token %s prints one)", agent, mcpTokenEnv, agent)
}

// mcpURL is the daemon's MCP endpoint as a client on this machine reaches
// it: a wildcard bind is reached on loopback.
func mcpURL(cfg *config.Config) (string, error) {
	if cfg.MCPBind == "" {
		return "", errors.New("the daemon's MCP endpoint is disabled (mcp_bind); set --mcp-bind or CAR_MCP_BIND to host:port")
	}
	host, port, err := net.SplitHostPort(cfg.MCPBind)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + mcpserve.Path, nil
}

// mcpClientConfig is the configuration an MCP client (Claude Code's
// .mcp.json, Cursor's mcp.json) takes for the endpoint with token.
func mcpClientConfig(url, token string) ([]byte, error) {
	cfg := map[string]any{"mcpServers": map[string]any{"car-server": map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + token},
	}}}
	return json.MarshalIndent(cfg, "", "  ")
}
