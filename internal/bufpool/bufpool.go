// Package bufpool lends byte buffers to the paths that encode a message or
// a key, so that they reuse one instead of allocating one each time. A
// buffer grown past its pool's bound is left to the collector when it is
// given back: one large message does not keep its memory in the pool.
package bufpool

import "sync"

// Pool lends buffers that start at one size and are kept up to a bound.
type Pool struct {
	pool sync.Pool
	max  int
}

// New returns a pool of buffers of size bytes' capacity, kept while their
// capacity is at most max.
func New(size, max int) *Pool {
	p := &Pool{max: max}
	p.pool.New = func() any { b := make([]byte, 0, size); return &b }
	return p
}

// Get lends an empty buffer. Store the grown slice back in *b before Put,
// so that the pool keeps what it grew to.
func (p *Pool) Get() *[]byte {
	b := p.pool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// Put gives b back, unless it grew past the pool's bound.
func (p *Pool) Put(b *[]byte) {
	if cap(*b) <= p.max {
		p.pool.Put(b)
	}
}
