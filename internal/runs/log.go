package runs

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is the answer for a run that does not exist (or, to
// Log.Start, one that belongs to another agent).
var ErrNotFound = errors.New("run not found")

// ErrEnded refuses an append to a run that ended.
var ErrEnded = errors.New("the run already ended")

// Head is what the run log keeps of a run beside its records.
type Head struct {
	RunID     string
	AgentID   string
	Intent    string
	Owner     string // the connection that started the run, or last started it again
	Node      string // the daemon of that connection
	Status    string // StatusInProgress, StatusCompleted or StatusIncomplete
	StartedAt time.Time
	EndedAt   *time.Time
	Outcome   json.RawMessage // what the agent reported at the end; nil when none
	Turns     int             // the run's turn records
	Records   int             // all its records, started and ended included: the seq of the next
}

// LogRecord is one record of a run's trace as the log keeps it: its kind
// and its JSON object.
type LogRecord struct {
	Kind string
	Body json.RawMessage
}

// Batch is what one append adds to a run: records in order, and, when
// End is set, the end of the run (its last record is then the ended one).
type Batch struct {
	Records []LogRecord
	End     *End
}

// End is how a run ended.
type End struct {
	Status  string
	At      time.Time
	Outcome json.RawMessage
}

// Log keeps agent run traces durably: per run a head and its records,
// numbered from 0 (the started record) without a gap. Records are
// immutable once appended. The store's backends implement it (store.RunLog
// is this interface); on the postgres store every daemon reads every run,
// while a run's live subscriptions stay with the daemon that owns its
// connection.
type Log interface {
	// Start creates the run h names, with started as its record 0, durably,
	// and returns it with created true. When a run of h.AgentID exists under
	// h.RunID, it makes h.Owner (on this daemon) that run's owner instead,
	// whatever its status, and returns it with created false. A run of
	// another agent under that id is ErrNotFound.
	Start(ctx context.Context, h Head, started LogRecord) (cur Head, created bool, err error)
	// Append adds a batch to the end of a run in progress, durably, all of
	// it or nothing, and returns the run's head after it. next is called
	// once, holding the run's lock (on every daemon), with the head before
	// the batch: it encodes the records for their positions. An error from
	// next appends nothing and is returned as it is. An unknown run is
	// ErrNotFound; a run that ended is ErrEnded, and next is not called.
	Append(ctx context.Context, runID string, next func(Head) (Batch, error)) (Head, error)
	// Head returns a run's head; an unknown run is ErrNotFound.
	Head(ctx context.Context, runID string) (Head, error)
	// Records returns a run's records with seqs from from up to, not
	// including, to (to < 0: to the end), in order.
	Records(ctx context.Context, runID string, from, to int) ([]json.RawMessage, error)
	// List returns the heads of an agent's runs, newest first.
	List(ctx context.Context, agentID string) ([]Head, error)
	// Stranded lists the runs this daemon's connections owned that were
	// still in progress when it last stopped: their connections are gone.
	Stranded(ctx context.Context) ([]Head, error)
}
