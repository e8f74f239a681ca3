package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/protocol"
)

// Connectors are the daemon's MCP connectors, as the connectors.* methods
// reach them (internal/connectors.Manager). Their errors say what was
// wrong and what to do; each is answered as invalid params.
type Connectors interface {
	Add(ctx context.Context, p protocol.ConnectorsAddParams) (protocol.ConnectorStatus, error)
	AddStdio(ctx context.Context, p protocol.ConnectorsAddStdioParams) (protocol.ConnectorStatus, error)
	List() protocol.ConnectorsListResult
	Tools(slug string) ([]protocol.ConnectorTool, error)
	Enable(slug string, tools []string) (protocol.ConnectorEnableResult, error)
	Disable(slug string, tools []string) (protocol.ConnectorDisableResult, error)
	Refresh(ctx context.Context, slug string) ([]protocol.ConnectorTool, error)
	Remove(slug string) (protocol.ConnectorRemoveResult, error)
}

// connectors is the daemon's, or an error saying they are off.
func (c *conn) connectors() (Connectors, error) {
	if c.srv.opts.Connectors == nil {
		return nil, internalError("this daemon runs no MCP connectors")
	}
	return c.srv.opts.Connectors, nil
}

func (c *conn) connectorsAdd(ctx context.Context, params *json.RawMessage) (any, error) {
	return connectorCall(c, "connectors.add", "{name, url, headers?}", params, func(m Connectors, p protocol.ConnectorsAddParams) (any, error) {
		return m.Add(ctx, p)
	})
}

func (c *conn) connectorsAddStdio(ctx context.Context, params *json.RawMessage) (any, error) {
	return connectorCall(c, "connectors.add_stdio", "{name, command, args?, env?}", params, func(m Connectors, p protocol.ConnectorsAddStdioParams) (any, error) {
		return m.AddStdio(ctx, p)
	})
}

// connectorCall serves a connectors.* method whose params are P: params
// read (shape words the error), then do on the connectors, whose error is
// the method's -32602.
func connectorCall[P any](c *conn, method, shape string, params *json.RawMessage, do func(m Connectors, p P) (any, error)) (any, error) {
	var p P
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	res, err := do(m, p)
	if err != nil {
		return nil, invalidParams("%s: %v", method, err)
	}
	return res, nil
}

func (c *conn) connectorsList(_ context.Context, _ *json.RawMessage) (any, error) {
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	return m.List(), nil
}

func (c *conn) connectorsTools(_ context.Context, params *json.RawMessage) (any, error) {
	return connectorSlugCall(c, "connectors.tools", params, func(m Connectors, slug string) (any, error) {
		return m.Tools(slug)
	})
}

func (c *conn) connectorsEnableTools(_ context.Context, params *json.RawMessage) (any, error) {
	return connectorCall(c, "connectors.enable_tools", "{slug, tools: string[]}", params, func(m Connectors, p protocol.ConnectorToolsParams) (any, error) {
		return m.Enable(p.Slug, p.Tools)
	})
}

func (c *conn) connectorsDisableTools(_ context.Context, params *json.RawMessage) (any, error) {
	return connectorCall(c, "connectors.disable_tools", "{slug, tools: string[]}", params, func(m Connectors, p protocol.ConnectorToolsParams) (any, error) {
		return m.Disable(p.Slug, p.Tools)
	})
}

func (c *conn) connectorsRefresh(ctx context.Context, params *json.RawMessage) (any, error) {
	return connectorSlugCall(c, "connectors.refresh", params, func(m Connectors, slug string) (any, error) {
		return m.Refresh(ctx, slug)
	})
}

func (c *conn) connectorsRemove(_ context.Context, params *json.RawMessage) (any, error) {
	return connectorSlugCall(c, "connectors.remove", params, func(m Connectors, slug string) (any, error) {
		return m.Remove(slug)
	})
}

// connectorSlugCall serves a connectors.* method whose one param is the
// connector's slug, as connectorCall does for the others.
func connectorSlugCall(c *conn, method string, params *json.RawMessage, do func(m Connectors, slug string) (any, error)) (any, error) {
	slug, err := stringParam(params, "slug")
	if err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	res, err := do(m, slug)
	if err != nil {
		return nil, invalidParams("%s: %v", method, err)
	}
	return res, nil
}
