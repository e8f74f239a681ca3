package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/protocol"
)

const agentsUsage = `usage:
  car-server agents issue-token AGENT_ID     mint AGENT_ID's token and print it (only it) on stdout; replaces any earlier one
  car-server agents revoke AGENT_ID          refuse AGENT_ID's token from now on and close its live connection
  car-server agents list [--json]            the agents with a token (never the tokens)

The daemon keeps only a hash of each token, in $CAR_HOME/agent-tokens.json (0600),
and reads it on every agent auth: no restart is needed. An agent presents its token
with session.auth {token, agent_id}.`

// agentsLockWait bounds how long a command waits for another holder of the
// agent token file's lock.
const agentsLockWait = 15 * time.Second

// runAgentsCommand serves agents issue-token, revoke and list.
func runAgentsCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("agents", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "car-server agents: %v\n%s\n", err, agentsUsage)
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 || (rest[0] == "list") != (len(rest) == 1) || len(rest) > 2 {
		fmt.Fprintln(stderr, agentsUsage)
		return exitUsage
	}
	if len(rest) == 2 {
		if err := runs.CheckID("AGENT_ID", rest[1]); err != nil {
			fmt.Fprintf(stderr, "car-server agents %s: %v\n", rest[0], err)
			return exitUsage
		}
	}
	home, _ := os.UserHomeDir()
	cfg, err := config.Load(nil, home, io.Discard)
	if err != nil {
		fmt.Fprintln(stderr, "car-server:", err)
		return exitUsage
	}
	switch rest[0] {
	case "issue-token":
		ctx, cancel := context.WithTimeout(context.Background(), agentsLockWait)
		defer cancel()
		token, err := rpc.NewToken()
		if err == nil {
			err = agents.Issue(ctx, cfg.AgentTokensPath, rest[1], token)
		}
		if err != nil {
			fmt.Fprintf(stderr, "car-server agents issue-token: %v\n", err)
			return exitFailed
		}
		fmt.Fprintln(stdout, token)
		return exitOK
	case "revoke":
		return revokeAgent(cfg, rest[1], stdout, stderr)
	case "list":
		list, err := agents.List(cfg.AgentTokensPath)
		if err != nil {
			fmt.Fprintf(stderr, "car-server agents list: %v\n", err)
			return exitFailed
		}
		if *asJSON {
			b, _ := json.Marshal(map[string]any{"agents": list})
			fmt.Fprintln(stdout, string(b))
			return exitOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AGENT\tISSUED")
		for _, a := range list {
			fmt.Fprintf(tw, "%s\t%s\n", a.AgentID, a.IssuedAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
		return exitOK
	}
	fmt.Fprintln(stderr, agentsUsage)
	return exitUsage
}

// revokeAgent revokes through the running daemon when one answers, so that
// it closes the agent's live connection too, and in the file otherwise.
func revokeAgent(cfg *config.Config, agentID string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, code := dialDaemon(ctx, cfg, io.Discard)
	if c == nil && code != exitUnreachable {
		fmt.Fprintln(stderr, "car-server agents revoke: the running daemon refused the operator's credential; it needs the host role (the host-token file or $CAR_HOST_TOKEN)")
		return code
	}
	if c == nil {
		revoked, err := agents.Revoke(ctx, cfg.AgentTokensPath, agentID)
		if err != nil {
			fmt.Fprintf(stderr, "car-server agents revoke: %v\n", err)
			return exitFailed
		}
		fmt.Fprintln(stdout, revokeLine(agentID, revoked, 0))
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

func revokeLine(agentID string, revoked bool, closed int) string {
	if !revoked {
		return fmt.Sprintf("agent %s had no token", agentID)
	}
	return fmt.Sprintf("revoked agent %s's token; closed %d connection(s)", agentID, closed)
}
