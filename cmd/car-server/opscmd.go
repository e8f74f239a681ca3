package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/protocol"
)

// Exit codes of the operator subcommands.
const (
	exitOK          = 0
	exitFailed      = 1 // the daemon answered with an error
	exitUsage       = 2
	exitUnreachable = 3 // no daemon answers on the socket
	exitAuth        = 4 // the daemon refused the token
)

// operatorNote ends the usage of every command that talks to the running
// daemon.
const operatorNote = `
It talks to the running daemon over its Unix socket ($CAR_HOME/run/car-server.sock),
as a person: with the first credential found of $CAR_HOST_TOKEN, $CAR_AUTH_TOKEN,
the daemon's host-token file (the host role) and its auth-token file.
Exit codes: 0 ok, 1 the daemon refused, 2 usage, 3 daemon not reachable, 4 wrong token.`

const statusUsage = `usage: car-server status [--json]    version, uptime, connections, proposals in flight, ring and queue bytes, store members
` + operatorNote

const policiesUsage = `usage: car-server policies [--json]    the operator policies in force
` + operatorNote

const approvalsUsage = `usage:
  car-server approvals list [--json]                    every decision on the approval ledger
  car-server approvals watch [--json]                   print each approval request as it arrives, and how
                                                        it was resolved or expired, until Ctrl-C
  car-server approvals approve ID [--reason TEXT] [--expires-in DURATION] [--uses N] [--json]
                                                        decide a waiting request (its id from watch)
  car-server approvals reject  ID --reason TEXT [--json]
  car-server approvals approve FINGERPRINT --tier TIER [--reason TEXT] [--expires-in DURATION] [--uses N] [--json]
  car-server approvals reject  FINGERPRINT --tier TIER [--reason TEXT] [--json]
` + operatorNote

// opsUsage is the usage of one of the commands runOpsCommand serves.
func opsUsage(cmd string) string {
	switch cmd {
	case "status":
		return statusUsage
	case "policies":
		return policiesUsage
	}
	return approvalsUsage
}

// runOpsCommand serves status, policies and approvals.
func runOpsCommand(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(cmd, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	tier := fs.String("tier", "", "required tier of the operation")
	reason := fs.String("reason", "", "why")
	expiresIn := fs.Duration("expires-in", 0, "an approval ends after this long (1h, 30m); whole seconds, rounded up")
	uses := fs.Int("uses", 0, "an approval allows this many admissions")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "car-server %s: %v\n%s\n", cmd, err, opsUsage(cmd))
		return exitUsage
	}
	rest := fs.Args()
	if *expiresIn < 0 {
		fmt.Fprintf(stderr, "car-server %s: --expires-in must be positive (1h, 30m)\n", cmd)
		return exitUsage
	}
	limits := protocol.Limits{ExpiresIn: int64((*expiresIn + time.Second - 1) / time.Second), Uses: *uses}
	var method string
	var params any
	switch {
	case cmd == "status" && len(rest) == 0:
		method = protocol.MethodServerStatus
	case cmd == "policies" && len(rest) == 0:
		method = protocol.MethodPolicyList
	case cmd == "approvals" && len(rest) == 1 && rest[0] == "list":
		method = protocol.MethodApprovalsList
	case cmd == "approvals" && len(rest) == 1 && rest[0] == "watch":
		return watchApprovals(*asJSON, stdout, stderr)
	case cmd == "approvals" && len(rest) == 2 && (rest[0] == "approve" || rest[0] == "reject") && *tier == "" && !isFingerprint(rest[1]):
		if rest[0] == "reject" && *reason == "" {
			fmt.Fprintln(stderr, "car-server approvals reject: --reason is required: the agent is told why")
			return exitUsage
		}
		method = protocol.MethodHostResolveApproval
		approved := rest[0] == "approve"
		params = protocol.HostResolveParams{ApprovalID: rest[1], Approved: &approved, Notes: *reason, Limits: limits}
	case cmd == "approvals" && len(rest) == 2 && (rest[0] == "approve" || rest[0] == "reject"):
		if *tier == "" {
			fmt.Fprintf(stderr, "car-server approvals %s: --tier is required (read_only, sandbox_edit or full_access; see permission.evaluate)\n", rest[0])
			return exitUsage
		}
		method = protocol.MethodPermissionApprove
		if rest[0] == "reject" {
			method = protocol.MethodPermissionReject
		}
		params = protocol.DecisionParams{Fingerprint: rest[1], RequiredTier: *tier, Reason: *reason, Limits: limits}
	default:
		fmt.Fprintln(stderr, opsUsage(cmd))
		return exitUsage
	}

	cfg, code := loadConfig(command{}, nil, stdout, stderr)
	if cfg == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, code := dialDaemon(ctx, cfg, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	var out json.RawMessage
	if err := c.Call(ctx, method, params, &out); err != nil {
		fmt.Fprintf(stderr, "car-server %s: %s\n", strings.Join(append([]string{cmd}, rest...), " "), daemonError(err))
		return exitFailed
	}
	if *asJSON {
		fmt.Fprintln(stdout, string(out))
		return exitOK
	}
	printHuman(stdout, method, out)
	return exitOK
}

// dialDaemon connects over the Unix socket and authenticates.
func dialDaemon(ctx context.Context, cfg *config.Config, stderr io.Writer) (*client.Client, int) {
	if cfg.Socket == "" {
		fmt.Fprintln(stderr, "car-server: the Unix socket is turned off (socket: off); the operator commands need it")
		return nil, exitUnreachable
	}
	c, err := client.Dial(ctx, "ws://car-server/", &client.Options{SocketPath: cfg.Socket, SkipHandshake: true})
	if err != nil {
		fmt.Fprintf(stderr, "car-server: no daemon answers on %s (is it running? start it with car-server, or point CAR_HOME at its state root): %v\n", cfg.Socket, err)
		return nil, exitUnreachable
	}
	// The operator is a person: the host role when its token is at hand.
	// A token named in the environment wins over the files.
	token, source, asHost := operatorToken(cfg)
	auth := c.Auth
	if asHost {
		auth = c.AuthHost
	}
	if err := auth(ctx, token); err != nil {
		c.Close()
		fmt.Fprintf(stderr, "car-server: the daemon refused the token (from %s): %s\n", source, daemonError(err))
		return nil, exitAuth
	}
	if _, err := c.Handshake(ctx); err != nil {
		c.Close()
		fmt.Fprintf(stderr, "car-server: %s\n", daemonError(err))
		return nil, exitFailed
	}
	return c, exitOK
}

// operatorToken picks the operator commands' credential, first found: the
// host_token setting, the auth_token setting (each from its flag, CAR_*
// variable or config file), the host-token file, the auth-token file.
// asHost says it is the host token.
func operatorToken(cfg *config.Config) (token, source string, asHost bool) {
	switch {
	case cfg.HostToken != "":
		return cfg.HostToken, "the host_token setting (CAR_HOST_TOKEN)", true
	case cfg.AuthToken != "":
		return cfg.AuthToken, "the auth_token setting (CAR_AUTH_TOKEN)", false
	}
	if t, err := readTokenFile(cfg.HostTokenPath); err == nil {
		return t, cfg.HostTokenPath, true
	}
	t, _ := readTokenFile(cfg.TokenPath) // none: auth is off, or the daemon says so
	return t, cfg.TokenPath, false
}

// isFingerprint tells an approval-ledger fingerprint (32 hex characters)
// from a host approval id.
func isFingerprint(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// printMembers renders server.status's members: one row each, a dead one
// marked so.
func printMembers(w io.Writer, members []protocol.Member, listErr string) {
	if listErr != "" {
		fmt.Fprintf(w, "\nmembers: %s\n", listErr)
		return
	}
	if len(members) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "MEMBER\tVERSION\tSTARTED\tLAST HEARTBEAT\tSTATE")
	for _, m := range members {
		state := "alive"
		if !m.Alive {
			state = "DEAD"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.Version, m.StartedAt.Format(time.RFC3339), m.LastHeartbeat.Format(time.RFC3339), state)
	}
}

// printHuman renders a reply for people.
func printHuman(w io.Writer, method string, raw json.RawMessage) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	switch method {
	case protocol.MethodServerStatus:
		var s protocol.ServerStatusResult
		_ = json.Unmarshal(raw, &s)
		fmt.Fprintf(tw, "version\t%s\n", s.Version)
		fmt.Fprintf(tw, "uptime\t%s\n", (time.Duration(s.Runtime.UptimeSecs) * time.Second).String())
		fmt.Fprintf(tw, "connections\t%d\n", s.Connections)
		fmt.Fprintf(tw, "proposals in flight\t%d\n", s.Runtime.ProposalsInFlight)
		fmt.Fprintf(tw, "supervisors\t%d (%d intents parked)\n", s.Runtime.Supervisors, s.Runtime.ParkedIntents)
		fmt.Fprintf(tw, "operator policies\t%d\n", s.Runtime.OperatorPolicies)
		fmt.Fprintf(tw, "events retained\t%d (%d bytes)\n", s.Runtime.Events, s.Runtime.EventBytes)
		fmt.Fprintf(tw, "host event ring\t%d events (%d bytes)\n", s.Runtime.HostEvents, s.Runtime.HostEventBytes)
		fmt.Fprintf(tw, "feed queues\t%d bytes\n", s.Runtime.FeedQueueBytes)
		fmt.Fprintf(tw, "stream buffers\t%d bytes (%d chunks dropped)\n", s.Runtime.StreamBufferedBytes, s.Runtime.StreamChunksDropped)
		if s.Store != "" {
			fmt.Fprintf(tw, "store\t%s\n", s.Store)
		}
		tw.Flush()
		printMembers(w, s.Members, s.MembersError)
	case protocol.MethodPolicyList:
		var l struct {
			Policies []protocol.PolicyInfo `json:"policies"`
		}
		_ = json.Unmarshal(raw, &l)
		if len(l.Policies) == 0 {
			fmt.Fprintln(tw, "no operator policies in force")
			return
		}
		fmt.Fprintln(tw, "LAYER\tNAME\tDESCRIPTION")
		for _, p := range l.Policies {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Layer, p.Name, p.Description)
		}
	case protocol.MethodApprovalsList:
		var l protocol.ApprovalsListResult
		_ = json.Unmarshal(raw, &l)
		if len(l.Approvals) == 0 {
			fmt.Fprintln(tw, "the approval ledger is empty")
			return
		}
		fmt.Fprintln(tw, "FINGERPRINT\tDECISION\tTIER\tTOOL\tREVIEWER\tWHEN\tLIMITS\tREASON")
		for _, a := range l.Approvals {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Fingerprint, a.Decision, a.RequiredTier, orDash(a.Tool), a.Reviewer, a.RecordedAt.Format(time.RFC3339), approvalLimits(a), a.Reason)
		}
	case protocol.MethodHostResolveApproval:
		var a protocol.HostApproval
		_ = json.Unmarshal(raw, &a)
		fmt.Fprintf(tw, "approval %s %s (reviewer %s)\n", a.ID, a.Status, a.ResolvedBy)
	default:
		var rec protocol.ApprovalRecord
		_ = json.Unmarshal(raw, &rec)
		fmt.Fprintf(tw, "%s %s at %s (reviewer %s)\n", rec.Fingerprint, rec.Decision, rec.RequiredTier, rec.Reviewer)
	}
}

// approvalLimits says how much of an approval is left: "used 1 of 2",
// "until <time>", both, or "-" for none.
func approvalLimits(a protocol.ApprovalRecord) string {
	var parts []string
	if a.Uses > 0 {
		parts = append(parts, fmt.Sprintf("used %d of %d", a.Used, a.Uses))
	}
	if a.ExpiresAt != nil {
		parts = append(parts, "until "+a.ExpiresAt.Format(time.RFC3339))
	}
	return orDash(strings.Join(parts, ", "))
}

// orDash is s, or "-" for an empty column.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
