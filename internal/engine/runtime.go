package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/flow"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/protocol"
)

// Options configure a Runtime. Zero values take the defaults noted.
type Options struct {
	IntegrityOptions                      // the intent gate, the taint ledger, the transaction check, receipts
	MaxActions         int                // actions per proposal (10,000)
	MaxTools           int                // tools a connection may register, built-ins not counted (1,000)
	MaxConcurrency     int                // actions of one proposal running at once (16)
	MaxStarting        int                // proposals in their first 100 ms at once, across sessions; more wait their turn session by session (0: 16 per CPU; negative: no bound)
	ToolTimeout        time.Duration      // budget of a tool call without timeout_ms (300 s)
	RetryBase          time.Duration      // first retry backoff, doubled per retry (100 ms)
	RetryCap           time.Duration      // longest retry backoff (5 s)
	EventCapacity      int                // events kept in memory (100,000)
	EventBytes         int64              // bytes of events kept in memory, besides their count (DefaultEventBytes)
	Idempotency        store.Idempotency  // durable idempotency cache; nil turns it off
	Approvals          store.Approvals    // durable approval ledger; nil: nothing can be approved
	Messages           store.Messages     // delivered messaging.send idempotency keys; nil: keys are refused
	State              store.State        // shared state (the caller's store's); nil: state is off (reads are empty, writes refused)
	Trajectories       store.Trajectories // one record per dispatched tool attempt; nil: none are kept
	Harness            store.Harness      // where the harness config is saved; nil: in memory only
	Checkpoints        *checkpoint.Store  // saved copies of state; nil: checkpoints are off
	SupervisionTimeout time.Duration      // how long a parked proposal waits for a supervisor (30 s)
	ProposalGrace      time.Duration      // added to a proposal's Budget so per-action timeouts fire first (15 s)
	Desk               *host.Registry     // the host registry, where actions needing approval wait for a person (the daemon's, served by the rpc layer too); nil: one of its own
	ApprovalTimeout    time.Duration      // how long a parked action waits for a person (5 min)
	// MaxApprovalsPerProposal is how many distinct operations one proposal
	// may put to a person (64); past it the proposal is rejected.
	MaxApprovalsPerProposal int
	Postures                PostureSource // per-agent postures for bound agents' proposals; nil: none apply
	Gates                   []AdmissionGate
	Checks                  []ActionCheck

	MaxResolvedActionBytes   int64 // one action's parameters and effects with references resolved (8 MiB)
	MaxResolvedProposalBytes int64 // all of a proposal's resolved actions together (64 MiB)
	MaxStateValueBytes       int64 // one state value as JSON, however it is written (8 MiB)
	MaxGoalConditions        int   // conditions of one goal condition, all_of and any_of included (DefaultMaxGoalConditions)

	Streams streams.Options // handles of detached tool invocations

	Schemas SchemaLimits // what a tool's JSON Schema may cost (DefaultSchemaLimits)

	DaemonTools *DaemonTools // tools the daemon runs itself for every session (MCP connectors'); nil: none

	// Tracer starts the spans of proposals, gates, approval waits and tool
	// calls (spans.go); nil: tracing is off and no span is started.
	Tracer trace.Tracer
	// TraceToolArguments puts each tool call's parameters on its
	// execute_tool span (gen_ai.tool.call.arguments), redacted and cut as
	// an approval's preview is (policy.Preview); off, no value is ever in
	// a span. The operator's opt-in, otel_capture_tool_arguments.
	TraceToolArguments bool
}

// Defaults of the Options the daemon's settings also offer; config prints
// them in --help, so the daemon and a zero Options agree.
const (
	DefaultMaxActions               = 10_000
	DefaultMaxTools                 = 1000
	DefaultMaxConcurrency           = 16
	DefaultToolTimeout              = 300 * time.Second
	DefaultSupervisionTimeout       = 30 * time.Second
	DefaultApprovalTimeout          = 5 * time.Minute
	DefaultMaxApprovalsPerProposal  = 64
	DefaultMaxResolvedActionBytes   = 8 << 20
	DefaultMaxResolvedProposalBytes = 64 << 20
)

func (o *Options) setDefaults() {
	if o.MaxActions <= 0 {
		o.MaxActions = DefaultMaxActions
	}
	if o.MaxTools <= 0 {
		o.MaxTools = DefaultMaxTools
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = DefaultToolTimeout
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 100 * time.Millisecond
	}
	if o.SupervisionTimeout <= 0 {
		o.SupervisionTimeout = DefaultSupervisionTimeout
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = DefaultApprovalTimeout
	}
	if o.MaxApprovalsPerProposal <= 0 {
		o.MaxApprovalsPerProposal = DefaultMaxApprovalsPerProposal
	}
	if o.ProposalGrace <= 0 {
		o.ProposalGrace = 15 * time.Second
	}
	if o.RetryCap <= 0 {
		o.RetryCap = 5 * time.Second
	}
	if o.MaxResolvedActionBytes <= 0 {
		o.MaxResolvedActionBytes = DefaultMaxResolvedActionBytes
	}
	if o.MaxResolvedProposalBytes <= 0 {
		o.MaxResolvedProposalBytes = DefaultMaxResolvedProposalBytes
	}
	if o.State == nil {
		o.State = stateOff{}
	}
	if o.MaxStateValueBytes <= 0 {
		o.MaxStateValueBytes = DefaultMaxStateValueBytes
	}
	if o.MaxGoalConditions <= 0 {
		o.MaxGoalConditions = DefaultMaxGoalConditions
	}
	if o.EventBytes <= 0 {
		o.EventBytes = DefaultEventBytes
	}
	if o.Desk == nil {
		o.Desk = host.New(host.Options{})
	}
	o.IntegrityOptions.setDefaults()
}

// CheckActions refuses a proposal over max_actions before anything is done
// with it: every method that executes or analyses a proposal calls it first.
func (rt *Runtime) CheckActions(p *protocol.ActionProposal) error {
	if len(p.Actions) > rt.opts.MaxActions {
		return &LimitError{Msg: fmt.Sprintf("proposal has %d actions; this daemon accepts at most %d per proposal (max_actions): split it", len(p.Actions), rt.opts.MaxActions)}
	}
	return nil
}

// Runtime is the one engine a daemon hosts. Its state and event log are
// shared by every connection; tools belong to the session that registered
// them.
type Runtime struct {
	State       store.State // shared state, through the store (Options.State)
	Events      *EventLog
	Supervisors *Supervisors
	Streams     *streams.Table // handles of detached tool invocations
	opts        Options
	operator    atomic.Pointer[policy.Engine]
	gates       []AdmissionGate // built-in gates, then Options.Gates
	inFlight    atomic.Int64    // proposals being executed
	runs        atomic.Uint64   // runs of proposals started: each run's store.WithRun id
	admission   *admission      // starts proposals a few at a time, session by session
	started     time.Time
	checks      []ActionCheck // built-in checks, then Options.Checks
	running     running       // proposals being executed, for Cancel
	labels      atomic.Pointer[flow.Labels]
	restoring   sync.RWMutex  // held shared by every running proposal, exclusively by a checkpoint restore
	workers     *workers      // goroutines for the actions of a run that run alongside others
	stopping    chan struct{} // closed by BeginShutdown
	stopOnce    sync.Once
	integ       runtimeIntegrity                       // intents, the taint ledger, proposals in flight
	harness     atomic.Pointer[protocol.HarnessConfig] // nil: the defaults (harness.go)
	harnessMu   sync.Mutex                             // held by each harness update
	decideMu    sync.Mutex                             // held by each decision recorded, so that a quorum's approvers add up

	mu       sync.Mutex
	sessions map[string]*Session
}

// NewRuntime returns a Runtime over the state and stores opts hands it
// (cmd/car-server passes its store's parts; a nil one is off).
func NewRuntime(opts Options) *Runtime {
	opts.setDefaults()
	rt := &Runtime{
		State:     boundedState{opts.State, opts.MaxStateValueBytes},
		Events:    newEventLog(opts.EventCapacity, opts.EventBytes),
		opts:      opts,
		sessions:  make(map[string]*Session),
		admission: newAdmission(opts.MaxStarting),
		workers:   newWorkers(maxIdleWorkers, idleSweep),
		stopping:  make(chan struct{}),
	}
	rt.Supervisors = newSupervisors(opts.SupervisionTimeout)
	rt.integ.ledger.max = opts.MaxTaintedKeys
	rt.integ.ledger.load(opts.Taint)
	rt.Streams = streams.New(opts.Streams, rt.recordStreamEnd)
	rt.started = time.Now()
	rt.operator.Store(policy.NewEngine())
	rt.gates = append([]AdmissionGate{resolvedSizeGate{rt}, policySessionGate{}, capabilityGate{}, flowGate{rt}, intentGate{rt}, permissionGate{rt}, supervisionGate{rt}, txGate{rt}}, opts.Gates...)
	rt.checks = append([]ActionCheck{policyCheck{rt}, capabilityCheck{}, flowCheck{rt}}, opts.Checks...)
	return rt
}

// BeginShutdown tells the Runtime the daemon is stopping: every proposal
// that waits for a person is answered at once, saying so and what to
// approve, instead of holding the shutdown for the rest of its wait. Later
// calls do nothing.
func (rt *Runtime) BeginShutdown() { rt.stopOnce.Do(func() { close(rt.stopping) }) }

// Close stops the Runtime's idle goroutines and waits for the busy ones to
// finish; call it once no proposal runs. A worker parked between runs would
// otherwise exit only after an idle time of its own.
func (rt *Runtime) Close() {
	rt.workers.close()
}

// Status is a snapshot for operators.
type Status = protocol.RuntimeStatus

// Status reports what the Runtime is doing now.
func (rt *Runtime) Status() Status {
	hostEvents, hostBytes := rt.opts.Desk.RingStats()
	streamBytes, streamDropped := rt.Streams.Buffered()
	return Status{
		EventBytes:          rt.Events.Bytes(),
		HostEvents:          hostEvents,
		HostEventBytes:      hostBytes,
		StreamBufferedBytes: streamBytes,
		StreamChunksDropped: streamDropped,
		UptimeSecs:          time.Since(rt.started).Seconds(),
		Sessions:            rt.SessionCount(),
		ProposalsInFlight:   rt.inFlight.Load(),
		Supervisors:         int(rt.Supervisors.count.Load()),
		ParkedIntents:       rt.Supervisors.parkedHere(),
		OperatorPolicies:    rt.OperatorPolicies().Len(),
		Events:              rt.Events.Count(),
	}
}

// MaxActions is the largest proposal accepted.
func (rt *Runtime) MaxActions() int { return rt.opts.MaxActions }

// ToolTimeout is the budget of a tool call that declares no timeout_ms.
func (rt *Runtime) ToolTimeout() time.Duration { return rt.opts.ToolTimeout }

// Session is one connection's view of the Runtime: the tools it registered,
// dispatched back to it through its executor.
type Session struct {
	ID       string
	Tools    *ToolRegistry
	Policies *policy.Engine // the connection's own rules
	Executor ToolExecutor
	subs     policySessions
	tier     atomic.Int32 // a policy.Tier
	caps     atomic.Pointer[Capabilities]
	capsMu   sync.Mutex // one capability change at a time
	flowHist flowHistory
	integ    sessionIntegrity
	// RequestedBy says who the session's connection is now (its principal
	// can change when it authenticates), for the approvals its proposals
	// raise: set by the transport before the session serves anything; nil
	// is a plain client known by its id only.
	RequestedBy func() host.Requester
}

// OpenSession creates the session of a new connection.
func (rt *Runtime) OpenSession(id string, exec ToolExecutor) *Session {
	s := &Session{ID: id, Tools: NewToolRegistry(rt.opts.MaxTools, rt.opts.Schemas), Policies: policy.NewEngine(), Executor: exec}
	s.Tools.daemon = rt.opts.DaemonTools
	s.tier.Store(int32(policy.SandboxEdit))
	rt.mu.Lock()
	rt.sessions[id] = s
	rt.mu.Unlock()
	return s
}

// CloseSession drops everything the session owned, including its
// supervision subscription (intents it left parked stay parked).
func (rt *Runtime) CloseSession(s *Session) {
	rt.Supervisors.Unsubscribe(s.ID)
	rt.Streams.DropOwner(s.ID, "the connection running the tool closed; the stream cannot continue")
	rt.mu.Lock()
	delete(rt.sessions, s.ID)
	rt.mu.Unlock()
}

// SessionCount is the number of open sessions.
func (rt *Runtime) SessionCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.sessions)
}
