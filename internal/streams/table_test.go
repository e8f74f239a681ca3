package streams

import (
	"encoding/json"
	"testing"

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
