package rpc

import (
	"context"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// listedConnectors is a Connectors holding one connector, for the access
// rules: the methods reach it or are refused before it.
type listedConnectors struct{ Connectors }

func (listedConnectors) List() protocol.ConnectorsListResult {
	return protocol.ConnectorsListResult{Connectors: []protocol.ConnectorStatus{{Slug: "files", Name: "files"}}}
}

// Connector management is a person's: a plain client reaches it by
// default, only the host role under approver_role = host, and an agent
// never (TestAnAgentCanNeverGovern).
func TestConnectorManagementIsAPersons(t *testing.T) {
	plain := startServer(t, Options{Connectors: listedConnectors{}}).dial(t, "")
	var got protocol.ConnectorsListResult
	call(t, plain, protocol.MethodConnectorsList, nil, &got)
	if len(got.Connectors) != 1 || got.Connectors[0].Slug != "files" {
		t.Fatalf("connectors.list from a plain client: %+v", got)
	}

	ts := startHostServer(t, testTimeout, Options{HostToken: "the-host-token", ApproverRole: ApproverHost, Connectors: listedConnectors{}})
	governed, err := client.Dial(ctxT(t), ts.url, &client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { governed.Close() })
	code, msg := rpcCode(t, governed.Call(ctxT(t), protocol.MethodConnectorsList, nil, nil))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "connectors.list") {
		t.Fatalf("connectors.list from a plain client under approver_role host: %d %q", code, msg)
	}
	person, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "the-host-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { person.Close() })
	got = protocol.ConnectorsListResult{}
	call(t, person, protocol.MethodConnectorsList, nil, &got)
	if len(got.Connectors) != 1 {
		t.Fatalf("connectors.list from the host role: %+v", got)
	}
}

// Without connectors the methods say so.
func TestConnectorsOff(t *testing.T) {
	plain := startServer(t, Options{}).dial(t, "")
	_, msg := rpcCode(t, plain.Call(context.Background(), protocol.MethodConnectorsList, nil, nil))
	if !strings.Contains(msg, "no MCP connectors") {
		t.Fatalf("connectors.list without connectors: %q", msg)
	}
}
