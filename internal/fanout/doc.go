// Package fanout is the one bounded, per-subscriber notification queue that
// every live feed uses: a connection's supervision.intent, host.event,
// events.event, runs.trace.event and tools.stream.event feeds, and the
// subscribers of both stores' buses.
//
// A producer calls Push, which never blocks: a subscriber whose socket has
// stopped draining can hold up nobody. One goroutine per Queue, started by
// New and stopped by Close, delivers the items in push order through the
// owner's send function, each call under a write deadline.
//
// Every item carries a cursor: 1, 2, 3… in push order, dropped items
// included. When a subscriber falls more than the capacity behind, the
// oldest undelivered items are dropped, and the next item delivered says how
// many were dropped just before it (Dropped == Cursor - previous Cursor - 1),
// so the subscriber knows to re-read the feed's current state. Because the
// oldest items go, the item that reports a gap is always already queued.
//
// A send that fails or misses its deadline ends delivery: the subscriber is
// treated as gone, Done is closed and Err says why; later pushes are
// discarded. The owner must call Close, which waits for the goroutine.
//
// The package is a leaf: it never imports a transport.
package fanout
