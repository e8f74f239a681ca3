package connectors

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// oneClaim is an idempotency cache that always misses and hands out a claim
// at epoch.
type oneClaim struct{ epoch uint64 }

func (c oneClaim) Begin(context.Context, string, string, string) (any, bool, store.Claim, error) {
	return nil, false, fixedClaim(c), nil
}
func (oneClaim) Result(context.Context, string) (any, bool, error)  { return nil, false, nil }
func (oneClaim) Invalidate(context.Context, []string, string) error { return nil }
func (oneClaim) Len() int                                           { return 0 }

type fixedClaim oneClaim

func (c fixedClaim) Epoch() uint64                   { return c.epoch }
func (fixedClaim) Commit(context.Context, any) error { return nil }
func (fixedClaim) Release()                          {}

// An idempotent call of a connector's tool carries its fencing token in
// tools/call's _meta.fence, {key, epoch}; any other call carries none.
func TestAnIdempotentCallCarriesItsFenceInMeta(t *testing.T) {
	h := newHarness(t, Options{})
	if _, err := h.m.AddStdio(ctxT(t), selfServer(t, "fenced", "meta", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Enable("fenced", []string{"call"}); err != nil {
		t.Fatal(err)
	}
	rt := engine.NewRuntime(engine.Options{DaemonTools: h.tools, Idempotency: oneClaim{epoch: 7}})
	t.Cleanup(rt.Close)
	s := rt.OpenSession("s-fence", nil)
	s.SetTier(policy.FullAccess)
	t.Cleanup(func() { rt.CloseSession(s) })

	metaOf := func(idempotent bool) string {
		t.Helper()
		sub := submission(h, protocol.Action{ID: "a", Tool: Canonical("fenced", "call"), Idempotent: idempotent, Parameters: map[string]any{"n": 1}})
		sub.Session = s
		res, err := rt.Submit(ctxT(t), sub)
		if err != nil {
			t.Fatal(err)
		}
		r := res.Results[0]
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("the call: %s %s", r.Status, r.ErrorText())
		}
		raw, _ := json.Marshal(r.Output)
		var out struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out.Content) != 1 {
			t.Fatalf("the call's output %s: %v", raw, err)
		}
		return out.Content[0].Text
	}

	var meta struct {
		Fence *protocol.Fence `json:"fence"`
	}
	text := metaOf(true)
	if err := json.Unmarshal([]byte(text), &meta); err != nil || meta.Fence == nil || meta.Fence.Epoch != 7 || meta.Fence.Key == "" {
		t.Fatalf("an idempotent call's _meta = %s (%v); want fence {key, epoch 7}", text, err)
	}
	if text := metaOf(false); text != "" {
		var m map[string]any
		if json.Unmarshal([]byte(text), &m) != nil || m["fence"] != nil {
			t.Fatalf("a call that is not idempotent carried _meta %s; want no fence", text)
		}
	}
}
