package streams

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// An end that comes before the tool's start answer is recorded after the
// start; a handle whose tool never started records nothing.
func TestEndWaitsForStart(t *testing.T) {
	var log []string
	tb := New(Options{}, func(e Ended) { log = append(log, "end "+string(e.Status)) })
	h, err := tb.Open(Info{Owner: "c1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Chunk("c1", h.Handle, json.RawMessage(`{"kind":"done"}`)); err != nil {
		t.Fatal(err)
	}
	if len(log) != 0 {
		t.Fatalf("end recorded before the start: %v", log)
	}
	tb.Started(h, func() { log = append(log, "start") })
	if len(log) != 2 || log[0] != "start" || log[1] != "end succeeded" {
		t.Fatalf("want start then end, got %v", log)
	}
	g, _ := tb.Open(Info{Owner: "c1"}, nil)
	tb.Cancel(g.Handle, "c1", false, "stop")
	tb.Discard(g)
	if len(log) != 2 || tb.Len() != 1 {
		t.Fatalf("a tool that never started recorded %v; %d handles left", log, tb.Len())
	}
	if p := tb.Poll(h.Handle, "c1", false); p == nil || p.Status != protocol.ToolSucceeded || tb.Poll(h.Handle, "c1", false) != nil {
		t.Fatalf("poll: %+v", p)
	}
}

// List shows what a handle holds without draining it: the latest progress,
// the time of the last chunk, the chunks waiting and those dropped, to the
// owner and a host only.
func TestListDescribesWithoutDraining(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tb := New(Options{BufferChunks: 2, Now: func() time.Time { return now }}, nil)
	first, err := tb.Open(Info{Owner: "c1", Tool: "build", Mode: protocol.ModeStreaming, ProposalID: "p1", ActionID: "a1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	second, err := tb.Open(Info{Owner: "c2", Tool: "tail"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{`{"kind":"progress","fraction":0.25}`, `{"kind":"progress","fraction":0.5,"message":"half"}`, `{"kind":"text","text":"linking"}`} {
		now = now.Add(time.Second)
		if err := tb.Chunk("c1", first.Handle, json.RawMessage(c)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // a second listing sees the same: nothing was drained
		got := tb.List("c1", false)
		if len(got) != 1 {
			t.Fatalf("the owner lists %d handles, want its 1: %+v", len(got), got)
		}
		h := got[0]
		if h.Handle != first.Handle || h.Tool != "build" || h.Mode != protocol.ModeStreaming || h.Status != protocol.ToolRunning ||
			h.OwnerConnection != "c1" || h.ProposalID != "p1" || h.ActionID != "a1" {
			t.Fatalf("identity: %+v", h)
		}
		if h.Progress == nil || *h.Progress.Fraction != 0.5 || *h.Progress.Message != "half" {
			t.Fatalf("want the latest progress chunk (0.5, half), got %+v", h.Progress)
		}
		if h.LastChunkAt == nil || !h.LastChunkAt.Equal(now) || !h.StartedAt.Equal(now.Add(-4*time.Second)) {
			t.Fatalf("times: started %v, last chunk %v; now %v", h.StartedAt, h.LastChunkAt, now)
		}
		if h.ChunksBuffered != 2 || h.DroppedChunks != 1 {
			t.Fatalf("want 2 buffered and 1 dropped, got %d and %d", h.ChunksBuffered, h.DroppedChunks)
		}
	}
	if got := tb.List("c3", false); len(got) != 0 {
		t.Fatalf("a stranger lists %+v", got)
	}
	all := tb.List("c3", true)
	if len(all) != 2 || all[0].Handle != first.Handle || all[1].Handle != second.Handle || all[1].LastChunkAt != nil || all[1].Progress != nil {
		t.Fatalf("a host lists every handle, oldest first: %+v", all)
	}
	tb.Cancel(first.Handle, "c1", false, "stop")
	if got := tb.List("c1", false); len(got) != 1 || got[0].Status != protocol.ToolCancelled {
		t.Fatalf("an ended, unpolled handle is listed with its status: %+v", got)
	}
}

// All handles together hold at most MaxBuffered bytes: a chunk past it
// drops the oldest chunks of its own handle, its own too when the others
// hold the bytes, and the drops are counted; a poll frees the bytes.
func TestDaemonWideBufferBound(t *testing.T) {
	chunk := json.RawMessage(`{"kind":"text","text":"0123456789"}`) // re-encoded as it is: 35 bytes
	size := int64(len(chunk))
	tb := New(Options{MaxBuffered: 4 * size}, nil)
	a, _ := tb.Open(Info{Owner: "c1"}, nil)
	b, _ := tb.Open(Info{Owner: "c2"}, nil)
	send := func(h *Handle, owner string, n int) {
		for range n {
			if err := tb.Chunk(owner, h.Handle, chunk); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(a, "c1", 4)
	if got, dropped := tb.Buffered(); got != 4*size || dropped != 0 {
		t.Fatalf("at the bound: %d bytes and %d dropped, want %d and 0", got, dropped, 4*size)
	}
	send(b, "c2", 2) // a holds every byte: b's own chunks go
	if got, dropped := tb.Buffered(); got != 4*size || dropped != 2 {
		t.Fatalf("past the bound: %d bytes and %d dropped, want %d and 2", got, dropped, 4*size)
	}
	if p := tb.Poll(b.Handle, "c2", false); p == nil || len(p.Chunks) != 0 || p.DroppedChunks != 2 {
		t.Fatalf("b's poll: want no chunks and 2 dropped, got %+v", p)
	}
	if p := tb.Poll(a.Handle, "c1", false); p == nil || len(p.Chunks) != 4 {
		t.Fatalf("a's poll: want its 4 chunks, got %+v", p)
	}
	if got, _ := tb.Buffered(); got != 0 {
		t.Fatalf("after the polls %d bytes are counted, want 0", got)
	}
	send(b, "c2", 5) // alone, b keeps the newest 4
	if p := tb.Poll(b.Handle, "c2", false); p == nil || len(p.Chunks) != 4 || p.DroppedChunks != 1 {
		t.Fatalf("b alone: want 4 chunks and 1 dropped, got %+v", p)
	}
}
