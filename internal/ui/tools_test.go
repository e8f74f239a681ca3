package ui_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// startStream submits a one-action proposal whose tool_call streams, and
// returns the handle in the action's output.
func startStream(t *testing.T, r *runner, id, toolName string) string {
	t.Helper()
	prop := map[string]any{"proposal": map[string]any{"id": id, "actions": []any{
		map[string]any{"id": "a1", "type": "tool_call", "tool": toolName, "parameters": map[string]any{}, "invocation_mode": "streaming"},
	}}}
	var res protocol.ProposalResult
	if err := r.Call(ctxT(t), protocol.MethodProposalSubmit, prop, &res); err != nil {
		t.Fatalf("proposal.submit: %v", err)
	}
	a, err := resultOf(res, "a1")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := a.Output.(map[string]any)
	handle, _ := out["tool_handle"].(string)
	if a.Status != protocol.StatusSucceeded || handle == "" {
		t.Fatalf("a streaming action: want succeeded with a tool_handle, got %s %v %s", a.Status, a.Output, errText(a))
	}
	return handle
}

func TestRunningToolsShowProgressAndCancel(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	more, stopped := make(chan struct{}), make(chan error, 1)
	rollout := func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Progress(ctx, 0.25, "canary healthy"); err != nil {
			return nil, err
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := w.Progress(ctx, 0.6, "rolling out"); err != nil {
			return nil, err
		}
		if err := w.Text(ctx, "pod 6 of 10 ready"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		stopped <- ctx.Err()
		return nil, ctx.Err()
	}
	var rp atomic.Pointer[runner] // set before any call can arrive
	r := newRunner(t, d, map[string]tool{"watch_rollout": func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		return rp.Load().Stream(call, rollout)
	}})
	rp.Store(r)
	handle := startStream(t, r, "p-rollout", "watch_rollout")
	card := fmt.Sprintf(`document.querySelector('#tools li[data-id="%s"]')`, handle)

	p.until("the handle with its first progress", card+`?.querySelector("progress")?.value === 0.25`)
	text := p.text(fmt.Sprintf(`#tools li[data-id="%s"]`, handle))
	for _, want := range []string{"watch_rollout", "streaming", "connection ", "p-rollout", "25 %", "canary healthy", "running for"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the card lacks %q: %s", want, text)
		}
	}
	// The text chunk reaches the page only as a tools.stream.event:
	// tools.handles carries the latest progress, not the text.
	close(more)
	p.until("the live progress and text", card+`?.querySelector("progress")?.value === 0.6 && `+card+`.textContent.includes("pod 6 of 10 ready")`)
	// The owner is named by its principal once the page has read the roster.
	p.until("the owner named by its principal", card+`?.textContent.includes("owner" + "plain client car-server-go-client, connection ")`)

	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tools li[data-id="%s"] button.cancel`, handle))))
	select {
	case c := <-r.cancels:
		if c.Handle != handle {
			t.Fatalf("tools.cancel names handle %q, want %q", c.Handle, handle)
		}
	case <-ctxT(t).Done():
		t.Fatal("Cancel sent the tool no tools.cancel")
	}
	select {
	case <-stopped:
	case <-ctxT(t).Done():
		t.Fatal("the tool's context did not end on tools.cancel")
	}
	p.until("the handle to leave the panel", `!`+card+` && document.getElementById("tools-empty").hidden === false`)
	var poll *protocol.ToolPollResult
	if err := r.Call(ctxT(t), protocol.MethodToolsPoll, protocol.ToolHandleParams{Handle: handle}, &poll); err != nil {
		t.Fatalf("tools.poll: %v", err)
	}
	if poll == nil || poll.Status != protocol.ToolCancelled {
		t.Fatalf("the handle after Cancel: want cancelled, got %+v", poll)
	}
}
