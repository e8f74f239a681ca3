package store

import (
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestAStoppedWatchIsForgotten: Wake reaches the watchers of its
// fingerprint only, a stopped watcher hears nothing more, and a
// fingerprint nobody watches any longer leaves nothing behind.
func TestAStoppedWatchIsForgotten(t *testing.T) {
	var ws ApprovalWatchers
	ch, stop := ws.Watch("fp1")
	other, stopOther := ws.Watch("fp2")
	defer stopOther()
	ws.Wake(protocol.ApprovalRecord{Fingerprint: "fp1", Decision: "approved"})
	select {
	case r := <-ch:
		if r.Decision != "approved" {
			t.Fatalf("woke with %+v", r)
		}
	default:
		t.Fatal("a decision did not wake its watcher")
	}
	select {
	case r := <-other:
		t.Fatalf("another fingerprint's watcher woke: %+v", r)
	default:
	}
	stop()
	ws.Wake(protocol.ApprovalRecord{Fingerprint: "fp1", Decision: "rejected"})
	select {
	case r := <-ch:
		t.Fatalf("a stopped watcher woke: %+v", r)
	default:
	}
	ws.mu.Lock()
	left := len(ws.set)
	ws.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d fingerprints watched, want only fp2", left)
	}
}
