package rpc

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// listHandles calls tools.handles, and checks the reply against
// openrpc.json.
func listHandles(t *testing.T, d *openrpcDoc, tb *toolbox) []protocol.ToolHandleInfo {
	t.Helper()
	var raw json.RawMessage
	mustCall(t, tb, protocol.MethodToolsHandles, nil, &raw)
	if err := d.result(protocol.MethodToolsHandles, raw); err != nil {
		t.Fatalf("the tools.handles reply does not match openrpc.json: %v\nreply: %s", err, raw)
	}
	var res protocol.ToolHandlesResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res.Handles
}

// tools.handles shows a connection its own handles, with their latest
// progress; another connection sees none of them; a host sees every one.
func TestToolsHandlesScoping(t *testing.T) {
	d := loadOpenRPC(t)
	ts := startServer(t, Options{HostToken: "host"})
	release := make(chan struct{})
	reported := make(chan string, 2)
	build := func(ctx context.Context, call protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Progress(ctx, 0.4, "compiling"); err != nil {
			return nil, err
		}
		reported <- call.Handle
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(release)
	a := newStreamBox(t, ts, map[string]client.StreamFunc{"build": build})
	b := newStreamBox(t, ts, map[string]client.StreamFunc{"build": build})
	other := newToolbox(t, ts, map[string]toolFunc{})
	host := dialHost(t, ts, "host")

	ha := handleOf(t, a.submit(t, proposal(streaming("s", "build"))), "s")
	hb := handleOf(t, b.submit(t, proposal(streaming("s", "build"))), "s")
	for range 2 {
		next(t, reported, "a progress chunk sent")
	}

	own := listHandles(t, d, a)
	if len(own) != 1 || own[0].Handle != ha {
		t.Fatalf("the owner lists %+v, want its handle %s only", own, ha)
	}
	h := own[0]
	if h.Tool != "build" || h.Mode != protocol.ModeStreaming || h.Status != protocol.ToolRunning || h.ProposalID != "p-test" || h.ActionID != "s" ||
		h.OwnerConnection == "" || h.StartedAt.IsZero() || h.LastChunkAt == nil || h.ChunksBuffered != 1 {
		t.Fatalf("the owner's handle: %+v", h)
	}
	if h.Progress == nil || h.Progress.Kind != protocol.ChunkProgress || *h.Progress.Fraction != 0.4 || *h.Progress.Message != "compiling" {
		t.Fatalf("want the progress chunk (0.4, compiling), got %+v", h.Progress)
	}
	if got := listHandles(t, d, other); len(got) != 0 {
		t.Fatalf("another connection lists %+v", got)
	}
	all := listHandles(t, d, host)
	seen := map[string]string{}
	for _, h := range all {
		seen[h.Handle] = h.OwnerConnection
	}
	if len(all) != 2 || seen[ha] != own[0].OwnerConnection || seen[hb] == "" || seen[hb] == seen[ha] {
		t.Fatalf("a host lists %+v, want %s and %s with their two owners", all, ha, hb)
	}
	if p := pollHandle(t, a.Client, ha); p == nil || len(p.Chunks) != 1 {
		t.Fatalf("listing drained the handle: poll %+v", p)
	}
}
