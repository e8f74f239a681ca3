package postgres

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// decoded is raw decoded as the engine decodes a value.
func decoded(t *testing.T, raw string) any {
	t.Helper()
	v, err := protocol.DecodeValue([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Values come back exactly as the engine holds them: json.Number with its
// digits, nested arrays and objects, null, strings with any character.
func TestStateValuesRoundTrip(t *testing.T) {
	t.Parallel()
	db := openNode(t, pgtest.URL(t), "a")
	s, ctx := db.state, ctxT(t)
	for i, raw := range []string{
		`null`, `true`, `false`, `0`, `1.50`, `-12345678901234567890123456789.000`, `1e400`,
		`"text with \"quotes\", \\ and \u0000 and é"`, `[]`, `{}`,
		`[1, "two", [3.0], {"four": null}]`,
		`{"b": {"c": [1, 2.5]}, "a": "first", "": true}`,
	} {
		want := decoded(t, raw)
		key := string(rune('a' + i))
		if err := s.Set(ctx, "", key, want); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		got, ok, err := s.Get(ctx, "", key)
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s came back as %#v (%v, %v), want %#v", raw, got, ok, err, want)
		}
	}
	if _, ok, err := s.Get(ctx, "", "absent"); ok || err != nil {
		t.Fatalf("an absent key: %v %v", ok, err)
	}
	if err := s.Set(ctx, "", "bad", func() {}); err == nil {
		t.Fatal("a value that is not JSON was stored")
	}
}

// Write returns the prior it replaced and a fresh version; Restore puts it
// back only while the key holds that version.
func TestStateWriteAndRestore(t *testing.T) {
	t.Parallel()
	db := openNode(t, pgtest.URL(t), "a")
	s, ctx := db.state, ctxT(t)
	v1, p1, err := s.Write(ctx, "t1", "k", "one")
	if err != nil || p1.Existed || p1.Version != 0 || p1.Value != nil || v1 == 0 {
		t.Fatalf("first write: %d %+v %v", v1, p1, err)
	}
	v2, p2, err := s.Write(ctx, "t1", "k", json.Number("2"))
	if err != nil || !p2.Existed || p2.Value != "one" || p2.Version != v1 || v2 <= v1 {
		t.Fatalf("second write: %d %+v %v (first was %d)", v2, p2, err, v1)
	}
	if ok, err := s.Restore(ctx, "t1", "k", v1, p1); ok || err != nil {
		t.Fatalf("restore of an overwritten write: %v %v, want refused", ok, err)
	}
	if ok, err := s.Restore(ctx, "t1", "k", v2, p2); !ok || err != nil {
		t.Fatalf("restore of the latest write: %v %v", ok, err)
	}
	if v, _, _ := s.Get(ctx, "t1", "k"); v != "one" {
		t.Fatalf("after restore: %v, want one", v)
	}
	// The restored value carries its old version: the first write's undo
	// now applies.
	if ok, err := s.Restore(ctx, "t1", "k", v1, p1); !ok || err != nil {
		t.Fatalf("undo of the first write: %v %v", ok, err)
	}
	if _, ok, _ := s.Get(ctx, "t1", "k"); ok {
		t.Fatal("undoing a write to an absent key did not delete it")
	}
	if _, ok, _ := s.Get(ctx, "", "k"); ok {
		t.Fatal("another tenant's key is visible")
	}
}

// Two daemons write one key with interleaved rollbacks: the rollback of an
// overwritten write keeps the later write; the last committed write wins.
func TestStateTwoDaemonsInterleavedRollbacks(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ctx := ctxT(t)
	va, pa, err := a.state.Write(ctx, "", "k", "from a")
	if err != nil {
		t.Fatal(err)
	}
	vb, pb, err := b.state.Write(ctx, "", "k", "from b")
	if err != nil || !pb.Existed || pb.Value != "from a" || pb.Version != va {
		t.Fatalf("b's write: prior %+v %v", pb, err)
	}
	if ok, err := a.state.Restore(ctx, "", "k", va, pa); ok || err != nil {
		t.Fatalf("a's rollback after b overwrote: %v %v, want kept", ok, err)
	}
	if v, _, _ := a.state.Get(ctx, "", "k"); v != "from b" {
		t.Fatalf("a reads %v, want b's later write", v)
	}
	vb2, _, err := b.state.Write(ctx, "", "k2", "b only")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.state.Restore(ctx, "", "k", vb, pb); !ok || err != nil {
		t.Fatalf("b's rollback of its own latest write: %v %v", ok, err)
	}
	if v, _, _ := a.state.Get(ctx, "", "k"); v != "from a" {
		t.Fatalf("a reads %v after b's rollback, want the value b replaced", v)
	}
	if vb2 <= vb {
		t.Fatalf("versions do not grow across keys: %d then %d", vb, vb2)
	}
}

// Concurrent writes of one key from two daemons are serialized: each
// write's prior is exactly the write before it.
func TestStateConcurrentWritesChain(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	dbs := []*DB{openNode(t, url, "a"), openNode(t, url, "b")}
	ctx := ctxT(t)
	type w struct {
		version uint64
		prior   store.Prior
		value   string
	}
	var mu sync.Mutex
	var writes []w
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := string(rune('A' + i))
			v, p, err := dbs[i%2].state.Write(ctx, "", "hot", val)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			writes = append(writes, w{v, p, val})
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(writes, func(i, j int) bool { return writes[i].version < writes[j].version })
	for i, x := range writes {
		if i == 0 {
			if x.prior.Existed {
				t.Fatalf("the first write found %+v", x.prior)
			}
			continue
		}
		prev := writes[i-1]
		if !x.prior.Existed || x.prior.Version != prev.version || x.prior.Value != prev.value {
			t.Fatalf("write %d's prior %+v, want the write before it (%d, %q)", x.version, x.prior, prev.version, prev.value)
		}
	}
	last := writes[len(writes)-1]
	if v, _, _ := dbs[0].state.Get(ctx, "", "hot"); v != last.value {
		t.Fatalf("the key holds %v, want the last write %q", v, last.value)
	}
}

// Keys, Snapshot, Export and Replace see every daemon's writes; Replace
// stamps fresh versions, so an older write's undo no longer applies.
func TestStateNamespaces(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ctx := ctxT(t)
	for _, kv := range [][3]string{{"", "b", "1"}, {"", "a", "2"}, {"", "B", "3"}, {"t1", "x", "4"}, {"t2", "y", "5"}} {
		if err := a.state.Set(ctx, kv[0], kv[1], json.Number(kv[2])); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := b.state.Keys(ctx, "")
	if err != nil || !reflect.DeepEqual(keys, []string{"B", "a", "b"}) {
		t.Fatalf("Keys = %v %v, want byte order [B a b]", keys, err)
	}
	if keys, err := b.state.Keys(ctx, "none"); err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("Keys of an empty namespace = %#v %v", keys, err)
	}
	snap, err := b.state.Snapshot(ctx, "t1")
	if err != nil || !reflect.DeepEqual(snap, map[string]any{"x": json.Number("4")}) {
		t.Fatalf("Snapshot(t1) = %v %v", snap, err)
	}
	all, err := b.state.Export(ctx, nil)
	if err != nil || len(all) != 3 || len(all[""]) != 3 || all["t2"]["y"] != json.Number("5") {
		t.Fatalf("Export(all) = %v %v", all, err)
	}
	empty := "empty"
	one, err := b.state.Export(ctx, &empty)
	if err != nil || len(one) != 1 || one["empty"] == nil || len(one["empty"]) != 0 {
		t.Fatalf("Export(empty) = %#v %v, want the namespace present and empty", one, err)
	}

	v, p, err := a.state.Write(ctx, "t1", "x", "written before the replace")
	if err != nil {
		t.Fatal(err)
	}
	t1 := "t1"
	n, err := b.state.Replace(ctx, &t1, map[string]map[string]any{"t1": {"x": "replaced", "z": []any{json.Number("1")}}, "t2": {"ignored": true}})
	if err != nil || n != 2 {
		t.Fatalf("Replace(t1) = %d %v, want 2", n, err)
	}
	if ok, err := a.state.Restore(ctx, "t1", "x", v, p); ok || err != nil {
		t.Fatalf("an undo from before the replace: %v %v, want refused", ok, err)
	}
	all, err = a.state.Export(ctx, nil)
	want := map[string]map[string]any{
		"":   {"a": json.Number("2"), "b": json.Number("1"), "B": json.Number("3")},
		"t1": {"x": "replaced", "z": []any{json.Number("1")}},
		"t2": {"y": json.Number("5")},
	}
	if err != nil || !reflect.DeepEqual(all, want) {
		t.Fatalf("after Replace(t1): %v %v, want %v", all, err, want)
	}
	n, err = a.state.Replace(ctx, nil, map[string]map[string]any{"only": {"k": "v"}})
	if err != nil || n != 1 {
		t.Fatalf("Replace(all) = %d %v", n, err)
	}
	if all, err := b.state.Export(ctx, nil); err != nil || !reflect.DeepEqual(all, map[string]map[string]any{"only": {"k": "v"}}) {
		t.Fatalf("after Replace(all): %v %v", all, err)
	}
}

// With the database stopped every operation fails with an error wrapping
// ErrUnavailable, and resumes once it is back.
func TestStateUnavailable(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	db := openNode(t, srv.NewDatabase(t), "a")
	s, ctx := db.state, ctxT(t)
	v, p, err := s.Write(ctx, "", "k", "before")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	tenant := ""
	for name, op := range map[string]func() error{
		"Get":      func() error { _, _, err := s.Get(ctx, "", "k"); return err },
		"Set":      func() error { return s.Set(ctx, "", "k", "x") },
		"Write":    func() error { _, _, err := s.Write(ctx, "", "k", "x"); return err },
		"Restore":  func() error { _, err := s.Restore(ctx, "", "k", v, p); return err },
		"Keys":     func() error { _, err := s.Keys(ctx, ""); return err },
		"Snapshot": func() error { _, err := s.Snapshot(ctx, ""); return err },
		"Export":   func() error { _, err := s.Export(ctx, &tenant); return err },
		"Replace":  func() error { _, err := s.Replace(ctx, nil, nil); return err },
	} {
		if err := op(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database stopped: %v, want an error wrapping ErrUnavailable", name, err)
		}
	}
	srv.Start(t)
	testwait.Eventually(t, eventualLimit, "state answers again", func() bool {
		got, ok, err := s.Get(ctx, "", "k")
		return err == nil && ok && got == "before"
	})
}
