package storetest

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
)

func get(t *testing.T, s store.State, tenant, key string) (any, bool) {
	t.Helper()
	v, ok, err := s.Get(ctx(t), tenant, key)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", tenant, key, err)
	}
	return v, ok
}

func write(t *testing.T, s store.State, tenant, key string, v any) (uint64, store.Prior) {
	t.Helper()
	version, prior, err := s.Write(ctx(t), tenant, key, v)
	if err != nil {
		t.Fatalf("Write(%q, %q): %v", tenant, key, err)
	}
	if version == 0 {
		t.Fatalf("Write(%q, %q) stamped version 0", tenant, key)
	}
	return version, prior
}

func restore(t *testing.T, s store.State, tenant, key string, version uint64, prior store.Prior) bool {
	t.Helper()
	ok, err := s.Restore(ctx(t), tenant, key, version, prior)
	if err != nil {
		t.Fatalf("Restore(%q, %q): %v", tenant, key, err)
	}
	return ok
}

func export(t *testing.T, s store.State, tenant *string) map[string]map[string]any {
	t.Helper()
	out, err := s.Export(ctx(t), tenant)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	return out
}

func testState(t *testing.T, open Open, opts Options) {
	t.Run("WriteRestore", func(t *testing.T) {
		s := newBacking(t, open).open("node-a").State
		if _, ok := get(t, s, "", "k"); ok {
			t.Fatal("an empty store holds k")
		}
		v1, v2 := value(t, `{"n":1,"list":[true,null,"x"]}`), value(t, `2.5`)
		ver1, prior := write(t, s, "", "k", v1)
		if prior.Existed || prior.Value != nil || prior.Version != 0 {
			t.Fatalf("the prior of a new key: %+v", prior)
		}
		ver2, prior2 := write(t, s, "", "k", v2)
		if ver2 <= ver1 || !prior2.Existed || prior2.Version != ver1 || !reflect.DeepEqual(prior2.Value, v1) {
			t.Fatalf("the second write: version %d after %d, prior %+v", ver2, ver1, prior2)
		}
		if restore(t, s, "", "k", ver1, prior) {
			t.Fatal("the first write's rollback restored over the second write")
		}
		if got, _ := get(t, s, "", "k"); !reflect.DeepEqual(got, v2) {
			t.Fatalf("after a refused rollback k = %#v, want the second write %#v", got, v2)
		}
		// Rolled back last first, each write finds its own version.
		if !restore(t, s, "", "k", ver2, prior2) {
			t.Fatal("the second write's rollback was refused")
		}
		if got, _ := get(t, s, "", "k"); !reflect.DeepEqual(got, v1) {
			t.Fatalf("after the second write's rollback k = %#v, want %#v", got, v1)
		}
		if !restore(t, s, "", "k", ver1, prior) {
			t.Fatal("the first write's rollback, now in turn, was refused")
		}
		if _, ok := get(t, s, "", "k"); ok {
			t.Fatal("after both rollbacks k still exists")
		}
		if restore(t, s, "", "k", ver1, prior) {
			t.Fatal("a rollback of a key that is gone restored")
		}
		// Set stamps a version too: a rollback of an earlier Write keeps it.
		ver3, prior3 := write(t, s, "", "k", "w")
		if err := s.Set(ctx(t), "", "k", "set"); err != nil {
			t.Fatal(err)
		}
		if restore(t, s, "", "k", ver3, prior3) {
			t.Fatal("a rollback restored over a later Set")
		}
		if got, _ := get(t, s, "", "k"); got != "set" {
			t.Fatalf("k = %#v, want the Set's value", got)
		}
		// A namespace emptied by a rollback is not exported.
		verT, priorT := write(t, s, "gone", "k", "v")
		restore(t, s, "gone", "k", verT, priorT)
		if all := export(t, s, nil); all["gone"] != nil {
			t.Fatalf("Export(nil) lists the emptied namespace: %v", all)
		}
	})

	t.Run("TenantsKeysSnapshotExportReplace", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		s := d.State
		set := func(tenant, key string, v any) {
			t.Helper()
			if err := s.Set(ctx(t), tenant, key, v); err != nil {
				t.Fatal(err)
			}
		}
		set("", "b", "unscoped b")
		set("", "B", "unscoped B")
		set("", "a", value(t, `7`))
		set("t1", "a", "t1's a")
		if v, _ := get(t, s, "t1", "a"); v != "t1's a" {
			t.Fatalf("t1's a = %#v", v)
		}
		if _, ok := get(t, s, "t2", "a"); ok {
			t.Fatal("t2 sees t1's key")
		}
		keys, err := s.Keys(ctx(t), "")
		if err != nil || !reflect.DeepEqual(keys, []string{"B", "a", "b"}) {
			t.Fatalf("Keys(\"\") = %q %v, want [B a b] (byte order)", keys, err)
		}
		if keys, err := s.Keys(ctx(t), "t2"); err != nil || keys == nil || len(keys) != 0 {
			t.Fatalf("Keys of an empty namespace = %#v %v, want an empty list", keys, err)
		}
		snap, err := s.Snapshot(ctx(t), "")
		want := map[string]any{"a": value(t, `7`), "b": "unscoped b", "B": "unscoped B"}
		if err != nil || !reflect.DeepEqual(snap, want) {
			t.Fatalf("Snapshot(\"\") = %#v %v, want %#v", snap, err, want)
		}
		if snap, err := s.Snapshot(ctx(t), "t2"); err != nil || snap == nil || len(snap) != 0 {
			t.Fatalf("Snapshot of an empty namespace = %#v %v", snap, err)
		}
		t1, t2 := "t1", "t2"
		if got := export(t, s, &t2); !reflect.DeepEqual(got, map[string]map[string]any{"t2": {}}) {
			t.Fatalf("Export(t2) = %#v, want t2 present and empty", got)
		}
		all := export(t, s, nil)
		if len(all) != 2 || !reflect.DeepEqual(all[""], want) || !reflect.DeepEqual(all["t1"], map[string]any{"a": "t1's a"}) {
			t.Fatalf("Export(nil) = %#v", all)
		}

		// Replace one namespace: the others stay; an earlier write's
		// rollback finds a fresh version and keeps the replaced value.
		ver, prior := write(t, s, "t1", "x", "before")
		n, err := s.Replace(ctx(t), &t1, map[string]map[string]any{"t1": {"x": "replaced", "y": value(t, `[1]`)}, "": {"ignored": true}})
		if err != nil || n != 2 {
			t.Fatalf("Replace(t1) = %d %v, want 2 keys", n, err)
		}
		if restore(t, s, "t1", "x", ver, prior) {
			t.Fatal("a rollback of a write before the Replace restored over it")
		}
		if got := export(t, s, &t1)["t1"]; !reflect.DeepEqual(got, map[string]any{"x": "replaced", "y": value(t, `[1]`)}) {
			t.Fatalf("t1 after its Replace: %#v", got)
		}
		if got, _ := get(t, s, "", "ignored"); got != nil {
			t.Fatal("Replace(t1) wrote into another namespace")
		}
		// Replace everything: namespaces the checkpoint lacks go.
		n, err = s.Replace(ctx(t), nil, map[string]map[string]any{"t3": {"k": "v"}, "": {"z": "only"}})
		if err != nil || n != 2 {
			t.Fatalf("Replace(nil) = %d %v, want 2 keys", n, err)
		}
		if got := export(t, s, nil); !reflect.DeepEqual(got, map[string]map[string]any{"t3": {"k": "v"}, "": {"z": "only"}}) {
			t.Fatalf("after Replace(nil), Export(nil) = %#v", got)
		}

		d = b.restart(d)
		got := export(t, d.State, nil)
		if opts.StateInMemory {
			if len(got) != 0 {
				t.Fatalf("state kept in memory holds %#v after a restart", got)
			}
		} else if !reflect.DeepEqual(got, map[string]map[string]any{"t3": {"k": "v"}, "": {"z": "only"}}) {
			t.Fatalf("after a restart, Export(nil) = %#v", got)
		}
	})

	// Writers of one key that race: their priors chain in version order
	// (each write replaced exactly the one before it), the key holds the
	// last, and rolling them back last first walks the chain back.
	t.Run("RacingWritersOfOneKey", func(t *testing.T) {
		s := newBacking(t, open).open("node-a").State
		base, basePrior := write(t, s, "t", "k", "base")
		type w struct {
			value   string
			version uint64
			prior   store.Prior
			err     error
		}
		ws := make([]w, racers)
		race(racers, func(i int) {
			v := fmt.Sprintf("writer %d", i)
			version, prior, err := s.Write(ctx(t), "t", "k", v)
			ws[i] = w{v, version, prior, err}
		})
		for i, x := range ws {
			if x.err != nil {
				t.Fatalf("writer %d: %v", i, x.err)
			}
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i].version < ws[j].version })
		prevValue, prevVersion := any("base"), base
		for i, x := range ws {
			if !x.prior.Existed || x.prior.Version != prevVersion || !reflect.DeepEqual(x.prior.Value, prevValue) || x.version <= prevVersion {
				t.Fatalf("write %d (version %d) has prior %+v; want the write before it (%#v, version %d)", i, x.version, x.prior, prevValue, prevVersion)
			}
			prevValue, prevVersion = x.value, x.version
		}
		last := ws[len(ws)-1]
		if got, _ := get(t, s, "t", "k"); got != last.value {
			t.Fatalf("k = %#v, want the last write %q", got, last.value)
		}
		if restore(t, s, "t", "k", ws[0].version, ws[0].prior) {
			t.Fatal("the rollback of an overwritten write restored")
		}
		for i := len(ws) - 1; i >= 0; i-- {
			if !restore(t, s, "t", "k", ws[i].version, ws[i].prior) {
				t.Fatalf("the rollback of write %d, last in turn, was refused", i)
			}
		}
		if got, _ := get(t, s, "t", "k"); got != "base" {
			t.Fatalf("after every rollback k = %#v, want base", got)
		}
		if !restore(t, s, "t", "k", base, basePrior) {
			t.Fatal("the base write's rollback was refused")
		}
	})

	if !opts.Shared {
		return
	}
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").State, b.open("node-b").State
		ver, prior := write(t, a, "", "k", "a's")
		if got, _ := get(t, other, "", "k"); got != "a's" {
			t.Fatalf("node-b reads %#v, want node-a's write", got)
		}
		_, priorB := write(t, other, "", "k", "b's")
		if priorB.Version != ver {
			t.Fatalf("node-b's write replaced version %d, want node-a's %d", priorB.Version, ver)
		}
		if restore(t, a, "", "k", ver, prior) {
			t.Fatal("node-a's rollback restored over node-b's later write")
		}
	})
}
