package rpc

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// TestACompleteSentRightBeforeCloseIsKept: runs.complete, then the
// connection closed at once, without waiting for the reply, 100 times; every
// run ends with the outcome it reported, none as incomplete.
func TestACompleteSentRightBeforeCloseIsKept(t *testing.T) {
	rs := startRunsServer(t, runsSetup{grace: 20 * time.Millisecond})
	host := rs.hostClient(t)
	const n = 100
	ids := make([]string, n)
	for i := range n {
		// An agent per run: an agent is attached to one connection at a
		// time, and the last one's close may not have been read yet.
		agent := fmt.Sprintf("closer-%d", i)
		r := rs.raw(t)
		if rep := r.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"session.auth","params":{"token":%q,"agent_id":%q}}`, rs.issue(t, agent), agent)); rep.Error != nil {
			t.Fatalf("bind: %+v", rep.Error)
		}
		r.handshake()
		rep := r.call(`{"jsonrpc":"2.0","id":1,"method":"runs.start","params":{"intent":"close right after"}}`)
		var started startReply
		if rep.Error != nil || json.Unmarshal(rep.Result, &started) != nil || started.RunID == "" {
			t.Fatalf("runs.start: %+v %s", rep.Error, rep.Result)
		}
		ids[i] = started.RunID
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"runs.complete","params":{"run_id":%q,"outcome":{"ok":%d}}}`, started.RunID, i))
		r.ws.CloseNow()
	}
	status := map[string]string{}
	testwait.Eventually(t, testTimeout, "every run completed or marked incomplete", func() bool {
		settled := 0
		for i := range n {
			var list protocol.RunsListResult
			call(t, host, protocol.MethodRunsList, map[string]any{"agent_id": fmt.Sprintf("closer-%d", i)}, &list)
			for _, s := range list.Runs {
				status[s.RunID] = s.Status
				if s.Status != "in_progress" {
					settled++
				}
			}
		}
		return settled == n
	})
	lost := 0
	for _, id := range ids {
		if status[id] != "completed" {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d runs.complete sent before a close were lost: %v", lost, n, status)
	}
}
