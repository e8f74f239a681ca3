package engine

// eventRing holds the retained events, oldest first, in a circular buffer
// that grows up to the log's bound and then takes each new event in the
// slot of the oldest: an append never copies what is kept, and the log's
// memory is one array however long the daemon runs.
type eventRing struct {
	buf   []Event
	start int // the slot of the oldest event
	n     int // events held
}

func (r *eventRing) len() int { return r.n }

// at is the k-th oldest event (0 ≤ k < len).
func (r *eventRing) at(k int) *Event { return &r.buf[(r.start+k)%len(r.buf)] }

// push appends e, then keeps at most limit events, dropping the oldest.
func (r *eventRing) push(e Event, limit int) {
	if limit <= 0 {
		r.dropOldest(r.n)
		return
	}
	if over := r.n + 1 - limit; over > 0 {
		r.dropOldest(over)
	}
	if r.n == len(r.buf) {
		r.resize(min(max(2*len(r.buf), 64), limit))
	}
	r.buf[(r.start+r.n)%len(r.buf)] = e
	r.n++
}

// dropOldest forgets the k oldest events, releasing what they hold.
func (r *eventRing) dropOldest(k int) {
	k = min(k, r.n)
	for j := 0; j < k; j++ {
		*r.at(j) = Event{}
	}
	if r.n -= k; r.n == 0 {
		r.start = 0
	} else {
		r.start = (r.start + k) % len(r.buf)
	}
}

// fit gives memory back after the bound dropped well below what the ring
// holds room for.
func (r *eventRing) fit(limit int) {
	if len(r.buf) > 2*limit+1024 {
		r.resize(max(r.n, 64))
	}
}

// resize moves the events, in order, to a buffer of size slots.
func (r *eventRing) resize(size int) {
	buf := make([]Event, size)
	for k := 0; k < r.n; k++ {
		buf[k] = *r.at(k)
	}
	r.buf, r.start = buf, 0
}
