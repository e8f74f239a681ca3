package file

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
)

func mustGet(t *testing.T, s *State, tenant, key string) (any, bool) {
	t.Helper()
	v, ok, err := s.Get(context.Background(), tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

func mustWrite(t *testing.T, s *State, tenant, key string, value any) (uint64, store.Prior) {
	t.Helper()
	v, p, err := s.Write(context.Background(), tenant, key, value)
	if err != nil {
		t.Fatal(err)
	}
	return v, p
}

func mustRestore(t *testing.T, s *State, tenant, key string, version uint64, prior store.Prior) bool {
	t.Helper()
	ok, err := s.Restore(context.Background(), tenant, key, version, prior)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestStateTenantsNeverSeeEachOther: one namespace per tenant, the
// unscoped one included, whatever the keys are called.
func TestStateTenantsNeverSeeEachOther(t *testing.T) {
	ctx := context.Background()
	s := NewState()
	if err := s.Set(ctx, "", "k", "unscoped"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "acme", "k", "acme's"); err != nil {
		t.Fatal(err)
	}
	if v, _ := mustGet(t, s, "", "k"); v != "unscoped" {
		t.Fatalf("unscoped k = %v", v)
	}
	if v, _ := mustGet(t, s, "acme", "k"); v != "acme's" {
		t.Fatalf("acme's k = %v", v)
	}
	if _, ok := mustGet(t, s, "other", "k"); ok {
		t.Fatal("a tenant sees another namespace's key")
	}
	if err := s.Set(ctx, "acme", "b", json.Number("2")); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(ctx, "acme")
	if err != nil || !slices.Equal(keys, []string{"b", "k"}) {
		t.Fatalf("acme's keys %v %v, want sorted [b k]", keys, err)
	}
	snap, err := s.Snapshot(ctx, "")
	if err != nil || len(snap) != 1 || snap["k"] != "unscoped" {
		t.Fatalf("unscoped snapshot %v %v", snap, err)
	}
	snap["k"] = "changed"
	if v, _ := mustGet(t, s, "", "k"); v != "unscoped" {
		t.Fatal("a snapshot is not a copy")
	}
}

// TestStateRestoreUndoesOnlyItsOwnWrite: a write stamps a fresh version and
// returns the prior; Restore puts the prior back while the key still holds
// that version, and otherwise keeps the later writer's value.
func TestStateRestoreUndoesOnlyItsOwnWrite(t *testing.T) {
	s := NewState()
	v1, p1 := mustWrite(t, s, "", "k", "first")
	if p1.Existed || p1.Version != 0 || v1 == 0 {
		t.Fatalf("a first write: version %d prior %+v", v1, p1)
	}
	v2, p2 := mustWrite(t, s, "", "k", "second")
	if v2 <= v1 || !p2.Existed || p2.Value != "first" || p2.Version != v1 {
		t.Fatalf("an overwrite: version %d prior %+v", v2, p2)
	}
	v3, _ := mustWrite(t, s, "", "k", "third")
	if mustRestore(t, s, "", "k", v2, p2) {
		t.Fatal("a restore put back a value over a later write")
	}
	if v, _ := mustGet(t, s, "", "k"); v != "third" {
		t.Fatalf("the later write was lost: %v", v)
	}
	if !mustRestore(t, s, "", "k", v3, store.Prior{Value: "second", Existed: true, Version: v2}) {
		t.Fatal("the newest write was not restored")
	}
	if v, _ := mustGet(t, s, "", "k"); v != "second" {
		t.Fatalf("after restoring the newest write: %v", v)
	}
	// The restored value carries its old version: the write it came from
	// can be undone in turn, back to a key that did not exist.
	if !mustRestore(t, s, "", "k", v2, p2) || !mustRestore(t, s, "", "k", v1, p1) {
		t.Fatal("the chain of undos broke")
	}
	if _, ok := mustGet(t, s, "", "k"); ok {
		t.Fatal("undoing the first write left the key")
	}
	if mustRestore(t, s, "", "gone", 1, store.Prior{}) {
		t.Fatal("a restore of a key that is not there reported success")
	}
}

// TestStateExportReplace: Export copies one namespace or all; Replace swaps
// one namespace (or all, dropping the others) with fresh versions, so a
// rollback of a write made before it restores nothing.
func TestStateExportReplace(t *testing.T) {
	ctx := context.Background()
	s := NewState()
	vBefore, pBefore := mustWrite(t, s, "t1", "a", json.Number("1"))
	mustWrite(t, s, "", "b", json.Number("2"))
	one := "t1"
	exp, err := s.Export(ctx, &one)
	if err != nil || len(exp) != 1 || exp["t1"]["a"] != json.Number("1") {
		t.Fatalf("export of t1: %v %v", exp, err)
	}
	empty := "nobody"
	if exp, err := s.Export(ctx, &empty); err != nil || exp["nobody"] == nil || len(exp["nobody"]) != 0 {
		t.Fatalf("export of an empty tenant: %v %v, want an empty namespace", exp, err)
	}
	all, err := s.Export(ctx, nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("export of all: %v %v", all, err)
	}
	n, err := s.Replace(ctx, &one, map[string]map[string]any{"t1": {"a": json.Number("9"), "c": true}, "": {"ignored": 1}})
	if err != nil || n != 2 {
		t.Fatalf("replace of t1: %d %v", n, err)
	}
	if v, _ := mustGet(t, s, "", "b"); v != json.Number("2") {
		t.Fatal("a one-tenant replace touched another namespace")
	}
	if _, ok := mustGet(t, s, "", "ignored"); ok {
		t.Fatal("a one-tenant replace wrote another namespace")
	}
	if mustRestore(t, s, "t1", "a", vBefore, pBefore) {
		t.Fatal("a rollback from before the replace undid a replaced key")
	}
	n, err = s.Replace(ctx, nil, map[string]map[string]any{"t2": {"x": "y"}})
	if err != nil || n != 1 {
		t.Fatalf("replace of all: %d %v", n, err)
	}
	if _, ok := mustGet(t, s, "", "b"); ok {
		t.Fatal("a replace of all kept a namespace the checkpoint does not hold")
	}
	if v, _ := mustGet(t, s, "t2", "x"); v != "y" {
		t.Fatalf("t2 x = %v", v)
	}
}
