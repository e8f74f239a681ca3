package wsstream

import (
	"encoding/json"
	"sync"
)

// Call carries one outgoing call between the JSON-RPC library's send and
// receive hooks and the code that made it, so that neither its params nor
// its result go through encoding/json again: given params, the library
// encodes them once more (a validating pass and a copy), and Wait decodes
// the result into what it is given (another pass and a copy), while both
// are JSON already. The caller dispatches without params; the send hook
// (jsonrpc2.OnSend, which runs before the request is written) puts Params
// on the request, and the receive hook (jsonrpc2.OnRecv, which runs before
// the reply reaches Wait) takes Result off the reply.
type Call struct {
	Params json.RawMessage // until the request is written
	Result json.RawMessage // once the reply is in
}

// Calls are a connection's calls in flight, by request id.
type Calls[K comparable] struct {
	mu sync.Mutex
	m  map[K]*Call
}

// Put registers a call before it is dispatched.
func (c *Calls[K]) Put(id K, call *Call) {
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[K]*Call)
	}
	c.m[id] = call
	c.mu.Unlock()
}

// Get is the call with id, or nil.
func (c *Calls[K]) Get(id K) *Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

// Drop forgets a call once its caller is done with it.
func (c *Calls[K]) Drop(id K) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}
