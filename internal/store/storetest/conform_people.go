package storetest

import (
	"slices"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
)

// testPeople: a person's token identifies them until it is replaced or
// revoked, on every daemon and after a restart; the store lists names,
// never tokens.
func testPeople(t *testing.T, open Open, opts Options) {
	if !has(opts, "People") {
		return
	}
	b := newBacking(t, open)
	d := b.open("node-a")
	identify := func(p store.People, token string) (string, bool) {
		t.Helper()
		name, ok, err := p.Identify(ctx(t), token)
		if err != nil {
			t.Fatalf("Identify: %v", err)
		}
		return name, ok
	}
	names := func(p store.People) []string {
		t.Helper()
		list, err := p.List(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, ip := range list {
			if ip.IssuedAt.IsZero() {
				t.Fatalf("%s has no IssuedAt", ip.Name)
			}
			out = append(out, ip.Name)
		}
		return out
	}
	if _, ok := identify(d.People, "nobody's"); ok {
		t.Fatal("a token nobody holds identified someone")
	}
	if _, ok := identify(d.People, ""); ok {
		t.Fatal("the empty token identified someone")
	}
	for _, n := range []string{"bob", "alice"} {
		if err := d.People.Issue(ctx(t), n, "token of "+n); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(d.People); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("List: %v, want alice and bob by name", got)
	}
	if n, ok := identify(d.People, "token of bob"); !ok || n != "bob" {
		t.Fatalf("bob's token identified %q %v", n, ok)
	}
	if err := d.People.Issue(ctx(t), "bob", "bob's new token"); err != nil {
		t.Fatal(err)
	}
	if _, ok := identify(d.People, "token of bob"); ok {
		t.Fatal("a replaced token still identifies its person")
	}
	if revoked, err := d.People.Revoke(ctx(t), "alice"); err != nil || !revoked {
		t.Fatalf("Revoke(alice): %v %v", revoked, err)
	}
	if revoked, err := d.People.Revoke(ctx(t), "alice"); err != nil || revoked {
		t.Fatalf("Revoke(alice) again: %v %v, want false", revoked, err)
	}
	again := b.restart(d)
	if n, ok := identify(again.People, "bob's new token"); !ok || n != "bob" {
		t.Fatalf("after a restart bob's token identified %q %v", n, ok)
	}
	if _, ok := identify(again.People, "token of alice"); ok {
		t.Fatal("a revoked token identifies after a restart")
	}
	if got := names(again.People); !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("List after the revoke: %v", got)
	}
}
