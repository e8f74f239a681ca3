package engine

// eventBlock is how many events one block of the log holds. The log grows
// and sheds a block at a time: no append copies the events already kept or
// allocates more than one block (about 140 KiB) while it holds the log's
// lock. (A single slice did both: growing it, and compacting it once full,
// copied and allocated megabytes under the lock, and every proposal's next
// event waited behind that.)
const eventBlock = 1024

// eventRing is the log's events, oldest first, in blocks of eventBlock
// events; every block but the last is full.
type eventRing struct {
	blocks [][]Event
	head   int // events already dropped from blocks[0]
	n      int // events held
}

func (r *eventRing) len() int { return r.n }

// at is the i-th event held, 0 the oldest.
func (r *eventRing) at(i int) *Event {
	i += r.head
	return &r.blocks[i/eventBlock][i%eventBlock]
}

func (r *eventRing) push(e Event) {
	if len(r.blocks) == 0 || len(r.blocks[len(r.blocks)-1]) == eventBlock {
		r.blocks = append(r.blocks, make([]Event, 0, eventBlock))
	}
	last := &r.blocks[len(r.blocks)-1]
	*last = append(*last, e)
	r.n++
}

// dropOldest forgets the k oldest events.
func (r *eventRing) dropOldest(k int) {
	k = min(k, r.n)
	if k <= 0 {
		return
	}
	if k == r.n {
		*r = eventRing{}
		return
	}
	from := r.head
	r.head += k
	r.n -= k
	for r.head >= eventBlock {
		r.blocks[0] = nil
		r.blocks = r.blocks[1:]
		r.head -= eventBlock
		from = 0
	}
	if from < r.head { // what a block still holds of dropped events goes now
		clear(r.blocks[0][from:r.head])
	}
}

// eventSeq is a run of events read in order: the ring, or a slice read from
// the cluster's log.
type eventSeq interface {
	len() int
	at(i int) *Event
}

// eventSlice is a slice of events as an eventSeq.
type eventSlice []Event

func (s eventSlice) len() int        { return len(s) }
func (s eventSlice) at(i int) *Event { return &s[i] }
