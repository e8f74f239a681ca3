package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// watchApprovals subscribes as a host and prints every approval request:
// those waiting now, then each one as it arrives, until Ctrl-C or the
// daemon goes away. With it, a person at a terminal can run the approval
// loop without any UI: approve or reject each by its id.
func watchApprovals(asJSON bool, stdout, stderr io.Writer) int {
	home, _ := os.UserHomeDir()
	cfg, err := config.Load(nil, home, io.Discard)
	if err != nil {
		fmt.Fprintln(stderr, "car-server:", err)
		return exitUsage
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

	// Events are printed by one goroutine, in order; the read loop only queues.
	events := make(chan host.Event, 256)
	c.HandleNotification(protocol.MethodHostEvent, func(raw json.RawMessage) {
		var ev host.Event
		if json.Unmarshal(raw, &ev) != nil || ev.Kind != host.KindApprovalRequested {
			return
		}
		select {
		case events <- ev:
		default:
			fmt.Fprintln(stderr, "car-server approvals watch: falling behind; run car-server approvals watch again to list what waits")
		}
	})
	var snap struct {
		Approvals []host.Approval `json:"approvals"`
	}
	if err := c.Call(dctx, protocol.MethodHostSubscribe, nil, &snap); err != nil {
		fmt.Fprintf(stderr, "car-server approvals watch: %v\n", err)
		return exitFailed
	}
	if !asJSON {
		fmt.Fprintln(stdout, "watching for approval requests (Ctrl-C to stop)")
	}
	for _, a := range snap.Approvals {
		if a.Status == host.ApprovalPending {
			printApproval(stdout, a, asJSON)
		}
	}
	for {
		select {
		case ev := <-events:
			var a struct {
				Approval host.Approval `json:"approval"`
			}
			if b, err := json.Marshal(ev.Payload); err == nil && json.Unmarshal(b, &a) == nil && a.Approval.ID != "" {
				printApproval(stdout, a.Approval, asJSON)
			}
		case <-c.Done():
			fmt.Fprintln(stderr, "car-server approvals watch: the daemon closed the connection")
			return exitFailed
		case <-ctx.Done():
			return exitOK
		}
	}
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
	if tool, _ := a.Context["tool"].(string); tool != "" {
		fmt.Fprintf(w, "  tool     %s\n", tool)
	}
	if tier, _ := a.Context["required_tier"].(string); tier != "" {
		rev, _ := a.Context["reversibility"].(string)
		fmt.Fprintf(w, "  tier     %s (%s)\n", tier, rev)
	}
	if p, ok := a.Context["preview"]; ok {
		b, _ := json.Marshal(p)
		fmt.Fprintf(w, "  preview  %s\n", b)
	} else if a.Description != "" {
		fmt.Fprintf(w, "  %s\n", a.Description)
	}
	fmt.Fprintf(w, "  decide   car-server approvals approve %s   |   car-server approvals reject %s --reason TEXT\n", a.ID, a.ID)
}
