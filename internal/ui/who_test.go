package ui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// TestTheCardNamesWhoAsked: an approval card says which principal caused
// it — a plain client by the name it gave, the host, an agent by its id and
// registered name — with its client and connection, in the words car-server
// approvals watch prints (protocol.ApprovalRequester's String).
func TestTheCardNamesWhoAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial func(t *testing.T, d *daemon) *runner
		want protocol.ApprovalRequester // but the connection
	}{
		{"plain client", func(t *testing.T, d *daemon) *runner {
			return newRunner(t, d, map[string]tool{"deploy_service": echo})
		}, protocol.ApprovalRequester{Principal: protocol.PrincipalPlain, ClientName: "car-server-go-client"}},
		{"host", func(t *testing.T, d *daemon) *runner {
			return newRunnerAs(t, d, &client.Options{HostToken: hostToken}, map[string]tool{"deploy_service": echo})
		}, protocol.ApprovalRequester{Principal: protocol.PrincipalHost, ClientName: "car-server-go-client"}},
		{"agent", func(t *testing.T, d *daemon) *runner {
			r := newAgentRunner(t, d, "planner", map[string]tool{"deploy_service": echo})
			if err := r.Call(ctxT(t), protocol.MethodHostRegisterAgent, map[string]any{"id": "planner", "name": "The Planner", "kind": "callback"}, nil); err != nil {
				t.Fatal(err)
			}
			return r
		}, protocol.ApprovalRequester{Principal: protocol.PrincipalAgent, AgentID: "planner", AgentName: "The Planner", ClientName: "car-server-go-client"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, hostToken)
			p := openPage(t, d.pageURL())
			p.ready()
			r := tc.dial(t, d)
			sub := r.submit(t, "p-who", "deploy_service", deployParams())
			p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval button.approve")))
			asked := eval[string](p, `[...document.querySelectorAll("#approvals li.approval dt")].find(dt => dt.textContent === "asked by")?.nextElementSibling.textContent ?? ""`)
			conn := eval[string](p, `[...document.querySelectorAll("#approvals li.approval dt")].find(dt => dt.textContent === "connection")?.nextElementSibling.textContent ?? ""`)
			want := tc.want
			want.Connection = conn
			if conn == "" || asked != want.String() {
				t.Fatalf("asked by %q; want %q, as car-server approvals watch says it", asked, want.String())
			}
			p.do(chromedp.Click(chromedp.CSS("#approvals li.approval button.approve")))
			if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
				t.Fatalf("approved: %+v %v", res, err)
			}
		})
	}
}

// TestTheConnectionsTableFitsALaptop: at 1,400 px the roster's Connections
// table needs no sideways scrolling, even beside a client whose name is as
// long as server.handshake allows (one word, no space to break at), and it
// names that client.
func TestTheConnectionsTableFitsALaptop(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.do(chromedp.EmulateViewport(1400, 900))
	p.ready()
	long := strings.Repeat("very-long-client-name-", 8)[:protocol.MaxClientName]
	c, err := client.Dial(ctxT(t), d.wsURL(), &client.Options{Token: authToken, SkipHandshake: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctxT(t), protocol.MethodServerHandshake, map[string]any{"protocol_version": protocol.ProtocolVersion, "client_name": long}, nil); err != nil {
		t.Fatal(err)
	}
	p.until("the long-named client in the roster", `document.getElementById("connections").tBodies[0].textContent.includes("plain client `+long+`")`)
	table := eval[int](p, `document.getElementById("connections").scrollWidth`)
	room := eval[int](p, `document.getElementById("connections").parentElement.clientWidth`)
	if table > room {
		t.Fatalf("the Connections table is %d px wide in %d px: it scrolls sideways", table, room)
	}
	if page := eval[int](p, `document.documentElement.scrollWidth`); page > 1400 {
		t.Fatalf("the page is %d px wide at a 1400 px window", page)
	}
}
