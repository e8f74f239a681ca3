package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// FuzzDecodeValue: exactly one JSON value or an error; its canonical form is
// stable under a second decode; Equal is reflexive.
func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{``, `null`, `9007199254740993`, `{"a":[true]}`, `{"a":`, `1 2`, `{} x`, `00`,
		`1E700`, `-0.0e-5`, `"\ud800"`, `[1,{"b":"c","a":1e2}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := protocol.DecodeValue(raw)
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(raw)) > 0 && !json.Valid(raw) {
			t.Fatalf("DecodeValue accepted %q, which is not one JSON value", raw)
		}
		if !jsonvalue.Equal(v, v) {
			t.Fatalf("Equal is not reflexive for %q", raw)
		}
		canon := jsonvalue.Canonical(v)
		again, err := protocol.DecodeValue(canon)
		if err != nil {
			t.Fatalf("the canonical form %q of %q does not decode: %v", canon, raw, err)
		}
		if c2 := jsonvalue.Canonical(again); !bytes.Equal(canon, c2) {
			t.Fatalf("canonical form is not stable: %q then %q", canon, c2)
		}
		if !jsonvalue.Equal(again, again) {
			t.Fatalf("Equal is not reflexive for the canonical form %q", canon)
		}
	})
}

// FuzzDecodeProposal: errors are DecodeErrors; a decoded proposal has the
// IR's defaults applied; encoding and decoding again is a fixed point.
func FuzzDecodeProposal(f *testing.F) {
	for _, s := range []string{
		`{"actions":[]}`,
		`{"id":"p","source":"s","actions":[{"id":"a","type":"tool_call","tool":"t","parameters":{"x":1}}]}`,
		`{"actions":[{"type":"state_write","parameters":{"key":"k","value":[1,2]},"preconditions":[{"key":"k"}],"timeout_ms":5}]}`,
		`{"actions":[{"type":"state_read","surprise":{"deep":[1,2]},"x-vendor":"v"}],"extension":42}`,
		`{"actions":[{"type":"assertion","max_retries":101}]}`,
		`{"actions":[{"type":"tool_call","tool":"t","reversibility":"compensable","compensation":{"tool":"u"},"failure_behavior":"skip","dependencies":["a"]}]}`,
		`{"actions":[]} junk`,
		`{"actions":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := protocol.DecodeProposal(raw)
		if err != nil {
			var de *protocol.DecodeError
			if !errors.As(err, &de) || de.Msg == "" {
				t.Fatalf("DecodeProposal(%q) error %T %v, want a *DecodeError with a message", raw, err, err)
			}
			return
		}
		checkIR(t, p)
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a decoded proposal does not encode: %v", err)
		}
		p2, err := protocol.DecodeProposal(enc)
		if err != nil {
			t.Fatalf("the encoding %s of a decoded proposal does not decode: %v", enc, err)
		}
		enc2, err := json.Marshal(p2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encode-decode is not a fixed point:\n%s\n%s (%v)", enc, enc2, err)
		}
	})
}

func checkIR(t *testing.T, p *protocol.ActionProposal) {
	t.Helper()
	if p.Source == "" || p.Actions == nil {
		t.Fatalf("defaults not applied: source %q, actions %v", p.Source, p.Actions)
	}
	for i, a := range p.Actions {
		switch a.Type {
		case protocol.ActionToolCall:
			if a.Tool == "" {
				t.Fatalf("action %d: tool_call without a tool", i)
			}
		case protocol.ActionStateWrite, protocol.ActionStateRead, protocol.ActionAssertion:
		default:
			t.Fatalf("action %d: type %q", i, a.Type)
		}
		if a.Parameters == nil || (a.InvocationMode != protocol.ModeOneShot && a.InvocationMode != protocol.ModeStreaming && a.InvocationMode != protocol.ModeLongRunning) || a.MaxRetries > protocol.MaxRetriesLimit {
			t.Fatalf("action %d: defaults or bounds not applied: %+v", i, a)
		}
		switch a.Reversibility {
		case protocol.Reversible, protocol.Compensable, protocol.Irreversible:
		default:
			t.Fatalf("action %d: reversibility %q", i, a.Reversibility)
		}
		switch a.FailureBehavior {
		case protocol.FailAbort, protocol.FailRetry, protocol.FailSkip:
		default:
			t.Fatalf("action %d: failure_behavior %q", i, a.FailureBehavior)
		}
		if a.TimeoutMs != nil && (*a.TimeoutMs == 0 || *a.TimeoutMs > protocol.TimeoutMsLimit) {
			t.Fatalf("action %d: timeout_ms %d out of range", i, *a.TimeoutMs)
		}
		for j, pc := range a.Preconditions {
			if pc.Key == "" || pc.Operator == "" {
				t.Fatalf("action %d precondition %d: %+v", i, j, pc)
			}
		}
	}
}
