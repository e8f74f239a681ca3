package rpc

import (
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// TestServerConnectionsNamesPrincipalsToTheHostOnly: the dashboard's roster
// tells a connection by its principal and client name, as an approval's
// requested_by does; a caller without the host role sees roles and tiers,
// not who the other connections are.
func TestServerConnectionsNamesPrincipalsToTheHostOnly(t *testing.T) {
	ts := startServer(t, Options{Token: testToken, HostToken: "the-host-token"})
	plain, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: testToken, SkipHandshake: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	call(t, plain, protocol.MethodServerHandshake, map[string]any{"protocol_version": protocol.ProtocolVersion, "client_name": "my-ide"}, nil)
	h, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "the-host-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })

	byID := func(c *client.Client) (self string, m map[string]protocol.ConnectionInfo) {
		var r protocol.ServerConnectionsResult
		call(t, c, protocol.MethodServerConnections, nil, &r)
		m = map[string]protocol.ConnectionInfo{}
		for _, ci := range r.Connections {
			m[ci.ID] = ci
		}
		return r.Self, m
	}
	plainID, seen := byID(plain)
	for id, ci := range seen {
		if ci.Principal != "" || ci.AgentID != "" || ci.ClientName != "" {
			t.Errorf("a plain client was told who connection %s is: %+v", id, ci)
		}
	}
	hostID, seen := byID(h)
	if got := seen[plainID]; got.Principal != protocol.PrincipalPlain || got.ClientName != "my-ide" || got.Role != "client" {
		t.Errorf("the host sees the plain client as %+v; want principal plain, client my-ide", got)
	}
	if got := seen[hostID]; got.Principal != protocol.PrincipalHost || got.ClientName != "car-server-go-client" || got.Role != "host" {
		t.Errorf("the host sees itself as %+v; want principal host, client car-server-go-client", got)
	}
}
