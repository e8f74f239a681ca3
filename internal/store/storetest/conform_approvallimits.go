package storetest

import (
	"sync/atomic"
	"testing"
	"time"
)

// testApprovalLimits: an approval's uses are counted atomically, and one
// past its time or its uses is not used.
func testApprovalLimits(t *testing.T, open Open, opts Options) {
	t.Run("UnlimitedApprovalIsUsedWithoutEnd", func(t *testing.T) {
		l := newBacking(t, open).open("node-a").Approvals
		if _, ok, err := l.Use(ctx(t), "fp-none", time.Now()); err != nil || ok {
			t.Fatalf("Use of a fingerprint without a decision = %v, %v; want false, nil", ok, err)
		}
		if _, err := l.Record(decision("fp-rej", "rejected", "conn:x")); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := l.Use(ctx(t), "fp-rej", time.Now()); err != nil || ok {
			t.Fatalf("Use of a rejection = %v, %v; want false, nil", ok, err)
		}
		if _, err := l.Record(decision("fp-1", "approved", "conn:x")); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if r, ok, err := l.Use(ctx(t), "fp-1", time.Now()); err != nil || !ok || r.Used != 0 {
				t.Fatalf("use %d of an unlimited approval = %+v, %v, %v; want ok, nothing counted", i, r, ok, err)
			}
		}
	})
	t.Run("ExpiredApprovalIsNotUsed", func(t *testing.T) {
		l := newBacking(t, open).open("node-a").Approvals
		r := decision("fp-exp", "approved", "conn:x")
		at := time.Now().Add(time.Hour)
		r.ExpiresAt = &at
		if _, err := l.Record(r); err != nil {
			t.Fatal(err)
		}
		if got, ok := l.Decision("fp-exp"); !ok || got.ExpiresAt == nil || !got.ExpiresAt.Equal(at) {
			t.Fatalf("Decision kept expires_at %v, want %v", got.ExpiresAt, at)
		}
		if _, ok, err := l.Use(ctx(t), "fp-exp", at.Add(-time.Minute)); err != nil || !ok {
			t.Fatalf("Use before expiry = %v, %v; want true", ok, err)
		}
		if _, ok, err := l.Use(ctx(t), "fp-exp", at); err != nil || ok {
			t.Fatalf("Use at expiry = %v, %v; want false", ok, err)
		}
	})
	t.Run("UsesAreCountedAndSpent", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		r := decision("fp-2", "approved", "conn:x")
		r.Uses = 2
		r.Type, r.Tool, r.ParamsDigest, r.GrantedTier = "tool_call", "deploy", "ab12", "sandbox_edit"
		if _, err := d.Approvals.Record(r); err != nil {
			t.Fatal(err)
		}
		for want := 1; want <= 2; want++ {
			got, ok, err := d.Approvals.Use(ctx(t), "fp-2", time.Now())
			if err != nil || !ok || got.Used != want {
				t.Fatalf("use %d = %+v, %v, %v; want ok with used %d", want, got, ok, err, want)
			}
		}
		if _, ok, err := d.Approvals.Use(ctx(t), "fp-2", time.Now()); err != nil || ok {
			t.Fatalf("a third use of a two-use approval = %v, %v; want false", ok, err)
		}
		d = b.restart(d)
		got, ok := d.Approvals.Decision("fp-2")
		if !ok || got.Used != 2 || got.Uses != 2 || got.Tool != "deploy" || got.Type != "tool_call" || got.ParamsDigest != "ab12" || got.GrantedTier != "sandbox_edit" {
			t.Fatalf("after a restart the decision is %+v, %v; want uses 2, used 2 and the operation kept", got, ok)
		}
		if _, ok, err := d.Approvals.Use(ctx(t), "fp-2", time.Now()); err != nil || ok {
			t.Fatalf("a spent approval was used after a restart: %v, %v", ok, err)
		}
	})
	t.Run("RacingForTheLastUse", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		apps := []*daemon{d}
		if opts.Shared {
			apps = append(apps, b.open("node-b"))
		}
		r := decision("fp-once", "approved", "conn:x")
		r.Uses = 1
		if _, err := d.Approvals.Record(r); err != nil {
			t.Fatal(err)
		}
		var won, failed atomic.Int32
		race(racers, func(i int) {
			_, ok, err := apps[i%len(apps)].Approvals.Use(ctx(t), "fp-once", time.Now())
			switch {
			case err != nil:
				failed.Add(1)
			case ok:
				won.Add(1)
			}
		})
		if failed.Load() != 0 || won.Load() != 1 {
			t.Fatalf("%d racers over %d daemon(s) for a single-use approval: %d used it, %d failed; want exactly 1 and none", racers, len(apps), won.Load(), failed.Load())
		}
	})
}
