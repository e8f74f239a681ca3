package engine

import (
	"context"
	"fmt"

	"github.com/parslee-ai/car-server/protocol"
)

// A multi.* run through the intent gate. The daemon never sees the tool
// calls of a run's agents (the client runs them), so the gate judges what
// it does see before any agent starts: every tool an agent spec names, as
// a tool_call of a proposal would be judged. The agents of one run pass
// their answers on (a pipeline's stages, a synthesizer, a judge, a
// supervisor), and an agent uses its own tools' results, so when any agent
// of the run names an untrusted tool, every tool of the run is influenced.

// AdmitAgents judges a multi.* run: a forbidden tool or capability refuses
// it; a tool out of intent is refused when the run is influenced, and
// otherwise needs a person's approval of its fingerprint first (the run
// does not wait: the error names the fingerprint to approve, and the same
// run is admitted once it is approved). A run with an untrusted tool
// leaves its session tainted. The distinct (agent, tool) pairs are
// bounded by max_actions, as a proposal's actions are.
func (rt *Runtime) AdmitAgents(ctx context.Context, s *Session, method string, specs []protocol.AgentSpec) error {
	op, se := rt.OperatorIntent(), s.SessionIntent()
	p := &protocol.ActionProposal{ID: method}
	influence := ""
	seen := map[[2]string]bool{}
	for _, spec := range specs {
		for _, tool := range spec.Tools {
			if seen[[2]string{spec.Name, tool}] {
				continue
			}
			seen[[2]string{spec.Name, tool}] = true
			if len(p.Actions) == rt.opts.MaxActions {
				return &LimitError{Msg: fmt.Sprintf("%s: the agents name more than %d (agent, tool) pairs (max_actions, the bound of a proposal's actions, which the intent gate judges them as): name fewer tools, or split the run", method, rt.opts.MaxActions)}
			}
			p.Actions = append(p.Actions, protocol.Action{ID: spec.Name + "/" + tool, Type: protocol.ActionToolCall, Tool: tool})
			if influence == "" && rt.untrusted(tool, op, se) {
				influence = fmt.Sprintf("agent '%s' of this run uses untrusted tool '%s', and the agents of a run use what it returns", spec.Name, tool)
			}
		}
	}
	admitted := func() error {
		if influence != "" { // the agents' answers come back to the client
			rt.noteTainted(s, method+" run: "+influence)
		}
		return nil
	}
	if op == nil && se == nil {
		return admitted()
	}
	sub := &Submission{Proposal: p, Session: s}
	sub.noPark = true
	refused, drift := rt.intentVerdicts(p.Actions, op, se, "agent tool", func(int) string { return influence },
		func(a *protocol.Action) Event {
			return Event{ActionID: a.ID, Connection: s.ID, Data: map[string]any{"method": method, "tool": a.Tool}}
		})
	if len(refused) > 0 {
		return fmt.Errorf("intent gate refused the run: %s", limitList(refused))
	}
	if len(drift) > 0 {
		if err := rt.escalate(ctx, sub, drift); err != nil {
			return fmt.Errorf("intent gate: %w", err)
		}
	}
	return admitted()
}
