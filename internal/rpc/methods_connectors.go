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
	var p protocol.ConnectorsAddParams
	if err := decodeParams(params, &p, "{name, url, headers?}"); err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	st, err := m.Add(ctx, p)
	if err != nil {
		return nil, invalidParams("connectors.add: %v", err)
	}
	return st, nil
}

func (c *conn) connectorsAddStdio(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ConnectorsAddStdioParams
	if err := decodeParams(params, &p, "{name, command, args?, env?}"); err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	st, err := m.AddStdio(ctx, p)
	if err != nil {
		return nil, invalidParams("connectors.add_stdio: %v", err)
	}
	return st, nil
}

func (c *conn) connectorsList(_ context.Context, _ *json.RawMessage) (any, error) {
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	return m.List(), nil
}

func (c *conn) connectorsTools(_ context.Context, params *json.RawMessage) (any, error) {
	slug, err := stringParam(params, "slug")
	if err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	views, err := m.Tools(slug)
	if err != nil {
		return nil, invalidParams("connectors.tools: %v", err)
	}
	return views, nil
}

func (c *conn) connectorsEnableTools(_ context.Context, params *json.RawMessage) (any, error) {
	return c.changeConnectorTools("connectors.enable_tools", params, func(m Connectors, slug string, tools []string) (any, error) {
		return m.Enable(slug, tools)
	})
}

func (c *conn) connectorsDisableTools(_ context.Context, params *json.RawMessage) (any, error) {
	return c.changeConnectorTools("connectors.disable_tools", params, func(m Connectors, slug string, tools []string) (any, error) {
		return m.Disable(slug, tools)
	})
}

// changeConnectorTools serves enable_tools and disable_tools: {slug,
// tools} read, then change made on the connectors.
func (c *conn) changeConnectorTools(method string, params *json.RawMessage, change func(m Connectors, slug string, tools []string) (any, error)) (any, error) {
	var p protocol.ConnectorToolsParams
	if err := decodeParams(params, &p, "{slug, tools: string[]}"); err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	res, err := change(m, p.Slug, p.Tools)
	if err != nil {
		return nil, invalidParams("%s: %v", method, err)
	}
	return res, nil
}

func (c *conn) connectorsRefresh(ctx context.Context, params *json.RawMessage) (any, error) {
	slug, err := stringParam(params, "slug")
	if err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	views, err := m.Refresh(ctx, slug)
	if err != nil {
		return nil, invalidParams("connectors.refresh: %v", err)
	}
	return views, nil
}

func (c *conn) connectorsRemove(_ context.Context, params *json.RawMessage) (any, error) {
	slug, err := stringParam(params, "slug")
	if err != nil {
		return nil, err
	}
	m, err := c.connectors()
	if err != nil {
		return nil, err
	}
	res, err := m.Remove(slug)
	if err != nil {
		return nil, invalidParams("connectors.remove: %v", err)
	}
	return res, nil
}
