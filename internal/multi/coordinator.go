package multi

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Coordinator runs agents for one coordination: bounded concurrency, one
// budget, and an observer told of every agent run.
type Coordinator struct {
	runner  Runner
	budget  *budget
	sem     chan struct{}
	observe func(AgentOutput)
}

// New returns a coordinator running at most concurrency agents at once.
func New(r Runner, limits *BudgetLimits, concurrency int, observe func(AgentOutput)) *Coordinator {
	if concurrency <= 0 {
		concurrency = 8
	}
	b := &budget{}
	if limits != nil {
		b.limits = *limits
	}
	if observe == nil {
		observe = func(AgentOutput) {}
	}
	return &Coordinator{runner: r, budget: b, sem: make(chan struct{}, concurrency), observe: observe}
}

// Spend is what the coordination used so far.
func (c *Coordinator) Spend() Spend { return c.budget.snapshot() }

// run runs one agent: budget, concurrency slot, the runner, strict decoding.
// It never fails: problems become the output's error.
func (c *Coordinator) run(ctx context.Context, spec AgentSpec, task string) AgentOutput {
	return c.runAgent(ctx, spec, task, true)
}

// runAgent is run; an agent not counted (multi.subtask's main agent, which
// waits on its sub-agents) takes no slot, is not admitted by the budget
// and is not counted in spend.agents; its reported spend still counts.
func (c *Coordinator) runAgent(ctx context.Context, spec AgentSpec, task string, counted bool) AgentOutput {
	if err := ctx.Err(); err != nil {
		return failedOutput(spec.Name, "not started: "+context.Cause(ctx).Error())
	}
	if counted {
		// Take a slot first, then ask the budget: an agent is admitted
		// against what the agents before it actually spent, not against an
		// empty tally.
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return failedOutput(spec.Name, "not started: "+context.Cause(ctx).Error())
		}
		defer func() { <-c.sem }()
		if err := c.budget.admit(); err != nil {
			out := failedOutput(spec.Name, err.Error())
			c.observe(out)
			return out
		}
	}
	raw, err := c.runner.RunAgent(ctx, spec, task)
	var out AgentOutput
	if err != nil {
		out = failedOutput(spec.Name, err.Error())
	} else if out, err = DecodeOutput(raw); err != nil {
		out = failedOutput(spec.Name, err.Error())
	}
	c.budget.record(out)
	c.observe(out)
	return out
}

// runAll runs agents concurrently (within the bound) and keeps their order.
func (c *Coordinator) runAll(ctx context.Context, specs []AgentSpec, tasks []string) []AgentOutput {
	outs := make([]AgentOutput, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = c.run(ctx, specs[i], tasks[i])
		}()
	}
	wg.Wait()
	return outs
}

func repeat(task string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = task
	}
	return out
}

// answers lists successful answers as "[name]: answer" lines.
func answers(outs []AgentOutput) string {
	var b strings.Builder
	for _, o := range outs {
		if !o.Failed() {
			fmt.Fprintf(&b, "[%s]: %s\n", o.Name, o.Answer)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func synthesisTask(task string, outs []AgentOutput) string {
	return fmt.Sprintf("Task: %s\n\nAnswers:\n%s\n\nSynthesize one final answer.", task, answers(outs))
}

// synthesize runs the synthesizer, falling back to the joined answers when
// it is refused or fails.
func (c *Coordinator) synthesize(ctx context.Context, spec *AgentSpec, task string, outs []AgentOutput) (*AgentOutput, string, bool) {
	if spec == nil {
		return nil, answers(outs), false
	}
	s := c.run(ctx, *spec, synthesisTask(task, outs))
	if s.Failed() {
		return &s, answers(outs), true
	}
	return &s, s.Answer, false
}

// Swarm runs agents in parallel, in sequence (each sees the answers so far),
// as a debate (later rounds see the others' previous answers) or hybrid (a
// parallel round, then one debate round).
func (c *Coordinator) Swarm(ctx context.Context, p SwarmParams) (SwarmResult, error) {
	if err := needAgents("agents", p.Agents, p.Task); err != nil {
		return SwarmResult{}, err
	}
	res := SwarmResult{Mode: p.Mode, Task: p.Task}
	switch p.Mode {
	case "parallel":
		res.Outputs = c.runAll(ctx, p.Agents, repeat(p.Task, len(p.Agents)))
	case "sequential":
		for _, a := range p.Agents {
			task := p.Task
			if so := answers(res.Outputs); so != "" {
				task += "\n\nAnswers so far:\n" + so
			}
			res.Outputs = append(res.Outputs, c.run(ctx, a, task))
		}
	case "debate":
		rounds := p.Rounds
		if rounds == 0 {
			rounds = 2
		}
		if rounds < 1 || rounds > 10 {
			return res, fmt.Errorf("rounds must be 1 to 10, got %d", rounds)
		}
		res.Rounds = c.debate(ctx, p.Agents, p.Task, rounds)
		res.Outputs = res.Rounds[len(res.Rounds)-1]
	case "hybrid":
		// Upstream's hybrid: parallel answers, one debate round over them,
		// then the synthesizer.
		res.Rounds = c.debate(ctx, p.Agents, p.Task, 2)
		res.Outputs = res.Rounds[1]
	default:
		return res, fmt.Errorf("mode must be parallel, sequential, debate or hybrid; got '%s'", p.Mode)
	}
	res.Synthesizer, res.FinalAnswer, res.FellBack = c.synthesize(ctx, p.Synthesizer, p.Task, res.Outputs)
	res.Spend = c.Spend()
	return res, nil
}

// debate runs rounds rounds: the first on the task alone, each later one on
// the task and the other agents' answers of the round before. It returns
// every round's outputs.
func (c *Coordinator) debate(ctx context.Context, agents []AgentSpec, task string, rounds int) [][]AgentOutput {
	prev := c.runAll(ctx, agents, repeat(task, len(agents)))
	all := [][]AgentOutput{prev}
	for r := 2; r <= rounds; r++ {
		tasks := make([]string, len(agents))
		for i := range agents {
			var others []AgentOutput
			for j, o := range prev {
				if j != i {
					others = append(others, o)
				}
			}
			tasks[i] = fmt.Sprintf("%s\n\nThe other agents answered in round %d:\n%s\n\nGive your answer for round %d.", task, r-1, answers(others), r)
		}
		prev = c.runAll(ctx, agents, tasks)
		all = append(all, prev)
	}
	return all
}

// Pipeline runs stages in order; each stage gets the task and the previous
// stage's answer. A failed stage stops the pipeline.
func (c *Coordinator) Pipeline(ctx context.Context, p PipelineParams) (PipelineResult, error) {
	if err := needAgents("stages", p.Stages, p.Task); err != nil {
		return PipelineResult{}, err
	}
	res := PipelineResult{Task: p.Task, Completed: true}
	input := ""
	for i, s := range p.Stages {
		task := p.Task
		if i > 0 {
			task = fmt.Sprintf("%s\n\nOutput of the previous stage (%s):\n%s", p.Task, p.Stages[i-1].Name, input)
		}
		out := c.run(ctx, s, task)
		res.Stages = append(res.Stages, out)
		if out.Failed() {
			res.Completed = false
			res.Error = fmt.Sprintf("stage %d (%s) failed: %s; later stages did not run", i+1, s.Name, *out.Error)
			break
		}
		input = out.Answer
		res.FinalAnswer = out.Answer
	}
	res.Spend = c.Spend()
	return res, nil
}

// Supervisor runs the workers, has the supervisor review their answers, and
// repeats with the feedback until the review starts with APPROVED or
// max_rounds (default 3) is reached. A supervisor that is refused or fails
// falls back to the workers' answers.
func (c *Coordinator) Supervisor(ctx context.Context, p SupervisorParams) (SupervisorResult, error) {
	if err := needAgents("workers", p.Workers, p.Task); err != nil {
		return SupervisorResult{}, err
	}
	if p.Supervisor.Name == "" {
		return SupervisorResult{}, fmt.Errorf("supervisor needs a name")
	}
	rounds := 3
	if p.MaxRounds != nil {
		rounds = *p.MaxRounds
	}
	if rounds < 1 || rounds > 20 {
		return SupervisorResult{}, fmt.Errorf("max_rounds must be 1 to 20, got %d", rounds)
	}
	res := SupervisorResult{Task: p.Task}
	feedback := ""
	for r := 1; r <= rounds; r++ {
		task := p.Task
		if feedback != "" {
			task = fmt.Sprintf("%s\n\nSupervisor feedback on round %d:\n%s", p.Task, r-1, feedback)
		}
		workers := c.runAll(ctx, p.Workers, repeat(task, len(p.Workers)))
		review := c.run(ctx, p.Supervisor, fmt.Sprintf("Task: %s\n\nWorker answers:\n%s\n\nReply starting with APPROVED if the answers are acceptable; otherwise give feedback.", p.Task, answers(workers)))
		res.Rounds = append(res.Rounds, SupervisorRound{Round: r, Workers: workers, Review: review})
		res.FinalAnswer = answers(workers)
		if review.Failed() {
			res.FellBack = true
			break
		}
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(review.Answer)), "APPROVED") {
			res.Approved = true
			break
		}
		feedback = review.Answer
	}
	res.Spend = c.Spend()
	return res, nil
}

// MapReduce runs the mapper once per item, in parallel, then the reducer on
// every mapped answer. A refused or failed reducer falls back to the mapped
// answers.
func (c *Coordinator) MapReduce(ctx context.Context, p MapReduceParams) (MapReduceResult, error) {
	if p.Task == "" || p.Mapper.Name == "" || p.Reducer.Name == "" || len(p.Items) == 0 {
		return MapReduceResult{}, fmt.Errorf("map_reduce needs task, mapper and reducer (with names) and at least one item")
	}
	if len(p.Items) > maxAgents {
		return MapReduceResult{}, fmt.Errorf("at most %d items", maxAgents)
	}
	specs := make([]AgentSpec, len(p.Items))
	tasks := make([]string, len(p.Items))
	for i, it := range p.Items {
		specs[i] = p.Mapper
		tasks[i] = fmt.Sprintf("%s\n\nItem: %s", p.Task, it)
	}
	res := MapReduceResult{Task: p.Task, Mapped: c.runAll(ctx, specs, tasks)}
	var mapped strings.Builder
	for i, o := range res.Mapped {
		if !o.Failed() {
			fmt.Fprintf(&mapped, "[%d] %s\n", i, o.Answer)
		}
	}
	res.Reduced = c.run(ctx, p.Reducer, fmt.Sprintf("%s\n\nMapped results:\n%s", p.Task, strings.TrimRight(mapped.String(), "\n")))
	res.FinalAnswer = res.Reduced.Answer
	if res.Reduced.Failed() {
		res.FellBack = true
		res.FinalAnswer = strings.TrimRight(mapped.String(), "\n")
	}
	res.Spend = c.Spend()
	return res, nil
}

// Vote runs the agents in parallel and counts answers, compared trimmed and
// case-insensitively; the most common wins, ties to the first given. A
// synthesizer, when given, writes the final answer from the votes.
func (c *Coordinator) Vote(ctx context.Context, p VoteParams) (VoteResult, error) {
	if err := needAgents("agents", p.Agents, p.Task); err != nil {
		return VoteResult{}, err
	}
	res := VoteResult{Task: p.Task, Outputs: c.runAll(ctx, p.Agents, repeat(p.Task, len(p.Agents))), Votes: []VoteTally{}}
	index := map[string]int{}
	for _, o := range res.Outputs {
		if o.Failed() {
			continue
		}
		key := strings.ToLower(strings.TrimSpace(o.Answer))
		i, ok := index[key]
		if !ok {
			i = len(res.Votes)
			index[key] = i
			res.Votes = append(res.Votes, VoteTally{Answer: strings.TrimSpace(o.Answer)})
		}
		res.Votes[i].Count++
		res.Votes[i].Agents = append(res.Votes[i].Agents, o.Name)
	}
	for _, v := range res.Votes {
		if v.Count > res.WinnerCount {
			res.WinnerAnswer, res.WinnerCount = v.Answer, v.Count
		}
	}
	res.FinalAnswer = res.WinnerAnswer
	if p.Synthesizer != nil {
		s := c.run(ctx, *p.Synthesizer, synthesisTask(p.Task, res.Outputs))
		res.Synthesizer = &s
		if !s.Failed() {
			res.FinalAnswer = s.Answer
		}
	}
	res.Spend = c.Spend()
	return res, nil
}

// maxAgents bounds the agents one coordination may name.
const maxAgents = 256

func needAgents(field string, specs []AgentSpec, task string) error {
	if strings.TrimSpace(task) == "" {
		return fmt.Errorf("task is required (a non-empty string)")
	}
	if len(specs) == 0 {
		return fmt.Errorf("%s needs at least one AgentSpec {name, system_prompt, tools, max_turns, metadata}", field)
	}
	if len(specs) > maxAgents {
		return fmt.Errorf("%s names %d agents; at most %d", field, len(specs), maxAgents)
	}
	for i, s := range specs {
		if s.Name == "" {
			return fmt.Errorf("%s[%d] needs a name", field, i)
		}
	}
	return nil
}
