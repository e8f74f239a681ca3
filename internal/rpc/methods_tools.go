package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/protocol"
)

const toolDefinitionsShape = "an array of ToolDefinition {name, description?, parameters?, returns?, idempotent?, cache_ttl_secs?, rate_limit?}"

func (c *conn) toolsRegister(_ context.Context, params *json.RawMessage) (any, error) {
	var defs []protocol.ToolSchema
	if err := decodeParams(params, &defs, toolDefinitionsShape); err != nil {
		return nil, err
	}
	n, err := c.sess.Tools.Register(defs)
	if err != nil {
		return nil, invalidParams("tools.register: %v; nothing was registered", err)
	}
	return n, nil
}

func (c *conn) toolsList(context.Context, *json.RawMessage) (any, error) {
	list := c.sess.Tools.List()
	return protocol.ToolsListResult{Tools: list, Count: len(list)}, nil
}

func (c *conn) toolsUnregister(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ToolsUnregisterParams
	const shape = "{name: string}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("name", p.Name, shape); err != nil {
		return nil, err
	}
	removed, err := c.sess.Tools.Unregister(p.Name)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	return protocol.ToolsUnregisterResult{Unregistered: p.Name, Removed: removed}, nil
}
