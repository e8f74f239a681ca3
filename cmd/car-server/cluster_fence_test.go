package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// fencedLedger is the outside system of a fenced tool: per key, the
// highest epoch it has seen and the one entry it applied. A post at a lower
// epoch than the highest is refused; a post for a key already applied
// returns that entry instead of applying another.
type fencedLedger struct {
	mu      sync.Mutex
	highest map[string]uint64
	entries map[string]string // key → the daemon whose post was applied
	refused []protocol.Fence
}

func newFencedLedger() *fencedLedger {
	return &fencedLedger{highest: map[string]uint64{}, entries: map[string]string{}}
}

func (l *fencedLedger) post(f *protocol.Fence, by string) (string, error) {
	if f == nil {
		return "", fmt.Errorf("the ledger takes only fenced calls")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.Epoch < l.highest[f.Key] {
		l.refused = append(l.refused, *f)
		return "", fmt.Errorf("stale epoch %d: the ledger has seen epoch %d for this key", f.Epoch, l.highest[f.Key])
	}
	l.highest[f.Key] = f.Epoch
	if e, ok := l.entries[f.Key]; ok {
		return e, nil
	}
	l.entries[f.Key] = by
	return by, nil
}

// fenceTools is a connection to one daemon that runs book_seat (which
// ignores its fence) and ledger_entry (which posts to the fenced ledger),
// each answering with the daemon's name. With hold set, every call waits
// for hold to close before it answers; arrived gets each call's params as
// it comes.
type fenceTools struct {
	arrived chan protocol.ToolExecuteParams
}

var fenceToolSchemas = []protocol.ToolSchema{{Name: "book_seat", Idempotent: true}, {Name: "ledger_entry", Idempotent: true}}

func newFenceTools(t *testing.T, d *daemon, name string, ledger *fencedLedger, hold <-chan struct{}) (*fenceTools, *client.Client) {
	t.Helper()
	ft := &fenceTools{arrived: make(chan protocol.ToolExecuteParams, 8)}
	c := d.dial(t)
	t.Cleanup(func() { c.Close() })
	c.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p protocol.ToolExecuteParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("tools.execute params: %w", err)
		}
		ft.arrived <- p
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if p.Tool == "ledger_entry" {
			by, err := ledger.post(p.Fence, name)
			if err != nil {
				return nil, err
			}
			return map[string]any{"entry_by": by}, nil
		}
		return map[string]any{"seat_by": name}, nil
	})
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, fenceToolSchemas, nil); err != nil {
		t.Fatal(err)
	}
	return ft, c
}

// next waits for the next call to arrive.
func (ft *fenceTools) next(t *testing.T) protocol.ToolExecuteParams {
	t.Helper()
	select {
	case p := <-ft.arrived:
		return p
	case <-ctxT(t).Done():
		t.Fatal("no tools.execute arrived")
		return protocol.ToolExecuteParams{}
	}
}

// TestClusterAStalledDaemonIsFenced: daemon A claims two idempotent calls
// and stalls (SIGSTOP) with both open, past the claim lease. B takes both
// over at a higher epoch and completes them. A resumes (SIGCONT): its
// completion of the unfenced call is refused by the store (superseded) and
// B's result stands; the fenced ledger refuses A's call for its epoch.
func TestClusterAStalledDaemonIsFenced(t *testing.T) {
	ds := startCluster(t, pgtest.URL(t), 2, "CAR_CLAIM_LEASE=1s")
	a, b := ds[0], ds[1]
	ledger := newFencedLedger()
	resumed := make(chan struct{})
	onA, clientA := newFenceTools(t, a, "A", ledger, resumed)
	onB, clientB := newFenceTools(t, b, "B", ledger, nil)

	seat := toolCall("seat", "book_seat", "fenced-seat")
	entry := toolCall("entry", "ledger_entry", "fenced-entry", "amount", 5)
	onAResult := map[string]<-chan submitted{}
	fenceA := map[string]protocol.Fence{}
	for _, action := range []map[string]any{seat, entry} {
		onAResult[action["tool"].(string)] = submitAsync(t, clientA, "", action)
		p := onA.next(t)
		if p.Fence == nil || p.Fence.Key == "" || p.Fence.Epoch == 0 {
			t.Fatalf("A's call of %s carries fence %+v; want {key, epoch}", p.Tool, p.Fence)
		}
		fenceA[p.Tool] = *p.Fence
	}

	// A stalls with both calls open; B meets both claims live, waits for
	// their lease to lapse, takes them over and completes them.
	if err := a.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.signal(syscall.SIGCONT) }) // so the daemon can stop when the test ends early
	for _, action := range []map[string]any{seat, entry} {
		tool := action["tool"].(string)
		r := mustSubmit(t, clientB, "", action)
		p := onB.next(t)
		if r.Status != protocol.StatusSucceeded || r.CacheHit != "" {
			t.Fatalf("%s on B while A stalls: %s %q hit %q", tool, r.Status, r.ErrorText(), r.CacheHit)
		}
		if p.Fence == nil || p.Fence.Key != fenceA[tool].Key || p.Fence.Epoch <= fenceA[tool].Epoch {
			t.Fatalf("B's take-over of %s carries fence %+v; want A's key at an epoch above A's %d", tool, p.Fence, fenceA[tool].Epoch)
		}
	}

	// A resumes and its tools answer.
	if err := a.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	close(resumed)
	seatA, entryA := await(t, onAResult["book_seat"]), await(t, onAResult["ledger_entry"])
	if seatA.Status != protocol.StatusFailed || !strings.HasPrefix(seatA.ErrorText(), "superseded: ") || !strings.Contains(seatA.ErrorText(), fmt.Sprintf("epoch %d", fenceA["book_seat"].Epoch)) {
		t.Fatalf("A's completion of book_seat after B took it over: %s %q; want it refused as superseded at epoch %d", seatA.Status, seatA.ErrorText(), fenceA["book_seat"].Epoch)
	}
	if entryA.Status != protocol.StatusFailed || !strings.Contains(entryA.ErrorText(), "stale epoch") {
		t.Fatalf("A's ledger_entry after B took it over: %s %q; want the ledger's refusal of a stale epoch", entryA.Status, entryA.ErrorText())
	}
	ledger.mu.Lock()
	refused, entries := append([]protocol.Fence(nil), ledger.refused...), ledger.entries[fenceA["ledger_entry"].Key]
	ledger.mu.Unlock()
	if !reflect.DeepEqual(refused, []protocol.Fence{fenceA["ledger_entry"]}) || entries != "B" {
		t.Fatalf("the ledger refused %+v and holds the entry by %q; want A's fence %+v refused and B's entry", refused, entries, fenceA["ledger_entry"])
	}

	// B's results stand, on either daemon.
	for _, c := range []*client.Client{clientA, clientB} {
		if r := mustSubmit(t, c, "", seat); r.CacheHit != "idempotency" || !reflect.DeepEqual(r.Output, map[string]any{"seat_by": "B"}) {
			t.Fatalf("book_seat resubmitted: %s hit %q output %v; want B's stored result", r.Status, r.CacheHit, r.Output)
		}
		if r := mustSubmit(t, c, "", entry); r.CacheHit != "idempotency" || !reflect.DeepEqual(r.Output, map[string]any{"entry_by": "B"}) {
			t.Fatalf("ledger_entry resubmitted: %s hit %q output %v; want B's stored result", r.Status, r.CacheHit, r.Output)
		}
	}
	testwait.Eventually(t, waitLimit, "A's action_superseded event in the cluster's log", func() bool {
		for _, e := range queryEvents(t, clientB, map[string]any{"kinds": []string{string(engine.EventActionSuperseded)}}) {
			if e.Node == nodeOf(t, a) && e.Data["tool"] == "book_seat" {
				return true
			}
		}
		return false
	})
}
