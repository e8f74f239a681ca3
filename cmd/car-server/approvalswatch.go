package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// watchApprovals subscribes as a host and prints every approval request:
// those waiting now, then each one as it arrives, and how each of them
// ended (approved or denied, by whom and why, or expired), until Ctrl-C or
// the daemon goes away. With it, a person at a terminal can run the approval
// loop without any UI: approve or reject each by its id.
func watchApprovals(asJSON bool, stdout, stderr io.Writer) int {
	cfg, code := loadConfig(command{}, nil, stdout, stderr)
	if cfg == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, code := dialDaemon(dctx, cfg, stderr)
	if c == nil {
		return code
	}
	defer c.Close()

	// Requests are printed by one goroutine, in order; the read loop only
	// queues. A gap — the daemon dropped host events for this watcher, or
	// this queue was full — is mended by re-reading what waits.
	type notice struct {
		Kind    string `json:"kind"`
		Dropped uint64 `json:"dropped"`
		Payload struct {
			Approval *host.Approval `json:"approval"`
		} `json:"payload"`
	}
	notices := make(chan notice, 256)
	var missed atomic.Bool
	c.HandleNotification(protocol.MethodHostEvent, func(raw json.RawMessage) {
		var n notice
		if json.Unmarshal(raw, &n) != nil || (n.Kind != host.KindApprovalRequested && n.Kind != host.KindApprovalResolved && n.Kind != host.KindApprovalCounted && n.Dropped == 0) {
			return
		}
		select {
		case notices <- n:
		default:
			missed.Store(true)
		}
	})
	var snap struct {
		Approvals []host.Approval `json:"approvals"`
	}
	if err := c.Call(dctx, protocol.MethodHostSubscribe, nil, &snap); err != nil {
		fmt.Fprintf(stderr, "car-server approvals watch: %s\n", daemonError(err))
		return exitFailed
	}
	if !asJSON {
		fmt.Fprintln(stdout, "watching for approval requests (Ctrl-C to stop)")
	}
	printed := map[string]bool{} // requests shown, true once their end is shown too
	counted := map[string]int{}  // the approvals of a quorum shown, by request
	show := func(a host.Approval) {
		ended, seen := printed[a.ID]
		switch {
		case a.Status == host.ApprovalPending && !seen:
			printed[a.ID] = false
			counted[a.ID] = len(a.Approvers)
			printApproval(stdout, a, asJSON)
		case a.Status == host.ApprovalPending && counted[a.ID] != len(a.Approvers):
			counted[a.ID] = len(a.Approvers)
			printCount(stdout, a, asJSON)
		case a.Status != host.ApprovalPending && seen && !ended:
			printed[a.ID] = true
			printResolution(stdout, a, reviewerName(ctx, c, a.ResolvedBy), asJSON)
		}
	}
	for _, a := range snap.Approvals {
		show(a)
	}
	for {
		select {
		case n := <-notices:
			if n.Dropped > 0 || missed.Swap(false) {
				var list protocol.HostApprovalsResult
				if err := c.Call(ctx, protocol.MethodHostApprovals, nil, &list); err != nil {
					fmt.Fprintf(stderr, "car-server approvals watch: re-reading after a gap: %s\n", daemonError(err))
					return exitFailed
				}
				for _, a := range list.Approvals {
					show(a)
				}
			}
			if n.Payload.Approval != nil {
				show(*n.Payload.Approval)
			}
		case <-c.Done():
			fmt.Fprintln(stderr, "car-server approvals watch: the daemon closed the connection")
			return exitFailed
		case <-ctx.Done():
			return exitOK
		}
	}
}

// reviewerName is who a reviewer "conn:<id>" is, as server.connections
// tells the host role (a person at a terminal knows "host via dashboard",
// not a connection id); the reviewer as recorded when that connection is
// gone or the reviewer is not a connection.
func reviewerName(ctx context.Context, c *client.Client, reviewer string) string {
	id, ok := strings.CutPrefix(reviewer, "conn:")
	if !ok {
		return reviewer
	}
	var conns protocol.ServerConnectionsResult
	if c.Call(ctx, protocol.MethodServerConnections, nil, &conns) != nil {
		return reviewer
	}
	for _, ci := range conns.Connections {
		if ci.ID == id && ci.Principal != "" {
			who := protocol.ApprovalRequester{Principal: ci.Principal, AgentID: ci.AgentID, ClientName: ci.ClientName, Connection: id}
			if id == conns.Self {
				return who.String() + " (this watch)"
			}
			return who.String()
		}
	}
	return reviewer
}

// printResolution shows how a request it printed ended, and who decided.
func printResolution(w io.Writer, a host.Approval, who string, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(a)
		fmt.Fprintln(w, string(b))
		return
	}
	line := fmt.Sprintf("approval %s %s", a.ID, a.Status)
	if who != "" {
		line += " by " + who
	}
	if a.Notes != "" {
		line += ": " + a.Notes
	}
	fmt.Fprintln(w, line)
}

// quorumLine is how far a request that needs several people has got:
// "1 of 2 approvals (person:alice)".
func quorumLine(a host.Approval) string {
	line := fmt.Sprintf("%d of %d approvals", len(a.Approvers), a.RequiredApprovals)
	if len(a.Approvers) > 0 {
		line += " (" + strings.Join(a.Approvers, ", ") + ")"
	}
	return line
}

// printCount shows a person's approval counted toward a quorum.
func printCount(w io.Writer, a host.Approval, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(a)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "approval %s counted: %s\n", a.ID, quorumLine(a))
}

// printApproval shows one request: what would run, the tier it needs, the
// parameters (as the daemon previews them, credentials redacted) and how to
// decide it.
func printApproval(w io.Writer, a host.Approval, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(a)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "\napproval %s  %s\n", a.ID, a.Title)
	if a.RequestedBy != nil {
		fmt.Fprintf(w, "  asked by %s\n", a.RequestedBy)
	}
	if tool, _ := a.Context["tool"].(string); tool != "" {
		fmt.Fprintf(w, "  tool     %s\n", tool)
	}
	if tier, _ := a.Context["required_tier"].(string); tier != "" {
		rev, _ := a.Context["reversibility"].(string)
		fmt.Fprintf(w, "  tier     %s (%s)\n", tier, rev)
	}
	if a.RequiredApprovals > 1 {
		fmt.Fprintf(w, "  needs    %d distinct people: %s so far\n", a.RequiredApprovals, quorumLine(a))
	}
	if p, ok := a.Context["preview"]; ok {
		b, _ := json.Marshal(p)
		fmt.Fprintf(w, "  preview  %s\n", b)
	} else if a.Description != "" {
		fmt.Fprintf(w, "  %s\n", a.Description)
	}
	fmt.Fprintf(w, "  decide   car-server approvals approve %s   |   car-server approvals reject %s --reason TEXT\n", a.ID, a.ID)
}
