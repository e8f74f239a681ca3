package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/protocol"
)

// newStreamBox is a toolbox whose named tools run as streams through
// Client.Stream, beside echo.
func newStreamBox(t *testing.T, ts *testServer, fns map[string]client.StreamFunc) *toolbox {
	t.Helper()
	tools := map[string]toolFunc{"echo": echo}
	var tb *toolbox
	for name, fn := range fns {
		tools[name] = func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
			if call.Handle == "" || call.InvocationMode != protocol.ModeStreaming || call.RequestID != "cb-h"+call.Handle {
				return nil, fmt.Errorf("a streaming call needs its mode and handle, and request_id cb-h<handle>; got %+v", call)
			}
			return tb.Stream(call, fn)
		}
	}
	tb = newToolbox(t, ts, tools)
	return tb
}

// streaming is a streaming tool_call action.
func streaming(id, tool string, extra ...any) map[string]any {
	return toolCall(id, tool, map[string]any{}, append([]any{"invocation_mode", "streaming"}, extra...)...)
}

// handleOf is the handle in a detached action's output.
func handleOf(t *testing.T, res protocol.ProposalResult, id string) string {
	t.Helper()
	r := resultOf(t, res, id)
	out, _ := r.Output.(map[string]any)
	h, _ := out["tool_handle"].(string)
	if r.Status != protocol.StatusSucceeded || h == "" || out["status"] != "running" {
		t.Fatalf("action %s: want succeeded with {tool_handle, status: running}, got %s %v %q", id, r.Status, r.Output, r.ErrorText())
	}
	return h
}

// pollHandle calls tools.poll; nil is a null reply.
func pollHandle(t *testing.T, c *client.Client, handle string) *protocol.ToolPollResult {
	t.Helper()
	var res *protocol.ToolPollResult
	if err := c.Call(ctxT(t), protocol.MethodToolsPoll, protocol.ToolHandleParams{Handle: handle}, &res); err != nil {
		t.Fatalf("tools.poll: %v", err)
	}
	return res
}

func decodeChunk(t *testing.T, raw json.RawMessage) protocol.ToolStreamChunk {
	t.Helper()
	c, err := protocol.DecodeChunk(raw)
	if err != nil {
		t.Fatalf("chunk %s: %v", raw, err)
	}
	return c
}

// streamEnds delivers every tool_stream_ended event of the runtime.
func streamEnds(t *testing.T, ts *testServer) <-chan engine.Event {
	ch := make(chan engine.Event, 64)
	_, cancel := ts.rt.Events.Subscribe(engine.EventQuery{Kinds: []engine.EventKind{engine.EventToolStreamEnded}}, func(e engine.Event) { ch <- e })
	t.Cleanup(cancel)
	return ch
}

func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// dialHost is a host-role client.
func dialHost(t *testing.T, ts *testServer, token string) *toolbox {
	t.Helper()
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &toolbox{Client: c}
}

// fakeClock is the streams table's clock, moved by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestStreamPollDrainsEveryChunkInOrder(t *testing.T) {
	ts := startServer(t, Options{})
	const total, batch = 5000, 500 // a batch fits the 1,024-chunk buffer
	polled := make(chan struct{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		for i := 0; i < total; i++ {
			if i > 0 && i%batch == 0 {
				select {
				case <-polled:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if err := w.Text(ctx, strconv.Itoa(i)); err != nil {
				return nil, err
			}
		}
		return map[string]any{"lines": total}, nil
	}})
	handle := handleOf(t, tb.submit(t, proposal(streaming("s", "tail"))), "s")

	var got []string
	signalled := 0
	var final *protocol.ToolPollResult
	for final == nil {
		res := pollHandle(t, tb.Client, handle)
		if res == nil {
			t.Fatal("the handle was consumed before its terminal status was seen")
		}
		if res.DroppedChunks != 0 || res.Handle != handle || res.Tool != "tail" || res.ActionID != "s" {
			t.Fatalf("poll: %+v", res)
		}
		for _, raw := range res.Chunks {
			if c := decodeChunk(t, raw); c.Kind == protocol.ChunkText {
				got = append(got, *c.Text)
			}
		}
		if res.Status != protocol.ToolRunning {
			final = res
		} else if len(got)/batch > signalled && len(got) < total {
			signalled++
			polled <- struct{}{}
		}
	}
	if len(got) != total {
		t.Fatalf("drained %d text chunks, want %d", len(got), total)
	}
	for i, s := range got {
		if s != strconv.Itoa(i) {
			t.Fatalf("chunk %d is %q: out of order or duplicated", i, s)
		}
	}
	last := decodeChunk(t, final.Chunks[len(final.Chunks)-1])
	if final.Status != protocol.ToolSucceeded || last.Kind != protocol.ChunkDone || string(final.Result) != `{"lines":5000}` {
		t.Fatalf("final poll: status %s, last chunk %s, result %s", final.Status, last.Kind, final.Result)
	}
	if res := pollHandle(t, tb.Client, handle); res != nil {
		t.Fatalf("a poll after the terminal status was seen: want null, got %+v", res)
	}
}

func TestStreamAwaitReadsResultAndOverflowReportsDropped(t *testing.T) {
	ts := startServer(t, Options{})
	const lines = 1500
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"build": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		for i := 0; i < lines; i++ {
			if err := w.Text(ctx, strconv.Itoa(i)); err != nil {
				return nil, err
			}
		}
		return map[string]any{"exit": 0, "lines": lines}, nil
	}})
	res := tb.submit(t, proposal(
		streaming("s", "build"),
		toolCall("b", "echo", map[string]any{"exit": "$s.result.exit", "handle": "$s.output.tool_handle"}, "await", []string{"s"}),
	))
	handle := handleOf(t, res, "s")
	b := resultOf(t, res, "b")
	if b.Status != protocol.StatusSucceeded || string(mustJSON(b.Output)) != `{"exit":0,"handle":"`+handle+`"}` {
		t.Fatalf("b awaits s and reads $s.result: got %s %s %q", b.Status, mustJSON(b.Output), b.ErrorText())
	}
	// b ran after the done chunk: the buffer now holds the last 1,024 chunks.
	p := pollHandle(t, tb.Client, handle)
	const kept = 1024
	if p == nil || p.Status != protocol.ToolSucceeded || len(p.Chunks) != kept || p.DroppedChunks != lines+1-kept {
		t.Fatalf("poll after overflow: want %d chunks and %d dropped, got %+v", kept, lines+1-kept, p)
	}
	if first := decodeChunk(t, p.Chunks[0]); *first.Text != strconv.Itoa(lines+1-kept) {
		t.Fatalf("the oldest chunks go first: first kept is %q", *first.Text)
	}
	evs := ts.rt.Events.Query(engine.EventQuery{Kinds: []engine.EventKind{engine.EventToolStreamStarted, engine.EventToolStreamEnded}})
	sort.Slice(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
	if len(evs) != 2 || evs[0].Kind != engine.EventToolStreamStarted || evs[1].Data["status"] != "succeeded" || evs[0].Data["handle"] != handle || evs[1].Data["dropped_chunks"] != uint64(lines+1-kept) {
		t.Fatalf("want the start then the end of the handle, got %+v", evs)
	}
}

func TestStreamAwaitRefusals(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(context.Context, protocol.ToolExecuteParams, *client.ChunkWriter) (any, error) { return nil, nil }})
	res := tb.submit(t, proposal(
		streaming("idem", "tail", "idempotent", true),
		toolCall("one", "echo", map[string]any{}),
		toolCall("bad", "echo", map[string]any{}, "await", []string{"one"}),
		toolCall("noawait", "echo", map[string]any{"x": "$one.result"}),
	))
	for id, want := range map[string]string{
		"idem":    "a stream cannot be replayed",
		"bad":     "not a streaming or long_running tool_call",
		"noawait": `needs await: ["one"]`,
	} {
		if r := resultOf(t, res, id); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), want) {
			t.Errorf("%s: want rejected with %q, got %s %q", id, want, r.Status, r.ErrorText())
		}
	}
}

func TestStreamSubscribersSeeChunksLive(t *testing.T) {
	ts := startServer(t, Options{HostToken: "host"})
	release := make(chan struct{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"watch": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Text(ctx, "first"); err != nil {
			return nil, err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, w.Progress(ctx, 1, "all done")
	}})
	host := dialHost(t, ts, "host")
	other := newToolbox(t, ts, map[string]toolFunc{})
	subscribe := func(c *toolbox) <-chan protocol.ToolStreamEvent {
		ch := make(chan protocol.ToolStreamEvent, 16)
		c.HandleNotification(protocol.MethodToolsStreamEvent, func(raw json.RawMessage) {
			var e protocol.ToolStreamEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Errorf("tools.stream.event: %v", err)
			}
			ch <- e
		})
		var r protocol.ToolStreamSubscribeResult
		mustCall(t, c, protocol.MethodToolsStreamSubscribe, nil, &r)
		mustCall(t, c, protocol.MethodToolsStreamSubscribe, nil, &r) // idempotent
		if !r.Subscribed {
			t.Fatal("tools.stream.subscribe: want subscribed true")
		}
		return ch
	}
	own, hosted := subscribe(tb), subscribe(host)
	handle := handleOf(t, tb.submit(t, proposal(streaming("s", "watch"))), "s")

	// The tool is parked after its first chunk: both subscribers see it now.
	for name, ch := range map[string]<-chan protocol.ToolStreamEvent{"owner": own, "host": hosted} {
		e := next(t, ch, name+" event")
		if c := decodeChunk(t, e.Chunk); e.Handle != handle || *c.Text != "first" {
			t.Fatalf("%s: got %+v", name, e)
		}
	}
	if p := pollHandle(t, tb.Client, handle); p == nil || len(p.Chunks) != 1 || p.Status != protocol.ToolRunning {
		t.Fatalf("first poll: %+v", p)
	}
	if p := pollHandle(t, tb.Client, handle); p == nil || len(p.Chunks) != 0 || p.Status != protocol.ToolRunning {
		t.Fatalf("a second immediate poll drains nothing: %+v", p)
	}
	if p := pollHandle(t, other.Client, handle); p != nil {
		t.Fatalf("another connection sees the handle: %+v", p)
	}
	var cr protocol.ToolsCancelResult
	if mustCall(t, other, protocol.MethodToolsCancel, protocol.ToolHandleParams{Handle: handle}, &cr); cr.Cancelled {
		t.Fatal("another connection cancelled the handle")
	}
	close(release)
	for name, ch := range map[string]<-chan protocol.ToolStreamEvent{"owner": own, "host": hosted} {
		if c := decodeChunk(t, next(t, ch, name+" progress").Chunk); c.Kind != protocol.ChunkProgress || *c.Message != "all done" {
			t.Fatalf("%s: want the progress chunk, got %+v", name, c)
		}
		if c := decodeChunk(t, next(t, ch, name+" done").Chunk); c.Kind != protocol.ChunkDone {
			t.Fatalf("%s: want done, got %+v", name, c)
		}
	}
	var ur protocol.ToolStreamSubscribeResult
	if mustCall(t, host, protocol.MethodToolsStreamUnsubscribe, nil, &ur); ur.WasSubscribed == nil || !*ur.WasSubscribed {
		t.Fatalf("tools.stream.unsubscribe: %+v", ur)
	}
	if p := pollHandle(t, host.Client, handle); p == nil || p.Status != protocol.ToolSucceeded {
		t.Fatalf("a host polls any connection's handle: %+v", p)
	}
}

func TestStreamSlowSubscriberSlowsNobody(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	holdNotifications(t, held, release, func(c *conn, method string) bool { return c.isHost() && method == protocol.MethodToolsStreamEvent })
	ts := startServer(t, Options{HostToken: "host"})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	const lines = 2000 // far over the 256 a subscriber's queue holds
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"build": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		for i := 0; i < lines; i++ {
			if err := w.Text(ctx, strconv.Itoa(i)); err != nil {
				return nil, err
			}
		}
		return "ok", nil
	}})
	slow := dialHost(t, ts, "host")
	slowEvents := make(chan protocol.ToolStreamEvent, lines+1)
	slow.HandleNotification(protocol.MethodToolsStreamEvent, func(raw json.RawMessage) {
		var e protocol.ToolStreamEvent
		_ = json.Unmarshal(raw, &e)
		slowEvents <- e
	})
	mustCall(t, slow, protocol.MethodToolsStreamSubscribe, nil, nil)
	fastDone := make(chan struct{})
	tb.HandleNotification(protocol.MethodToolsStreamEvent, func(raw json.RawMessage) {
		if strings.Contains(string(raw), `"kind":"done"`) {
			close(fastDone)
		}
	})
	mustCall(t, tb, protocol.MethodToolsStreamSubscribe, nil, nil)

	// The whole stream runs, and the proposal awaiting it finishes, while the
	// slow subscriber's delivery is held.
	res := tb.submit(t, proposal(streaming("s", "build"), toolCall("b", "echo", map[string]any{"r": "$s.result"}, "await", []string{"s"})))
	if r := resultOf(t, res, "b"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("b: %s %q", r.Status, r.ErrorText())
	}
	next(t, held, "held delivery to the slow subscriber")
	next(t, fastDone, "done chunk at the other subscriber")
	other := newToolbox(t, ts, map[string]toolFunc{})
	mustCall(t, other, protocol.MethodToolsList, nil, nil)

	close(release)
	var dropped uint64
	for {
		e := next(t, slowEvents, "event at the slow subscriber")
		dropped += e.Dropped
		if decodeChunk(t, e.Chunk).Kind == protocol.ChunkDone {
			break
		}
	}
	if dropped == 0 {
		t.Fatal("the slow subscriber fell far behind but was told of no dropped events")
	}
}

func TestStreamCancelReachesTheTool(t *testing.T) {
	ts := startServer(t, Options{})
	started, stopped := make(chan struct{}), make(chan error, 1)
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"follow": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Text(ctx, "rolling out"); err != nil {
			return nil, err
		}
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return nil, ctx.Err()
	}})
	ends := streamEnds(t, ts)
	handle := handleOf(t, tb.submit(t, proposal(streaming("s", "follow"))), "s")
	next(t, started, "start")
	var cr protocol.ToolsCancelResult
	if mustCall(t, tb, protocol.MethodToolsCancel, protocol.ToolHandleParams{Handle: handle}, &cr); !cr.Cancelled {
		t.Fatal("tools.cancel: want cancelled true")
	}
	if n := next(t, tb.cancel, "tools.cancel notification"); n.Handle != handle || n.ActionID != "s" || n.RequestID != "cb-h"+handle {
		t.Fatalf("tools.cancel notification: %+v", n)
	}
	next(t, stopped, "the tool stopping")
	if e := next(t, ends, "end event"); e.Data["status"] != "cancelled" || e.Data["handle"] != handle {
		t.Fatalf("end event: %+v", e)
	}
	if p := pollHandle(t, tb.Client, handle); p == nil || p.Status != protocol.ToolCancelled || len(p.Chunks) != 1 {
		t.Fatalf("poll after cancel: %+v", p)
	}
	if mustCall(t, tb, protocol.MethodToolsCancel, protocol.ToolHandleParams{Handle: handle}, &cr); cr.Cancelled {
		t.Fatal("a second cancel of an ended handle: want cancelled false")
	}
}

func TestStreamProposalCancelEndsItsHandles(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(ctx context.Context, _ protocol.ToolExecuteParams, _ *client.ChunkWriter) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	handle := handleOf(t, tb.submit(t, proposal(streaming("s", "tail"))), "s")
	var res protocol.ProposalCancelResult
	if mustCall(t, tb, protocol.MethodProposalCancel, protocol.ProposalCancelParams{ProposalID: "p-test", Reason: "enough"}, &res); !res.Cancelled {
		t.Fatal("proposal.cancel of a proposal with a running handle: want cancelled true")
	}
	if n := next(t, tb.cancel, "tools.cancel notification"); n.Handle != handle || n.Reason != "cancelled: enough" {
		t.Fatalf("tools.cancel notification: %+v", n)
	}
	if p := pollHandle(t, tb.Client, handle); p == nil || p.Status != protocol.ToolCancelled {
		t.Fatalf("poll: %+v", p)
	}
}

func TestStreamIdleTimeoutAndReap(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	ts := startServerWith(t, serverSetup{engine: engine.Options{Streams: streams.Options{Now: clock.Now}}})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{
		"quiet": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"quick": func(context.Context, protocol.ToolExecuteParams, *client.ChunkWriter) (any, error) { return 1, nil },
	})
	res := tb.submit(t, proposal(streaming("q", "quiet"), streaming("k", "quick"), toolCall("b", "echo", map[string]any{}, "await", []string{"k"})))
	quiet, quick := handleOf(t, res, "q"), handleOf(t, res, "k")

	sweep := func(wantFailed, wantReaped int, when string) {
		t.Helper()
		if failed, reaped := ts.rt.Streams.Sweep(); failed != wantFailed || reaped != wantReaped {
			t.Fatalf("%s: %d failed and %d reaped; want %d and %d", when, failed, reaped, wantFailed, wantReaped)
		}
	}
	clock.advance(15*time.Minute - time.Second)
	sweep(0, 0, "just before 15 minutes")
	clock.advance(time.Second)
	sweep(0, 1, "15 minutes after quick ended unpolled")
	if p := pollHandle(t, tb.Client, quick); p != nil {
		t.Fatalf("a reaped handle polls null, got %+v", p)
	}
	clock.advance(15*time.Minute - time.Second)
	sweep(0, 0, "just before the idle timeout")
	clock.advance(time.Second)
	sweep(1, 0, "30 minutes of silence")
	if n := next(t, tb.cancel, "tools.cancel for the idle handle"); n.Handle != quiet || !strings.Contains(n.Reason, "stream_idle_timeout") {
		t.Fatalf("tools.cancel: %+v", n)
	}
	clock.advance(15 * time.Minute)
	sweep(0, 1, "15 minutes after the idle failure")
	if n := ts.rt.Streams.Len(); n != 0 {
		t.Fatalf("%d handles left", n)
	}
}

func TestStreamIdleFailureSeenByPoll(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	ts := startServerWith(t, serverSetup{engine: engine.Options{Streams: streams.Options{Now: clock.Now}}})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"quiet": func(ctx context.Context, _ protocol.ToolExecuteParams, _ *client.ChunkWriter) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	handle := handleOf(t, tb.submit(t, proposal(streaming("q", "quiet"))), "q")
	clock.advance(31 * time.Minute)
	ts.rt.Streams.Sweep()
	if p := pollHandle(t, tb.Client, handle); p == nil || p.Status != protocol.ToolFailed || !strings.Contains(p.Error, "stream_idle_timeout") {
		t.Fatalf("poll of an idle handle: %+v", p)
	}
}

func TestStreamToolConnectionClosing(t *testing.T) {
	ts := startServer(t, Options{HostToken: "host"})
	started := make(chan struct{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	host := dialHost(t, ts, "host")
	ends := streamEnds(t, ts)
	handle := handleOf(t, tb.submit(t, proposal(streaming("s", "tail"))), "s")
	next(t, started, "start")
	tb.Close()
	if e := next(t, ends, "end event"); e.Data["status"] != "failed" || !strings.Contains(e.Data["error"].(string), "connection running the tool closed") {
		t.Fatalf("end event: %+v", e)
	}
	if p := pollHandle(t, host.Client, handle); p == nil || p.Status != protocol.ToolFailed || !strings.Contains(p.Error, "connection running the tool closed") {
		t.Fatalf("host poll: %+v", p)
	}
}

func TestStreamChunksIgnoredQuietly(t *testing.T) {
	ts := startServerWith(t, serverSetup{engine: engine.Options{Streams: streams.Options{MaxChunkBytes: 200, MaxPerOwner: 1}}})
	release := make(chan struct{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Text(ctx, strings.Repeat("x", 300)); err != nil { // over the chunk limit: ignored
			return nil, err
		}
		if err := w.Text(ctx, "kept"); err != nil {
			return nil, err
		}
		<-release
		return nil, nil
	}})
	defer close(release)
	res := tb.submit(t, proposal(streaming("s", "tail"), streaming("t", "tail", "dependencies", []string{"s"})))
	handle := handleOf(t, res, "s")
	if r := resultOf(t, res, "t"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "max_stream_handles") {
		t.Fatalf("a second handle over the per-connection limit: %s %q", r.Status, r.ErrorText())
	}
	ts.waitLog(t, "tools.stream.chunk ignored", 1) // the oversized one

	// Another connection sends chunks for this handle and for none: each is
	// ignored without a reply, and its next request is answered normally.
	raw := ts.raw(t)
	for i := 0; i < 50; i++ {
		raw.send(`{"jsonrpc":"2.0","method":"tools.stream.chunk","params":{"handle":"` + handle + `","chunk":{"kind":"text","text":"intruder"}}}`)
		raw.send(`{"jsonrpc":"2.0","method":"tools.stream.chunk","params":{"handle":"nope","chunk":{"kind":"done"}}}`)
	}
	if rep := raw.call(`{"jsonrpc":"2.0","id":7,"method":"tools.list"}`); rep.Error != nil || string(rep.ID) != "7" {
		t.Fatalf("the first frame after ignored chunks must be the reply to the request, got %+v", rep)
	}
	ts.waitLog(t, "tools.stream.chunk ignored", 2) // the 1st on the intruder's connection
	ts.waitLog(t, "tools.stream.chunk ignored", 3) // its 10th
	p := pollHandle(t, tb.Client, handle)
	if p == nil || len(p.Chunks) != 1 || *decodeChunk(t, p.Chunks[0]).Text != "kept" {
		t.Fatalf("only the owner's well-formed chunk is kept: %+v", p)
	}
}

// A streaming call of a tool whose schema says idempotent is refused with
// the words of an action that says so itself.
func TestStreamSchemaIdempotentRefused(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(context.Context, protocol.ToolExecuteParams, *client.ChunkWriter) (any, error) { return nil, nil }})
	mustCall(t, tb, protocol.MethodToolsRegister, []any{map[string]any{"name": "tail_idem", "idempotent": true}}, nil)
	res := tb.submit(t, proposal(
		streaming("by_action", "tail", "idempotent", true),
		streaming("by_schema", "tail_idem"),
	))
	want := func(id string) string {
		return "action '" + id + "' is streaming and idempotent: a stream cannot be replayed from the idempotency cache; drop idempotent"
	}
	for _, id := range []string{"by_action", "by_schema"} {
		if r := resultOf(t, res, id); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), want(id)) {
			t.Errorf("%s: want rejected with %q, got %s %q", id, want(id), r.Status, r.ErrorText())
		}
	}
}
