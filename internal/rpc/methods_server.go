package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/openrpc"
)

// server.status and approvals.list serve the operator CLI (car-server status,
// car-server approvals list); any authenticated client may call them.

func (c *conn) serverStatus(context.Context, *json.RawMessage) (any, error) {
	return map[string]any{
		"version":     c.srv.opts.Version,
		"connections": c.srv.ConnectionCount(),
		"runtime":     c.srv.rt.Status(),
	}, nil
}

func (c *conn) approvalsList(context.Context, *json.RawMessage) (any, error) {
	led := c.srv.rt.Approvals()
	if led == nil {
		return map[string]any{"approvals": []approvals.Record{}}, nil
	}
	list := led.List()
	if list == nil {
		list = []approvals.Record{}
	}
	return map[string]any{"approvals": list}, nil
}

// rpcDiscover answers the OpenRPC document (openrpc.json), as the OpenRPC
// convention has it.
func (c *conn) rpcDiscover(context.Context, *json.RawMessage) (any, error) {
	doc, err := openrpc.Document()
	if err != nil {
		return nil, internalError("build the OpenRPC document: %v", err)
	}
	return json.RawMessage(doc), nil
}
