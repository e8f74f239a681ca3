package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// countingExecutor answers every call with its parameters and counts calls.
type countingExecutor struct {
	mu    sync.Mutex
	calls int
}

func (e *countingExecutor) ExecuteTool(_ context.Context, call ToolCall) (any, error) {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	return call.Parameters, nil
}

type blockGate struct{}

func (blockGate) Name() string { return "test_gate" }
func (blockGate) Admit(context.Context, *Submission) error {
	return errors.New("blocked: approve fingerprint abc123 first")
}

type denyTool struct{ tool string }

func (d denyTool) Name() string { return "test_check" }
func (d denyTool) Check(_ context.Context, _ *Submission, a *protocol.Action) error {
	if a.Tool == d.tool {
		return errors.New("policy 'no_" + d.tool + "' denies tool '" + d.tool + "'")
	}
	return nil
}

// openRuntime is the one way these tests start a runtime: one session whose
// tool calls go to exec, with tools registered; the session closes with the
// test.
func openRuntime(t *testing.T, opts Options, exec ToolExecutor, tools ...string) (*Runtime, *Session) {
	t.Helper()
	rt := newRuntime(t, opts)
	s := rt.OpenSession("s1", exec)
	t.Cleanup(func() { rt.CloseSession(s) })
	defs := make([]protocol.ToolSchema, len(tools))
	for i, name := range tools {
		defs[i] = protocol.ToolSchema{Name: name}
	}
	if _, err := s.Tools.Register(defs); err != nil {
		t.Fatal(err)
	}
	return rt, s
}

// ctxT is a context that ends with the test, bounded by testTimeout.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func submitWith(t *testing.T, opts Options, actions ...protocol.Action) (*protocol.ProposalResult, *countingExecutor, *Runtime) {
	t.Helper()
	exec := &countingExecutor{}
	rt, s := openRuntime(t, opts, exec, "read", "write")
	for i := range actions {
		if actions[i].Parameters == nil {
			actions[i].Parameters = map[string]any{}
		}
		if actions[i].FailureBehavior == "" {
			actions[i].FailureBehavior = protocol.FailAbort
		}
	}
	res, err := rt.Submit(ctxT(t), &Submission{Proposal: &protocol.ActionProposal{Actions: actions}, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	return res, exec, rt
}

func TestAdmissionGateBlocksTheWholeProposal(t *testing.T) {
	res, exec, rt := submitWith(t, Options{Gates: []AdmissionGate{blockGate{}}},
		protocol.Action{ID: "w", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "k", "value": 1}},
		protocol.Action{ID: "r", Type: protocol.ActionToolCall, Tool: "read"},
	)
	for _, r := range res.Results {
		if r.Status != protocol.StatusRejected || !strings.Contains(*r.Error, "abc123") {
			t.Fatalf("%s: %s %v", r.ActionID, r.Status, r.Error)
		}
	}
	if exec.calls != 0 || len(stateKeys(t, rt, "")) != 0 || res.Cost.ActionsRejected != 2 {
		t.Fatalf("a blocked proposal dispatched %d calls or wrote state %v", exec.calls, stateKeys(t, rt, ""))
	}
	if rt.Events.Summary().GateRejections != 1 {
		t.Fatal("gate rejection not recorded")
	}
}

func TestActionCheckRejectsOneAction(t *testing.T) {
	res, exec, rt := submitWith(t, Options{Checks: []ActionCheck{denyTool{"write"}}},
		protocol.Action{ID: "r", Type: protocol.ActionToolCall, Tool: "read"},
		protocol.Action{ID: "w", Type: protocol.ActionToolCall, Tool: "write", FailureBehavior: protocol.FailSkip},
	)
	if res.Results[0].Status != protocol.StatusSucceeded || res.Results[1].Status != protocol.StatusRejected {
		t.Fatalf("%+v", res.Results)
	}
	if exec.calls != 1 || rt.Events.Summary().ActionsRejected != 1 {
		t.Fatalf("calls %d, summary %+v", exec.calls, rt.Events.Summary())
	}
}

func TestMaxActions(t *testing.T) {
	rt, s := openRuntime(t, Options{MaxActions: 2}, nil)
	_, err := rt.Submit(ctxT(t), &Submission{
		Proposal: &protocol.ActionProposal{Actions: make([]protocol.Action, 3)},
		Session:  s,
	})
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("want a LimitError, got %v", err)
	}
}

func TestConcurrencyBound(t *testing.T) {
	var mu sync.Mutex
	running, peak := 0, 0
	release := make(chan struct{})
	var once sync.Once
	exec := execFunc(func(ctx context.Context, call ToolCall) (any, error) {
		mu.Lock()
		running++
		peak = max(peak, running)
		if running == 2 {
			once.Do(func() { close(release) })
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		select {
		case <-release: // two ran at once
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	rt, s := openRuntime(t, Options{MaxConcurrency: 2}, exec, "t")
	acts := make([]protocol.Action, 6)
	for i := range acts {
		acts[i] = protocol.Action{ID: string(rune('a' + i)), Type: protocol.ActionToolCall, Tool: "t", Parameters: map[string]any{}, FailureBehavior: protocol.FailAbort}
	}
	res, err := rt.Submit(ctxT(t), &Submission{Proposal: &protocol.ActionProposal{Actions: acts}, Session: s})
	if err != nil || res.Cost.ActionsExecuted != 6 {
		t.Fatalf("%v %+v", err, res.Cost)
	}
	if peak != 2 {
		t.Fatalf("peak concurrency %d, bound 2", peak)
	}
}

type execFunc func(ctx context.Context, call ToolCall) (any, error)

func (f execFunc) ExecuteTool(ctx context.Context, call ToolCall) (any, error) { return f(ctx, call) }
