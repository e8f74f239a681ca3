// Package file is the store of a single daemon, the twin of store/postgres
// file for file: the journals under $CAR_HOME (approvals.go, the approval
// ledger; idempotency.go, the idempotency cache; messages.go, the
// messaging dedup ledger; leases.go, the agents' leases; runs.go, one
// journal per agent run), the agent
// token and posture files (agents.go, under the locks of filelock.go),
// shared state in memory (state.go), and a bus and a member list that stay
// in this process (bus.go, nodes.go). Open (file.go) assembles them. It is
// the default store; nothing in it can become unavailable, so its Health
// is always nil.
package file

import (
	"errors"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// Kind is the Store.Kind of this store.
const Kind = "file"

// Config says where the journals are and who this daemon is.
type Config struct {
	IdempotencyPath string // the idempotency journal
	IdempotencySync Sync   // journal_sync: when its results are flushed; "": SyncFull
	ApprovalsPath   string // the approval ledger
	MessagesPath    string // delivered messaging.send idempotency keys
	LeasesPath      string // the agents' leases; "": lease.* are off
	RunsDir         string // agent run traces, one journal per run; "": runs are off
	RunJournals     int    // run journals open at once; 0: DefaultMaxOpenRunJournals
	AgentTokensPath string // the agents' token hashes; "": no agent can bind
	PeoplePath      string // the people's host-role token hashes; "": only the daemon's host token
	PosturesPath    string // the per-agent posture policy; "": postures are off
	TrajectoriesDir string // one file per UTC day of dispatched attempts; "": nothing is recorded
	HarnessPath     string // the harness config; "": it is kept in memory only
	TaintPath       string // the intent gate's taint ledger; "": the engine keeps it in memory only
	Node            string // this daemon's member id
	Version         string // this daemon's version, in its member row
	Journal         []journal.Option
	// Events is the durable event log (events.go); nil: the event log lives
	// in the engine's memory only.
	Events *EventsConfig
}

// Report is what replaying each journal found.
type Report struct {
	Idempotency, Approvals, Messages, Leases, Taint journal.Report
	Runs                                            RunsReport
}

// Open replays the journals and returns the store over them. On an error
// nothing stays open.
func Open(cfg Config) (*store.Store, Report, error) {
	var rep Report
	sync, err := ParseSync(string(cfg.IdempotencySync))
	if err != nil {
		return nil, rep, err
	}
	idem, r, err := OpenIdempotency(cfg.IdempotencyPath, cfg.Journal...)
	rep.Idempotency = r
	if err != nil {
		return nil, rep, err
	}
	idem.perProposal = sync == SyncProposal
	ledger, r, err := OpenApprovals(cfg.ApprovalsPath, cfg.Journal...)
	rep.Approvals = r
	if err != nil {
		return nil, rep, errors.Join(err, idem.Close())
	}
	messages, r, err := OpenMessages(cfg.MessagesPath, cfg.Journal...)
	rep.Messages = r
	if err != nil {
		return nil, rep, errors.Join(err, idem.Close(), ledger.Close())
	}
	var leases *Leases
	closeLeases := func() error { return nil }
	if cfg.LeasesPath != "" {
		leases, rep.Leases, err = OpenLeases(cfg.LeasesPath, cfg.Journal...)
		if err != nil {
			return nil, rep, errors.Join(err, idem.Close(), ledger.Close(), messages.Close())
		}
		closeLeases = leases.Close
	}
	var runLog *Runs
	closeRuns := func() error { return nil }
	if cfg.RunsDir != "" {
		runLog, rep.Runs, err = OpenRuns(cfg.RunsDir, RunsNode(cfg.Node), MaxOpenRunJournals(cfg.RunJournals))
		if err != nil {
			return nil, rep, errors.Join(err, idem.Close(), ledger.Close(), messages.Close(), closeLeases())
		}
		closeRuns = runLog.Close
	}
	var traj *Trajectories
	closeTraj := func() error { return nil }
	if cfg.TrajectoriesDir != "" {
		if traj, err = OpenTrajectories(cfg.TrajectoriesDir); err != nil {
			return nil, rep, errors.Join(err, idem.Close(), ledger.Close(), messages.Close(), closeRuns())
		}
		closeTraj = traj.Close
	}
	var events *Events
	closeEvents := func() error { return nil }
	if cfg.Events != nil {
		ec := *cfg.Events
		if ec.Node == "" {
			ec.Node = cfg.Node
		}
		events, err = OpenEvents(ec)
		if err != nil {
			return nil, rep, errors.Join(err, idem.Close(), ledger.Close(), messages.Close(), closeLeases(), closeRuns(), closeTraj())
		}
		closeEvents = events.Close
	}
	var taint *Taint
	closeTaint := func() error { return nil }
	if cfg.TaintPath != "" {
		taint, rep.Taint, err = OpenTaint(cfg.TaintPath, cfg.Journal...)
		if err != nil {
			return nil, rep, errors.Join(err, idem.Close(), ledger.Close(), messages.Close(), closeLeases(), closeRuns(), closeTraj(), closeEvents())
		}
		closeTaint = taint.Close
	}
	bus := NewBus()
	st := &store.Store{
		Kind:        Kind,
		Node:        cfg.Node,
		Approvals:   ledger,
		Idempotency: idem,
		Messages:    messages,
		State:       NewState(),
		Bus:         bus,
		Members:     NewMembers(cfg.Node, cfg.Version),
		Health:      func() error { return nil },
		Close: func() error {
			bus.Close()
			return errors.Join(closeEvents(), idem.Close(), ledger.Close(), messages.Close(), closeLeases(), closeRuns(), closeTraj(), closeTaint())
		},
	}
	if traj != nil {
		st.Trajectories = traj
	}
	if leases != nil {
		st.Leases = leases
	}
	if cfg.HarnessPath != "" {
		st.Harness = NewHarness(cfg.HarnessPath)
	}
	if events != nil {
		st.Events = events
	}
	if taint != nil {
		st.Taint = taint
	}
	if runLog != nil {
		st.Runs = runLog
	}
	if cfg.AgentTokensPath != "" {
		st.AgentTokens = TokenFile(cfg.AgentTokensPath)
	}
	if cfg.PosturesPath != "" {
		st.Postures = PostureFile(cfg.PosturesPath)
	}
	if cfg.PeoplePath != "" {
		st.People = PeopleFile(cfg.PeoplePath)
	}
	return st, rep, nil
}
