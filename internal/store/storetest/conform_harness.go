package storetest

import (
	"encoding/json"
	"testing"
)

// testHarness: nothing saved loads as nil; a save replaces the document
// whole and outlives a restart; on a shared backend another daemon loads
// it too.
func testHarness(t *testing.T, open Open, opts Options) {
	if !has(opts, "Harness") {
		return
	}
	b := newBacking(t, open)
	d := b.open("node-a")
	if doc, err := d.Harness.Load(ctx(t)); err != nil || doc != nil {
		t.Fatalf("Load of a store that never saved = %s, %v; want nil, nil", doc, err)
	}
	first := json.RawMessage(`{"max_retries":5,"retry_backoff_ms":100,"planning_max_replans":1}`)
	second := json.RawMessage(`{"max_retries":0,"retry_backoff_ms":0,"planning_max_replans":0}`)
	same := func(what string, got, want json.RawMessage) {
		t.Helper()
		var g, w map[string]any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %s does not decode: %v", what, got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Fatalf("%s: loaded %s, want %s", what, gb, wb)
		}
	}
	for _, doc := range []json.RawMessage{first, second} {
		if err := d.Harness.Save(ctx(t), doc); err != nil {
			t.Fatalf("Save %s: %v", doc, err)
		}
		got, err := d.Harness.Load(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		same("after a save", got, doc)
	}
	d = b.restart(d)
	got, err := d.Harness.Load(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	same("after a restart", got, second)
}
