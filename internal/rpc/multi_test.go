package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/multi"
	"github.com/parslee-ai/car-server/protocol"
)

// agentFunc plays one agent: it gets the spec's name and the task.
type agentFunc func(ctx context.Context, name, task string) (any, error)

// playAgents connects a client that answers multi.run_agent with play and
// records every task each agent was given.
func playAgents(t *testing.T, ts *testServer, play agentFunc) (*client.Client, *sync.Map) {
	t.Helper()
	c := ts.dial(t, "")
	seen := &sync.Map{}
	c.HandleRequest(protocol.MethodMultiRunAgent, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p struct {
			Spec multi.AgentSpec `json:"spec"`
			Task string          `json:"task"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		prev, _ := seen.LoadOrStore(p.Spec.Name, []string{})
		seen.Store(p.Spec.Name, append(prev.([]string), p.Task))
		return play(ctx, p.Spec.Name, p.Task)
	})
	return c, seen
}

// output is a well-formed AgentOutput.
func output(name, answer string, tokens int64) map[string]any {
	o := map[string]any{"name": name, "answer": answer, "turns": 1, "tool_calls": 0, "duration_ms": 1.5, "error": nil}
	if tokens > 0 {
		o["tokens"] = map[string]any{"input_tokens": tokens, "output_tokens": tokens}
	}
	return o
}

func spec(name string) map[string]any {
	return map[string]any{"name": name, "system_prompt": "you are " + name, "tools": []string{}, "max_turns": 3, "metadata": map[string]any{}}
}

func specs(names ...string) []any {
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = spec(n)
	}
	return out
}

func tasksOf(seen *sync.Map, name string) []string {
	v, _ := seen.Load(name)
	s, _ := v.([]string)
	return s
}

func TestMultiPipelineOrder(t *testing.T) {
	ts := startServer(t, Options{})
	c, seen := playAgents(t, ts, func(_ context.Context, name, task string) (any, error) {
		return output(name, "from-"+name, 0), nil
	})
	var res multi.PipelineResult
	if err := c.Call(ctxT(t), protocol.MethodMultiPipeline, map[string]any{"stages": specs("draft", "edit", "polish"), "task": "write a haiku"}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Completed || res.FinalAnswer != "from-polish" || len(res.Stages) != 3 {
		t.Fatalf("%+v", res)
	}
	if edit := tasksOf(seen, "edit"); len(edit) != 1 || !strings.Contains(edit[0], "previous stage (draft):\nfrom-draft") {
		t.Fatalf("stage 2 did not see stage 1's answer: %q", edit)
	}
	if p := tasksOf(seen, "polish"); !strings.Contains(p[0], "from-edit") || strings.Contains(p[0], "from-draft") {
		t.Fatalf("stage 3 input: %q", p)
	}
}

func TestMultiParallelSwarmRunsAgentsAtOnce(t *testing.T) {
	ts := startServer(t, Options{})
	var inFlight sync.WaitGroup
	inFlight.Add(3)
	all := make(chan struct{})
	go func() { inFlight.Wait(); close(all) }()
	c, _ := playAgents(t, ts, func(ctx context.Context, name, task string) (any, error) {
		if name == "synth" {
			return output(name, "synthesized", 0), nil
		}
		inFlight.Done()
		select {
		case <-all: // every worker is in flight before any answers
		case <-time.After(testTimeout):
			return nil, fmt.Errorf("agents were not in flight together")
		}
		return output(name, "answer-"+name, 0), nil
	})
	var res multi.SwarmResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": specs("a", "b", "c"), "task": "t", "synthesizer": spec("synth")}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 3 || res.Outputs[1].Answer != "answer-b" || res.FinalAnswer != "synthesized" {
		t.Fatalf("%+v", res)
	}
	code, _ := rpcCode(t, c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "swirl", "agents": specs("a"), "task": "t"}, nil))
	if code != protocol.CodeInvalidParams {
		t.Fatal("an unknown mode was accepted")
	}
}

func TestMultiHybridSwarmDebatesOnceThenSynthesizes(t *testing.T) {
	ts := startServer(t, Options{})
	c, seen := playAgents(t, ts, func(_ context.Context, name, task string) (any, error) {
		if name == "synth" {
			return output(name, "synthesized", 0), nil
		}
		if strings.Contains(task, "round 2") {
			return output(name, "second-"+name, 0), nil
		}
		return output(name, "first-"+name, 0), nil
	})
	var res multi.SwarmResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "hybrid", "agents": specs("a", "b"), "task": "t", "synthesizer": spec("synth")}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != "hybrid" || len(res.Rounds) != 2 || res.Rounds[0][1].Answer != "first-b" || len(res.Outputs) != 2 || res.Outputs[0].Answer != "second-a" || res.FinalAnswer != "synthesized" {
		t.Fatalf("%+v", res)
	}
	// Round 2 shows each agent the others' parallel answers, not its own.
	a := tasksOf(seen, "a")
	if len(a) != 2 || a[0] != "t" || !strings.Contains(a[1], "first-b") || strings.Contains(a[1], "first-a") {
		t.Fatalf("agent a's tasks: %q", a)
	}
	// The synthesizer sees the debate round's answers.
	if s := tasksOf(seen, "synth"); len(s) != 1 || !strings.Contains(s[0], "second-a") || !strings.Contains(s[0], "second-b") {
		t.Fatalf("synthesizer's task: %q", s)
	}
}

func TestMultiVoteSupervisorMapReduce(t *testing.T) {
	ts := startServer(t, Options{})
	reviews := 0
	var mu sync.Mutex
	c, seen := playAgents(t, ts, func(_ context.Context, name, task string) (any, error) {
		switch name {
		case "v1", "v3":
			return output(name, " Paris ", 0), nil
		case "v2":
			return output(name, "Lyon", 0), nil
		case "boss":
			mu.Lock()
			defer mu.Unlock()
			reviews++
			if reviews < 2 {
				return output(name, "needs more detail", 0), nil
			}
			return output(name, "APPROVED, good", 0), nil
		case "mapper":
			item := task[strings.LastIndex(task, "Item: ")+6:]
			return output(name, strings.ToUpper(item), 0), nil
		case "reducer":
			return output(name, "reduced", 0), nil
		}
		return output(name, "work by "+name, 0), nil
	})
	var vote multi.VoteResult
	if err := c.Call(ctxT(t), protocol.MethodMultiVote, map[string]any{"agents": specs("v1", "v2", "v3"), "task": "capital of France?"}, &vote); err != nil {
		t.Fatal(err)
	}
	if vote.WinnerAnswer != "Paris" || vote.WinnerCount != 2 || len(vote.Votes) != 2 {
		t.Fatalf("vote %+v", vote)
	}

	var sup multi.SupervisorResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSupervisor, map[string]any{"workers": specs("w1", "w2"), "supervisor": spec("boss"), "task": "plan"}, &sup); err != nil {
		t.Fatal(err)
	}
	if !sup.Approved || len(sup.Rounds) != 2 {
		t.Fatalf("supervisor %+v", sup)
	}
	if w := tasksOf(seen, "w1"); len(w) != 2 || !strings.Contains(w[1], "Supervisor feedback on round 1:\nneeds more detail") {
		t.Fatalf("round 2 did not carry the feedback: %q", w)
	}

	var mr multi.MapReduceResult
	if err := c.Call(ctxT(t), protocol.MethodMultiMapReduce, map[string]any{"mapper": spec("mapper"), "reducer": spec("reducer"), "items": []string{"a", "b", "c"}, "task": "shout"}, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Mapped) != 3 || mr.Mapped[2].Answer != "C" || mr.FinalAnswer != "reduced" {
		t.Fatalf("map_reduce %+v", mr)
	}
	if r := tasksOf(seen, "reducer"); !strings.Contains(r[0], "[0] A\n[1] B\n[2] C") {
		t.Fatalf("reducer input %q", r)
	}
}

func TestMultiTournamentWithAnOddField(t *testing.T) {
	ts := startServer(t, Options{})
	strength := map[string]int{"c1": 1, "c2": 5, "c3": 3, "c4": 2, "c5": 4}
	c, _ := playAgents(t, ts, func(_ context.Context, name, task string) (any, error) {
		if name != "judge" {
			return output(name, fmt.Sprint(strength[name]), 0), nil
		}
		lines := strings.Split(task, "\n")
		var a, b int
		for i, l := range lines {
			var err error
			if strings.HasPrefix(l, "Candidate A (") {
				_, err = fmt.Sscan(lines[i+1], &a)
			}
			if strings.HasPrefix(l, "Candidate B (") {
				_, err = fmt.Sscan(lines[i+1], &b)
			}
			if err != nil {
				return nil, fmt.Errorf("the judge cannot read a candidate's answer %q: %w", lines[i+1], err)
			}
		}
		if b > a {
			return output(name, "B", 0), nil
		}
		return output(name, "A.", 0), nil
	})
	var res multi.TournamentResult
	if err := c.Call(ctxT(t), protocol.MethodMultiTournament, map[string]any{"competitors": specs("c1", "c2", "c3", "c4", "c5"), "judge": spec("judge"), "task": "biggest number"}, &res); err != nil {
		t.Fatal(err)
	}
	// Round 1: c1–c2 → c2, c3–c4 → c3, c5 bye; round 2: c2–c3 → c2, c5 bye; round 3: c2–c5 → c2.
	if res.WinnerName != "c2" || res.WinnerAnswer != "5" {
		t.Fatalf("winner %s %q", res.WinnerName, res.WinnerAnswer)
	}
	byes := 0
	for _, m := range res.Matches {
		if m.Bye {
			byes++
		}
	}
	if byes != 2 || len(res.Matches) != 6 {
		t.Fatalf("bracket %+v", res.Matches)
	}
	if strings.Join(res.Ranking, ",") != "c2,c5,c3,c1,c4" {
		t.Fatalf("ranking %v", res.Ranking)
	}
}

func TestMultiBudgetAndMalformedOutput(t *testing.T) {
	ts := startServer(t, Options{})
	c, seen := playAgents(t, ts, func(_ context.Context, name, task string) (any, error) {
		switch name {
		case "bad":
			return map[string]any{"name": name, "answer": "x", "turns": 1, "tool_calls": []any{"grep"}, "duration_ms": 1, "error": nil}, nil
		case "partial":
			return map[string]any{"name": name, "answer": "x"}, nil
		}
		return output(name, "ok-"+name, 60), nil
	})
	var res multi.SwarmResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{
		"mode": "sequential", "agents": specs("s1", "s2", "s3", "s4"), "task": "t",
		"synthesizer": spec("synth"), "budget": map[string]any{"max_total_tokens": 200},
	}, &res); err != nil {
		t.Fatal(err)
	}
	// s1 and s2 spend 120 each way: 240 > 200, so s3, s4 and the synthesizer are refused.
	if res.Outputs[1].Failed() || !res.Outputs[2].Failed() || !strings.Contains(*res.Outputs[2].Error, "budget: max_total_tokens (200) reached") {
		t.Fatalf("budget: %+v", res.Outputs)
	}
	if len(tasksOf(seen, "s3")) != 0 || len(tasksOf(seen, "synth")) != 0 {
		t.Fatal("a refused agent was started")
	}
	if !res.FellBack || res.FinalAnswer != "[s1]: ok-s1\n[s2]: ok-s2" || res.Spend.Refused != 3 || res.Spend.Agents != 2 {
		t.Fatalf("fallback: %+v", res)
	}

	// A parallel batch is held to what earlier agents spent, not admitted
	// all at once against an empty tally.
	var wide multi.SwarmResult
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprint("w", i)
	}
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": specs(names...), "task": "t", "budget": map[string]any{"max_total_tokens": 100}}, &wide); err != nil {
		t.Fatal(err)
	}
	if wide.Spend.Agents > 8+1 || wide.Spend.Refused == 0 {
		t.Fatalf("a parallel batch overspent: %+v", wide.Spend)
	}

	var capped multi.SwarmResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": specs("p1", "p2", "p3"), "task": "t", "budget": map[string]any{"max_agents": 2}}, &capped); err != nil {
		t.Fatal(err)
	}
	if capped.Spend.Agents != 2 || capped.Spend.Refused != 1 {
		t.Fatalf("max_agents is a hard cap: %+v", capped.Spend)
	}

	var bad multi.SwarmResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": specs("bad", "partial", "good"), "task": "t"}, &bad); err != nil {
		t.Fatal(err)
	}
	if e := bad.Outputs[0].Error; e == nil || !strings.Contains(*e, "'tool_calls' must be an integer count, not an array") {
		t.Fatalf("malformed: %v", e)
	}
	if e := bad.Outputs[1].Error; e == nil || !strings.Contains(*e, "field 'turns' is missing") {
		t.Fatalf("partial: %v", e)
	}
	if bad.Outputs[2].Failed() {
		t.Fatal("a good agent failed beside malformed ones")
	}
	ev := eventOf(t, c, map[string]any{"kinds": []string{"agent_run"}, "data_matches": map[string]string{"agent": "good"}})
	if ev.Data["method"] != "multi.swarm" {
		t.Fatalf("event %+v", ev)
	}
}

func TestMultiDisconnectMidRun(t *testing.T) {
	ts := startServer(t, Options{})
	started := make(chan struct{})
	c, _ := playAgents(t, ts, func(ctx context.Context, name, task string) (any, error) {
		if name == "first" {
			return output(name, "done", 0), nil
		}
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx := ctxT(t)
	called := make(chan error, 1)
	go func() {
		called <- c.Call(ctx, protocol.MethodMultiPipeline, map[string]any{"stages": specs("first", "hang", "never"), "task": "t"}, nil)
	}()
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("stage 2 never started")
	}
	c.Close()
	if err := <-called; err == nil {
		t.Fatal("a client that closed got a reply")
	}
	// The connection logs its close only after its handlers have returned.
	ts.waitLog(t, "connection closed", 1)
	observer := ts.dial(t, "")
	ev := eventOf(t, observer, map[string]any{"kinds": []string{"agent_run"}, "data_matches": map[string]string{"agent": "hang"}})
	if msg, _ := ev.Data["error"].(string); !strings.Contains(msg, "disconnected") {
		t.Fatalf("the hung agent should fail with the disconnect: %+v", ev.Data)
	}
	var q struct {
		Count int `json:"count"`
	}
	if err := observer.Call(ctxT(t), protocol.MethodEventsQuery, map[string]any{"kinds": []string{"agent_run"}, "data_matches": map[string]string{"agent": "never"}}, &q); err != nil || q.Count != 0 {
		t.Fatalf("a stage after the disconnect ran: %v %d", err, q.Count)
	}
}
