package streams

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// Options bound a Table. Zero values take the defaults noted.
type Options struct {
	BufferChunks  int              // undrained chunks held per handle before the oldest is dropped (1,024)
	BufferBytes   int              // undrained bytes held per handle before the oldest chunk is dropped (8 MiB)
	MaxBuffered   int64            // undrained bytes held by all handles together: past it a handle's oldest chunks go, the newest too (DefaultMaxBuffered)
	MaxChunkBytes int              // largest chunk accepted (64 KiB)
	MaxPerOwner   int              // handles a connection may hold, running or not yet consumed (256)
	IdleTimeout   time.Duration    // a running handle with no chunk for this long fails (30 min)
	ReapAfter     time.Duration    // a finished handle nobody polls is dropped after this (15 min)
	Now           func() time.Time // the clock (time.Now)
}

// Defaults of the Options the daemon's settings also offer; config prints
// them in --help.
const (
	DefaultMaxChunkBytes = 64 << 10
	DefaultMaxPerOwner   = 256
	DefaultIdleTimeout   = 30 * time.Minute
	// DefaultMaxBuffered is 32 handles' full buffers: the per-handle bound
	// alone lets 256 handles of each connection hold 2 GiB.
	DefaultMaxBuffered = 256 << 20
)

func (o *Options) setDefaults() {
	if o.BufferChunks <= 0 {
		o.BufferChunks = 1024
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 8 << 20
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.MaxChunkBytes <= 0 {
		o.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if o.MaxPerOwner <= 0 {
		o.MaxPerOwner = DefaultMaxPerOwner
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.ReapAfter <= 0 {
		o.ReapAfter = 15 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Info names a handle and where it came from.
type Info struct {
	Handle     string
	Tool       string
	Mode       string
	ActionID   string
	ProposalID string
	Owner      string // the connection that submitted the proposal and runs the tool
}

// Ended is a handle's end, for the event log.
type Ended struct {
	Info
	Status  protocol.ToolStatus
	Error   string
	Dropped uint64 // chunks dropped from its buffer over its life
}

// Event is one chunk, for subscribers.
type Event struct {
	Handle string
	Owner  string
	Chunk  json.RawMessage
}

// Errors of Chunk: the chunk is ignored.
var (
	ErrUnknownHandle = errors.New("unknown stream handle")
	ErrNotOwner      = errors.New("the handle belongs to another connection")
	ErrFinished      = errors.New("the handle has already ended")
)

// Handle is one detached invocation. Its fields past Info are guarded by
// the Table's lock.
type Handle struct {
	Info
	stop func(Info, string) // tells the tool to stop, with the reason
	done chan struct{}      // closed when it ends

	status     protocol.ToolStatus
	errText    string
	result     json.RawMessage
	chunks     []json.RawMessage // undrained, oldest first
	bytes      int
	dropped    uint64 // since the last poll
	droppedAll uint64
	last       time.Time // the last chunk, or the start; the end once ended
	opened     time.Time
	lastChunk  time.Time                 // zero until the first chunk
	progress   *protocol.ToolStreamChunk // the latest progress chunk
	started    bool                      // the tool has answered that it started
	pending    *Ended                    // its end, held until it has started
}

// Done is closed when the handle has ended.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Table is the daemon's handles.
type Table struct {
	opts  Options
	onEnd func(Ended)

	mu      sync.Mutex
	handles map[string]*Handle
	owned   map[string]int // owner → handles in the table
	bytes   int64          // undrained bytes of every handle
	// overDaemon counts the chunks dropped because all handles together
	// held MaxBuffered bytes.
	overDaemon uint64

	subMu sync.Mutex                    // serialises changes to subs
	subs  atomic.Pointer[[]*subscriber] // read on every chunk without a lock
}

type subscriber struct {
	id   string
	host bool
	push func(Event)
}

// New returns an empty table; onEnd (which may be nil) is called, without
// the table's lock, once for every handle that ends.
func New(opts Options, onEnd func(Ended)) *Table {
	opts.setDefaults()
	t := &Table{opts: opts, onEnd: onEnd, handles: make(map[string]*Handle), owned: make(map[string]int)}
	t.subs.Store(&[]*subscriber{})
	return t
}

// Open registers a running handle, with a fresh id in Info.Handle, before
// its tool is asked to start, so that chunks sent at once are kept. stop
// tells the tool to stop; it is called without the table's lock.
func (t *Table) Open(info Info, stop func(info Info, reason string)) (*Handle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		info.Handle = newHandleID()
		if _, taken := t.handles[info.Handle]; !taken {
			break
		}
	}
	h := &Handle{Info: info, stop: stop, done: make(chan struct{}), status: protocol.ToolRunning}
	if n := t.owned[info.Owner]; n >= t.opts.MaxPerOwner {
		return nil, fmt.Errorf("this connection holds %d stream handles, the most it may (max_stream_handles): poll finished handles with tools.poll or cancel running ones with tools.cancel, then submit again", n)
	}
	h.last = t.opts.Now()
	h.opened = h.last
	t.handles[info.Handle] = h
	t.owned[info.Owner]++
	return h, nil
}

// newHandleID is 16 random hex characters.
func newHandleID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Started records that h's tool answered that it started: announce (the
// start's event) runs, then the end's, if it has already ended, so that the
// two are recorded in that order.
func (t *Table) Started(h *Handle, announce func()) {
	t.mu.Lock()
	h.started = true
	pending := h.pending
	h.pending = nil
	t.mu.Unlock()
	announce()
	t.ended(pending)
}

// Discard drops a handle whose tool did not start: it never ran, so no end
// is recorded.
func (t *Table) Discard(h *Handle) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.handles[h.Handle] == h {
		t.remove(h)
	}
	if h.status == protocol.ToolRunning {
		h.status, h.errText = protocol.ToolFailed, "the tool did not start"
		close(h.done)
	}
}

// remove takes h out of the table; the caller holds t.mu.
func (t *Table) remove(h *Handle) {
	t.bytes -= int64(h.bytes)
	h.bytes = 0
	delete(t.handles, h.Handle)
	if t.owned[h.Owner]--; t.owned[h.Owner] <= 0 {
		delete(t.owned, h.Owner)
	}
}

// Chunk takes one chunk that connection from sent for handle. A chunk for an
// unknown or ended handle, from another connection, too large or malformed
// is refused with the reason, and changes nothing.
func (t *Table) Chunk(from, handle string, raw json.RawMessage) error {
	if len(raw) > t.opts.MaxChunkBytes {
		return fmt.Errorf("chunk of %d bytes is over the %d-byte limit (max_stream_chunk_bytes): split it", len(raw), t.opts.MaxChunkBytes)
	}
	c, err := protocol.DecodeChunk(raw)
	if err != nil {
		return err
	}
	enc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("chunk: %w", err)
	}
	t.mu.Lock()
	h, ok := t.handles[handle]
	switch {
	case !ok:
		t.mu.Unlock()
		return ErrUnknownHandle
	case h.Owner != from:
		t.mu.Unlock()
		return ErrNotOwner
	case h.status != protocol.ToolRunning:
		t.mu.Unlock()
		return ErrFinished
	}
	h.last = t.opts.Now()
	h.lastChunk = h.last
	if c.Kind == protocol.ChunkProgress {
		h.progress = &c
	}
	t.buffer(h, enc)
	var ended *Ended
	if c.Terminal() {
		status, msg := protocol.ToolSucceeded, ""
		if c.Kind == protocol.ChunkError {
			status, msg = protocol.ToolFailed, *c.Message
		}
		ended = t.end(h, status, msg)
		h.result = c.Result
	}
	t.mu.Unlock()
	t.publish(Event{Handle: handle, Owner: h.Owner, Chunk: enc})
	t.ended(ended)
	return nil
}

// buffer appends a chunk, dropping the oldest past the bounds: the handle's
// own, which keep its newest chunk, and the daemon's, which may take that
// one too when other handles hold the bytes. The caller holds t.mu.
func (t *Table) buffer(h *Handle, c json.RawMessage) {
	h.chunks = append(h.chunks, c)
	h.bytes += len(c)
	t.bytes += int64(len(c))
	for len(h.chunks) > 0 {
		own := len(h.chunks) > t.opts.BufferChunks || (h.bytes > t.opts.BufferBytes && len(h.chunks) > 1)
		if !own && t.bytes <= t.opts.MaxBuffered {
			break
		}
		if !own {
			t.overDaemon++
		}
		h.bytes -= len(h.chunks[0])
		t.bytes -= int64(len(h.chunks[0]))
		h.chunks[0] = nil
		h.chunks = h.chunks[1:]
		h.dropped++
		h.droppedAll++
	}
}

// Buffered is the undrained bytes of every handle, and how many chunks the
// daemon-wide bound (max_stream_buffered_bytes) has dropped, for
// server.status.
func (t *Table) Buffered() (bytes int64, droppedOverDaemon uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes, t.overDaemon
}

// end seals a running handle; the caller holds t.mu and calls ended after
// releasing it.
func (t *Table) end(h *Handle, status protocol.ToolStatus, msg string) *Ended {
	h.status, h.errText = status, msg
	h.last = t.opts.Now()
	close(h.done)
	e := &Ended{Info: h.Info, Status: status, Error: msg, Dropped: h.droppedAll}
	if !h.started {
		h.pending = e
		return nil
	}
	return e
}

func (t *Table) ended(e *Ended) {
	if e != nil && t.onEnd != nil {
		t.onEnd(*e)
	}
}

// Outcome is how h ended: its status, the done chunk's result and the
// error's message. It is meaningful once Done is closed.
func (t *Table) Outcome(h *Handle) (protocol.ToolStatus, json.RawMessage, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return h.status, h.result, h.errText
}

// visible reports whether connection by may see h; the caller holds t.mu.
func visible(h *Handle, by string, host bool) bool { return host || h.Owner == by }

// Poll drains a handle's chunks. It returns nil for a handle that is
// unknown, not by's to see, or consumed: the poll that returns an ended
// handle's status with nothing left to drain consumes it.
func (t *Table) Poll(handle, by string, host bool) *protocol.ToolPollResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.handles[handle]
	if !ok || !visible(h, by, host) {
		return nil
	}
	res := &protocol.ToolPollResult{
		Handle: h.Handle, Tool: h.Tool, ActionID: h.ActionID, Status: h.status,
		Chunks: h.chunks, DroppedChunks: h.dropped, Error: h.errText,
	}
	if res.Chunks == nil {
		res.Chunks = []json.RawMessage{}
	}
	if h.status == protocol.ToolSucceeded {
		res.Result = h.result
	}
	t.bytes -= int64(h.bytes)
	h.chunks, h.bytes, h.dropped = nil, 0, 0
	if h.status != protocol.ToolRunning {
		t.remove(h)
	}
	return res
}

// List describes the handles by may see (every one for a host), oldest
// first, without draining them: a running handle, or an ended one not yet
// consumed by a poll nor reaped.
func (t *Table) List(by string, host bool) []protocol.ToolHandleInfo {
	t.mu.Lock()
	out := make([]protocol.ToolHandleInfo, 0, len(t.handles))
	for _, h := range t.handles {
		if !visible(h, by, host) {
			continue
		}
		info := protocol.ToolHandleInfo{
			Handle: h.Handle, Tool: h.Tool, Mode: h.Mode, Status: h.status, OwnerConnection: h.Owner,
			ProposalID: h.ProposalID, ActionID: h.ActionID, StartedAt: h.opened,
			ChunksBuffered: len(h.chunks), DroppedChunks: h.droppedAll,
		}
		if !h.lastChunk.IsZero() {
			at := h.lastChunk
			info.LastChunkAt = &at
		}
		if h.progress != nil {
			p := *h.progress
			info.Progress = &p
		}
		out = append(out, info)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].Handle < out[j].Handle
	})
	return out
}

// Cancel seals a running handle as cancelled and tells its tool to stop.
// It reports false for a handle that is unknown, not by's, or ended.
func (t *Table) Cancel(handle, by string, host bool, reason string) bool {
	t.mu.Lock()
	h, ok := t.handles[handle]
	if !ok || !visible(h, by, host) || h.status != protocol.ToolRunning {
		t.mu.Unlock()
		return false
	}
	ended := t.end(h, protocol.ToolCancelled, reason)
	t.mu.Unlock()
	t.ended(ended)
	t.stopTool(h, reason)
	return true
}

// CancelProposal cancels the running handles of a proposal that by may
// see, and returns how many it cancelled.
func (t *Table) CancelProposal(proposalID, by string, host bool, reason string) int {
	return t.endMatching(func(h *Handle) bool {
		return h.ProposalID == proposalID && visible(h, by, host)
	}, protocol.ToolCancelled, reason, true)
}

// DropOwner fails the running handles of a connection that has closed; its
// tool cannot be told, and the handles stay pollable by a host until reaped.
func (t *Table) DropOwner(owner, reason string) {
	t.endMatching(func(h *Handle) bool { return h.Owner == owner }, protocol.ToolFailed, reason, false)
	t.Unsubscribe(owner)
}

// endMatching ends every running handle match accepts.
func (t *Table) endMatching(match func(*Handle) bool, status protocol.ToolStatus, reason string, stop bool) int {
	t.mu.Lock()
	var hs []*Handle
	var ends []*Ended
	for _, h := range t.handles {
		if h.status == protocol.ToolRunning && match(h) {
			hs = append(hs, h)
			ends = append(ends, t.end(h, status, reason))
		}
	}
	t.mu.Unlock()
	for i, h := range hs {
		t.ended(ends[i])
		if stop {
			t.stopTool(h, reason)
		}
	}
	return len(hs)
}

func (t *Table) stopTool(h *Handle, reason string) {
	if h.stop != nil {
		h.stop(h.Info, reason)
	}
}

// Sweep fails running handles silent for longer than the idle timeout
// (telling their tools to stop) and drops ended handles nobody has polled
// for longer than ReapAfter. It returns how many it failed and dropped.
func (t *Table) Sweep() (failed, reaped int) {
	now := t.opts.Now()
	reason := fmt.Sprintf("no chunk for %s (stream_idle_timeout); the handle is failed", t.opts.IdleTimeout)
	t.mu.Lock()
	for _, h := range t.handles {
		if h.status != protocol.ToolRunning && now.Sub(h.last) >= t.opts.ReapAfter {
			t.remove(h)
			reaped++
		}
	}
	t.mu.Unlock()
	failed = t.endMatching(func(h *Handle) bool { return now.Sub(h.last) >= t.opts.IdleTimeout }, protocol.ToolFailed, reason, true)
	return failed, reaped
}

// Run sweeps every interval until ctx ends.
func (t *Table) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Sweep()
		}
	}
}

// Len is the number of handles held.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.handles)
}

// Subscribe makes push receive every chunk of the handles connection id may
// see (every handle when host is set), replacing an earlier subscription of
// id. push must not block.
func (t *Table) Subscribe(id string, host bool, push func(Event)) {
	t.subMu.Lock()
	defer t.subMu.Unlock()
	old := *t.subs.Load()
	next := make([]*subscriber, 0, len(old)+1)
	for _, s := range old {
		if s.id != id {
			next = append(next, s)
		}
	}
	next = append(next, &subscriber{id: id, host: host, push: push})
	t.subs.Store(&next)
}

// Unsubscribe ends id's subscription and reports whether it had one.
func (t *Table) Unsubscribe(id string) bool {
	t.subMu.Lock()
	defer t.subMu.Unlock()
	old := *t.subs.Load()
	next := make([]*subscriber, 0, len(old))
	for _, s := range old {
		if s.id != id {
			next = append(next, s)
		}
	}
	t.subs.Store(&next)
	return len(next) != len(old)
}

// publish hands a chunk to the subscribers that may see it.
func (t *Table) publish(e Event) {
	for _, s := range *t.subs.Load() {
		if s.host || s.id == e.Owner {
			s.push(e)
		}
	}
}
