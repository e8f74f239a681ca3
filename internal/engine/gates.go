package engine

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/flow"
	"github.com/parslee-ai/car-server/internal/policy"

	"github.com/parslee-ai/car-server/protocol"
)

// AdmissionGate decides on a whole proposal before any action runs. A
// non-nil error blocks all of it: every action comes back rejected with the
// error's text, nothing dispatches and no state changes. Gates run in the
// order the Runtime was given them; the first that blocks decides.
type AdmissionGate interface {
	Name() string
	Admit(ctx context.Context, sub *Submission) error
}

// ActionCheck decides on one action just before it runs (after its
// dependencies, before its preconditions). A non-nil error rejects that
// action; its failure_behavior then applies as for a failed precondition.
type ActionCheck interface {
	Name() string
	Check(ctx context.Context, sub *Submission, a *protocol.Action) error
}

// Submission is one proposal.submit: the proposal and who submitted it.
type Submission struct {
	Proposal *protocol.ActionProposal
	Session  *Session
	Tenant   string // state namespace; "" is the unscoped one
	// PolicySession names a sub-session of Session whose rules also apply.
	PolicySession string
	// Agent is the agent the submitting connection is bound to ("" when
	// unbound): its posture applies, and its events name it.
	Agent string
	// Recorder, when set, records each tool call as a turn of the
	// connection's current run.
	Recorder TurnRecorder
	// Budget meters what the proposal may spend (session.budget.set); nil
	// is unbounded.
	Budget *Meter
	// Caller and Claims are the submission's RuntimeScope: recorded on its
	// events and span, and read by policy rules (policy.ScopeReader).
	// ClaimsTrusted says the submitter is not an agent: only then may a
	// claim satisfy a rule that requires one. The transport sets Caller to
	// a bound agent's own id, whatever the scope said.
	Caller        string
	Claims        map[string]any
	ClaimsTrusted bool

	// denied holds the actions a person rejected while the proposal was
	// parked at the permission gate, with the reason; set before execution.
	denied map[string]string
	// flow is the information-flow gate's analysis, for what the proposal
	// leaves behind for the connection's next ones.
	flow *flow.Report
	// flowIn is what the gate analysed, kept when something in it carries
	// a label, so that a state key resolved later is judged against it
	// without rebuilding it; flowAt finds an action's step.
	flowIn *flow.Input
	flowAt map[string]int
	// raised counts the operations the proposal put to a person; set by
	// Submit, for each attempt afresh.
	raised *approvalTally
	// graph is the proposal's dependency graph, built once by Submit for
	// the scheduler and the gates (only its edges and references are read).
	graph *graph
	// span is the proposal span of this attempt (invalid with tracing off),
	// and replaces the one of the attempt a replan replaced.
	span, replaces trace.SpanContext
	// tiers are the actions' required tiers, in proposal order, as the
	// permission gate classified them; kept only when tracing.
	tiers []policy.Tier
	// what the integrity gates found, for what the proposal leaves behind
	submissionIntegrity
}
