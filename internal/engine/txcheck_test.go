package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func txRuntime(t *testing.T, opts Options) (*Runtime, *Session, *countingExecutor) {
	t.Helper()
	exec := &countingExecutor{}
	rt, s := openRuntime(t, opts, exec, "tally", "compute")
	return rt, s, exec
}

func assume(t *testing.T, a protocol.Action, as ...protocol.Assumption) protocol.Action {
	t.Helper()
	for _, x := range as {
		raw, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		a.Assumptions = append(a.Assumptions, raw)
	}
	return a
}

func TestTransactionCheckFindsEachKindInWarnAndStrict(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		setup      func(rt *Runtime, s *Session) []protocol.Action
	}{
		{"write_write", protocol.ConflictWriteWrite, func(*Runtime, *Session) []protocol.Action {
			return []protocol.Action{write("a", "balance", 1), write("b", "balance", 2)}
		}},
		{"read_write", protocol.ConflictReadWrite, func(*Runtime, *Session) []protocol.Action {
			return []protocol.Action{read("r", "balance"), write("w", "balance", 2)}
		}},
		{"read_write by declared sets", protocol.ConflictReadWrite, func(*Runtime, *Session) []protocol.Action {
			x, y := call("x", "tally", nil), call("y", "compute", nil)
			x.ReadSet, y.WriteSet = []string{"ledger"}, []string{"ledger"}
			return []protocol.Action{x, y}
		}},
		{"stale_read", protocol.ConflictStaleRead, func(rt *Runtime, s *Session) []protocol.Action {
			rt.State.Set(ctxT(t), "", "balance", 1)
			_, v1, _ := rt.GetVersioned(ctxT(t), "", "balance")
			rt.State.Set(ctxT(t), "", "balance", 1)
			return []protocol.Action{assume(t, call("x", "tally", nil), protocol.Assumption{Key: "balance", ReadVersion: &v1})}
		}},
		{"belief_divergence", protocol.ConflictBeliefDivergence, func(rt *Runtime, s *Session) []protocol.Action {
			rt.State.Set(ctxT(t), "", "balance", 5)
			return []protocol.Action{assume(t, call("x", "tally", nil), protocol.Assumption{Key: "balance", ExpectedValue: json.RawMessage(`100`)})}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []string{protocol.TransactionCheckWarn, protocol.TransactionCheckStrict} {
				rt, s, exec := txRuntime(t, Options{})
				s.SetTransactionCheck(mode)
				actions := c.setup(rt, s)
				res := submitAs(t, rt, s, "p", actions...)
				events := rt.Events.Query(EventQuery{Kinds: []EventKind{EventTransactionConflict}})
				if mode == protocol.TransactionCheckStrict {
					st, msg := status(res, actions[0].ID)
					if st != protocol.StatusRejected || !strings.Contains(msg, "transaction check (strict) refused the proposal: "+c.kind) || exec.calls != 0 {
						t.Fatalf("strict: %s %s (calls %d)", st, msg, exec.calls)
					}
					continue
				}
				for _, r := range res.Results {
					if r.Status != protocol.StatusSucceeded {
						t.Fatalf("warn: %s %s %s", r.ActionID, r.Status, r.ErrorText())
					}
				}
				if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], c.kind) || len(events) == 0 || events[0].Data["kind"] != c.kind {
					t.Fatalf("warn: warnings %v events %+v", res.Warnings, events)
				}
			}
		})
	}
}

func TestTransactionCheckOffAndOrderedActionsFindNothing(t *testing.T) {
	rt, s, _ := txRuntime(t, Options{})
	res := submitAs(t, rt, s, "p", write("a", "k", 1), write("b", "k", 2))
	if len(res.Warnings) != 0 {
		t.Fatalf("off: %v", res.Warnings)
	}
	s.SetTransactionCheck(protocol.TransactionCheckStrict)
	b := write("b", "k", 2)
	b.Dependencies = []string{"a"}
	r := read("r", "k")
	r.StateDependencies = []string{"k"} // after b, the key's last writer
	res = submitAs(t, rt, s, "p2", write("a", "k", 1), b, r)
	for _, x := range res.Results {
		if x.Status != protocol.StatusSucceeded {
			t.Fatalf("ordered: %s %s", x.ActionID, x.ErrorText())
		}
	}
}

func TestTransactionCheckSeesWritesInFlightOnOtherConnections(t *testing.T) {
	rt, s, _ := txRuntime(t, Options{})
	s.SetTransactionCheck(protocol.TransactionCheckStrict)
	rt.integ.inFlight.add(txWrites{id: "p-other", session: "s-other", keys: map[string]string{"balance": "w9"}})
	res := submitAs(t, rt, s, "p", read("r", "balance"))
	if _, msg := status(res, "r"); !strings.Contains(msg, "read_write on 'balance'") || !strings.Contains(msg, "proposal p-other action 'w9' in flight on another connection") {
		t.Fatalf("%s", msg)
	}
	// Its own proposals in flight are not another connection's.
	rt.integ.inFlight.remove("s-other", "p-other")
	rt.integ.inFlight.add(txWrites{id: "p-mine", session: s.ID, keys: map[string]string{"balance": "w1"}})
	if res := submitAs(t, rt, s, "p2", read("r", "balance")); res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("own: %s", res.Results[0].ErrorText())
	}
	// A finished proposal is no longer in flight.
	rt.integ.inFlight.remove(s.ID, "p-mine")
	submitAs(t, rt, s, "p3", write("w", "balance", 1))
	if n := len(rt.integ.inFlight.byID); n != 0 {
		t.Fatalf("%d proposals left in flight", n)
	}
}

func TestAssumptionsAreBoundedAndChecked(t *testing.T) {
	rt, s, _ := txRuntime(t, Options{IntegrityOptions: IntegrityOptions{MaxAssumptions: 2}})
	s.SetTransactionCheck(protocol.TransactionCheckWarn)
	as := make([]protocol.Assumption, 3)
	for i := range as {
		as[i] = protocol.Assumption{Key: fmt.Sprintf("k%d", i)}
	}
	res := submitAs(t, rt, s, "p", assume(t, call("x", "tally", nil), as...))
	if _, msg := status(res, "x"); !strings.Contains(msg, "at most 2 are checked (max_assumptions)") {
		t.Fatalf("over the bound: %s", msg)
	}
	if res := submitAs(t, rt, s, "p2", assume(t, call("x", "tally", nil), as[:2]...)); res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("at the bound: %s", res.Results[0].ErrorText())
	}
	bad := call("x", "tally", nil)
	bad.Assumptions = []json.RawMessage{json.RawMessage(`{"key": "k", "read_versoin": 3}`)}
	if _, msg := status(submitAs(t, rt, s, "p3", bad), "x"); !strings.Contains(msg, "action 'x': assumptions[0] must be {key, expected_value?, read_version?}") || !strings.Contains(msg, "read_versoin") {
		t.Fatalf("malformed: %s", msg)
	}
}

func TestVerifyReportsConflictsInEveryMode(t *testing.T) {
	rt, s, _ := txRuntime(t, Options{})
	res := VerifyResult{Valid: true}
	rt.VerifyTransactions(ctxT(t), &res, &protocol.ActionProposal{Actions: []protocol.Action{write("a", "k", 1), write("b", "k", 2)}}, s, "")
	if !res.Valid || len(res.Issues) != 1 || res.Issues[0].Severity != "warning" || !strings.Contains(res.Issues[0].Message, "write_write on 'k'") {
		t.Fatalf("%+v", res)
	}
}
