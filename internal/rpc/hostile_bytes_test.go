package rpc

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// The cost of hostile input, bounded by bytes: each test measures a
// baseline in the same run (heap in use after a collection, or the ring
// byte counters of server.status) and holds the hostile input's growth to
// the configured bounds.

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

func serverStatus(t *testing.T, tb *toolbox) protocol.RuntimeStatus {
	t.Helper()
	var st protocol.ServerStatusResult
	mustCall(t, tb, protocol.MethodServerStatus, nil, &st)
	return st.Runtime
}

// wantRefused checks that err is -32602 naming setting.
func wantRefused(t *testing.T, err error, setting string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a refusal naming %s, got success", setting)
	}
	if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, setting) {
		t.Fatalf("want -32602 naming %s, got %d %q", setting, code, msg)
	}
}

// 60 host.notify of 4 MB each once took the daemon from 21 MB to 3.48 GB,
// kept after the client left. Now each is refused, and 60 of the largest
// accepted payload leave the ring within its byte bound.
func TestHostNotifyBoundedByBytes(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{})
	mustCall(t, tb, protocol.MethodHostNotify, map[string]any{"message": "baseline"}, nil)
	base, heap0 := serverStatus(t, tb), heapInUse()

	huge := map[string]any{"payload": map[string]any{"blob": strings.Repeat("x", 4<<20)}}
	for range 60 {
		wantRefused(t, tb.Call(ctxT(t), protocol.MethodHostNotify, huge, nil), "max_notify_bytes")
	}
	if st := serverStatus(t, tb); st.HostEvents != base.HostEvents || st.HostEventBytes != base.HostEventBytes {
		t.Fatalf("refused notifications reached the ring: %d events, %d bytes; baseline %d, %d", st.HostEvents, st.HostEventBytes, base.HostEvents, base.HostEventBytes)
	}

	largest := map[string]any{"payload": map[string]any{"blob": strings.Repeat("x", DefaultMaxNotifyBytes-100)}}
	for range 60 {
		mustCall(t, tb, protocol.MethodHostNotify, largest, nil)
	}
	st := serverStatus(t, tb)
	if st.HostEventBytes > host.DefaultEventRingBytes || st.HostEvents >= base.HostEvents+60 {
		t.Fatalf("the ring holds %d events of %d bytes; want under %d bytes, fewer than %d events", st.HostEvents, st.HostEventBytes, host.DefaultEventRingBytes, base.HostEvents+60)
	}
	tb.Close()
	growth := heapInUse() - heap0
	t.Logf("host ring: %d events, %d bytes; heap growth %d bytes", st.HostEvents, st.HostEventBytes, growth)
	if growth > 4*host.DefaultEventRingBytes {
		t.Fatalf("the heap grew by %d bytes; the ring's bound is %d", growth, host.DefaultEventRingBytes)
	}
}

// 40 proposals with 4 MiB action ids once kept about 300 MB in the event
// log. Now they are refused at decode and the log does not move; ids at the
// bound cost the log a bounded amount per event.
func TestLongActionIDsRefusedAtDecode(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	tb.submit(t, proposal(toolCall("warm", "echo", map[string]any{})))
	base, heap0 := serverStatus(t, tb), heapInUse()

	long := strings.Repeat("a", 4<<20)
	for range 40 {
		err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(toolCall(long, "echo", map[string]any{}))}, nil)
		wantRefused(t, err, "max_action_id_bytes")
	}
	if st := serverStatus(t, tb); st.Events != base.Events || st.EventBytes != base.EventBytes {
		t.Fatalf("refused proposals reached the event log: %d events, %d bytes; baseline %d, %d", st.Events, st.EventBytes, base.Events, base.EventBytes)
	}
	growth := heapInUse() - heap0
	if growth > 32<<20 {
		t.Fatalf("the heap grew by %d bytes for 40 refused proposals", growth)
	}

	actions := make([]map[string]any, 40)
	for i := range actions {
		actions[i] = toolCall(fmt.Sprintf("%0*d", protocol.DefaultMaxIDBytes, i), "echo", map[string]any{})
	}
	tb.submit(t, proposal(actions...))
	st := serverStatus(t, tb)
	perEvent := (st.EventBytes - base.EventBytes) / int64(st.Events-base.Events)
	t.Logf("40 refused: heap growth %d bytes; %d events of 256-byte ids cost %d bytes each", growth, st.Events-base.Events, perEvent)
	if perEvent > 4<<10 {
		t.Fatalf("an event of a 256-byte id costs the log %d bytes", perEvent)
	}
}

// host.request_approval context and host.register_agent metadata were
// unbounded; now both are refused past max_context_bytes, and what fits is
// taken.
func TestHostContextAndMetadataBounded(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{})
	big := map[string]any{"blob": strings.Repeat("x", DefaultMaxContextBytes)}
	wantRefused(t, tb.Call(ctxT(t), protocol.MethodHostRequestApproval, map[string]any{"title": "t", "context": big}, nil), "max_context_bytes")
	wantRefused(t, tb.Call(ctxT(t), protocol.MethodHostRegisterAgent, map[string]any{"name": "n", "kind": "k", "metadata": big}, nil), "max_context_bytes")
	small := map[string]any{"blob": "x"}
	mustCall(t, tb, protocol.MethodHostRequestApproval, map[string]any{"title": "t", "context": small}, nil)
	mustCall(t, tb, protocol.MethodHostRegisterAgent, map[string]any{"name": "n", "kind": "k", "metadata": small}, nil)
}

// A state value past max_state_value_bytes is refused by state.set and by
// a state_write action alike, and nothing is written.
func TestStateValueBounded(t *testing.T) {
	ts := startRuntime(t, engine.Options{MaxStateValueBytes: 1 << 20}, nil)
	tb := newToolbox(t, ts, map[string]toolFunc{})
	big := strings.Repeat("x", 1<<20)
	wantRefused(t, tb.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "k", "value": big}, nil), "max_state_value_bytes")
	res := tb.submit(t, proposal(map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": big}}))
	if r := resultOf(t, res, "w"); r.Status == protocol.StatusSucceeded || !strings.Contains(r.ErrorText(), "max_state_value_bytes") {
		t.Fatalf("state_write of a value past the bound: got %s %q", r.Status, r.ErrorText())
	}
	var exists bool
	mustCall(t, tb, protocol.MethodStateExists, map[string]any{"key": "k"}, &exists)
	if exists {
		t.Fatal("a refused value was written")
	}
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "k", "value": big[:1000]}, nil)
}

// Stream buffers were bounded per handle only (256 handles × 8 MiB per
// connection). All handles together now hold at most
// max_stream_buffered_bytes; the chunks dropped for it are counted.
func TestStreamBuffersBoundedDaemonWide(t *testing.T) {
	const bound = 64 << 10
	ts := startRuntime(t, engine.Options{Streams: streams.Options{MaxBuffered: bound}}, nil)
	chunk := strings.Repeat("y", 8<<10)
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"spew": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		for range 32 {
			if err := w.Text(ctx, chunk); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}})
	res := tb.submit(t, proposal(streaming("a", "spew"), streaming("b", "spew")))
	handles := []string{handleOf(t, res, "a"), handleOf(t, res, "b")}
	testwait.Eventually(t, testTimeout, "both handles ended", func() bool {
		for _, h := range ts.rt.Streams.List("", true) {
			if h.Status == protocol.ToolRunning {
				return false
			}
		}
		return true
	})
	st := serverStatus(t, tb)
	t.Logf("2 handles × 32 chunks of 8 KiB: %d bytes buffered, %d chunks dropped for the daemon bound", st.StreamBufferedBytes, st.StreamChunksDropped)
	if st.StreamBufferedBytes > bound || st.StreamChunksDropped == 0 {
		t.Fatalf("want at most %d bytes buffered and some chunks dropped, got %d and %d", bound, st.StreamBufferedBytes, st.StreamChunksDropped)
	}
	var dropped uint64
	for _, h := range handles {
		p := pollHandle(t, tb.Client, h)
		if p == nil || p.Status != protocol.ToolSucceeded {
			t.Fatalf("poll %s: %+v", h, p)
		}
		dropped += p.DroppedChunks
	}
	if dropped < st.StreamChunksDropped {
		t.Fatalf("the polls report %d dropped chunks; the daemon dropped %d", dropped, st.StreamChunksDropped)
	}
	if st := serverStatus(t, tb); st.StreamBufferedBytes != 0 {
		t.Fatalf("after the polls %d bytes are still counted", st.StreamBufferedBytes)
	}
}
