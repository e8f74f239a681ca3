package storetest

import (
	"slices"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// testTaint: the taint ledger records, replaces and clears keys per
// tenant, answers lookups, lists and counts, and outlives a restart; on a
// shared backend a key one daemon taints is tainted for every other, and a
// clear on one is a clear on all.
func testTaint(t *testing.T, open Open, opts Options) {
	if !has(opts, "Taint") {
		return
	}
	b := newBacking(t, open)
	d := b.open("node-a")
	entry := func(key, action string) protocol.TaintEntry {
		return protocol.TaintEntry{Key: key, ProposalID: "p-" + action, ActionID: action, Tool: "web_fetch", Origin: "whose data comes from untrusted tool 'web_fetch'", At: "2026-03-01T00:00:00Z"}
	}
	if n, err := d.Taint.Count(ctx(t)); err != nil || n != 0 {
		t.Fatalf("Count of an empty ledger = %d, %v; want 0", n, err)
	}
	if got, err := d.Taint.Lookup(ctx(t), "", []string{"page"}); err != nil || len(got) != 0 {
		t.Fatalf("Lookup in an empty ledger = %v, %v; want nothing", got, err)
	}
	if err := d.Taint.Put(ctx(t), "", []protocol.TaintEntry{entry("page", "w1"), entry("notes", "w1")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Taint.Put(ctx(t), "acme", []protocol.TaintEntry{entry("page", "w9")}); err != nil {
		t.Fatal(err)
	}
	// A key tainted again keeps only its newest entry.
	if err := d.Taint.Put(ctx(t), "", []protocol.TaintEntry{entry("page", "w2")}); err != nil {
		t.Fatal(err)
	}
	check := func(who *daemon, what string) {
		t.Helper()
		got, err := who.Taint.Lookup(ctx(t), "", []string{"page", "never", "notes"})
		if err != nil || len(got) != 2 || got["page"] != entry("page", "w2") || got["notes"] != entry("notes", "w1") {
			t.Fatalf("%s: Lookup = %+v, %v; want page by w2 and notes by w1", what, got, err)
		}
		list, err := who.Taint.List(ctx(t), "", nil)
		if err != nil || len(list) != 2 || list[0].Key != "notes" || list[1].Key != "page" {
			t.Fatalf("%s: List = %+v, %v; want notes then page", what, list, err)
		}
		list, err = who.Taint.List(ctx(t), "acme", []string{"page", "page", "x"})
		if err != nil || len(list) != 1 || list[0] != entry("page", "w9") {
			t.Fatalf("%s: List of tenant acme = %+v, %v; want its own page, once", what, list, err)
		}
		if n, err := who.Taint.Count(ctx(t)); err != nil || n != 3 {
			t.Fatalf("%s: Count = %d, %v; want 3 over both tenants", what, n, err)
		}
	}
	check(d, "after the puts")
	d = b.restart(d)
	check(d, "after a restart")
	if opts.Shared {
		other := b.open("node-b")
		check(other, "on another daemon")
		gone, err := other.Taint.Delete(ctx(t), "", []string{"page", "never"})
		if err != nil || !slices.Equal(gone, []string{"page"}) {
			t.Fatalf("Delete on node-b = %v, %v; want [page]", gone, err)
		}
		if got, err := d.Taint.Lookup(ctx(t), "", []string{"page"}); err != nil || len(got) != 0 {
			t.Fatalf("node-a after node-b cleared page: %+v, %v; want it clean", got, err)
		}
	} else {
		gone, err := d.Taint.Delete(ctx(t), "", []string{"page", "never"})
		if err != nil || !slices.Equal(gone, []string{"page"}) {
			t.Fatalf("Delete = %v, %v; want [page]", gone, err)
		}
	}
	d = b.restart(d)
	list, err := d.Taint.List(ctx(t), "", nil)
	if err != nil || len(list) != 1 || list[0].Key != "notes" {
		t.Fatalf("after the delete and a restart: %+v, %v; want notes only", list, err)
	}
	if gone, err := d.Taint.Delete(ctx(t), "acme", []string{"page"}); err != nil || !slices.Equal(gone, []string{"page"}) {
		t.Fatalf("Delete in tenant acme = %v, %v", gone, err)
	}
	if n, err := d.Taint.Count(ctx(t)); err != nil || n != 1 {
		t.Fatalf("Count after the deletes = %d, %v; want 1", n, err)
	}
}
