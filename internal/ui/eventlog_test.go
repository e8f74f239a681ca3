package ui_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// writes submits proposal id of n state writes (keys id-0 … id-n-1) and
// waits for it.
func writes(t *testing.T, d *daemon, id string, n int) {
	t.Helper()
	c, err := client.Dial(ctxT(t), d.wsURL(), &client.Options{Token: authToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	actions := make([]map[string]any, n)
	for i := range actions {
		actions[i] = map[string]any{"id": fmt.Sprintf("w%d", i), "type": "state_write", "parameters": map[string]any{"key": fmt.Sprintf("%s-%d", id, i), "value": i}}
	}
	var res protocol.ProposalResult
	if err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"id": id, "actions": actions}}, &res); err != nil {
		t.Fatal(err)
	}
}

// TestTheEventLogPagesBackPastARestart: the event panel reads the durable
// log, so a person pages back, with "Older events", to what happened before
// the daemon restarted; and it says the chain is verified up to the newest
// signed head, or that it does not hold once a segment was edited.
func TestTheEventLogPagesBackPastARestart(t *testing.T) {
	d := startDaemon(t, hostToken)
	writes(t, d, "p-before", 3)
	d.restart(hostToken) // a clean stop signs a head
	for i := range 3 {
		writes(t, d, fmt.Sprintf("p-after-%d", i), 40) // 3 × 40 writes: far more events than the page first reads
	}

	p := openPage(t, d.pageURL())
	p.ready()
	before := `[...document.querySelectorAll('#events tbody tr')].some((tr) => tr.children[3].textContent === 'p-before')`
	if eval[bool](p, before) {
		t.Fatal("the page's first read already holds the events from before the restart; the test needs more after it")
	}
	p.until("the chain to be verified up to a signed head", `document.querySelector('#chain').dataset.ok === 'true' && document.querySelector('#chain').textContent.startsWith('Chain verified up to signed head #')`)
	for range 4 {
		if eval[bool](p, before) {
			break
		}
		rows := eval[int](p, `document.querySelectorAll('#events tbody tr').length`)
		p.do(chromedp.Click(chromedp.CSS("#older")))
		p.until("a page of older events", fmt.Sprintf(`document.querySelectorAll('#events tbody tr').length > %d`, rows))
	}
	if !eval[bool](p, before) {
		t.Fatal("paging back never reached the events from before the restart")
	}

	// An event edited in a sealed segment, the size kept: the next check says so.
	d.stop()
	segs, err := filepath.Glob(filepath.Join(d.dir, "events", "*.seg"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments %v %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte(`"p-before-1"`), []byte(`"p-before-9"`), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("the first segment does not hold p-before's events")
	}
	if err := os.WriteFile(segs[0], edited, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start(d.addr)
	p2 := openPage(t, d.pageURL())
	p2.ready()
	p2.until("the chain to be shown broken", `document.querySelector('#chain').dataset.ok === 'false' && document.querySelector('#chain').textContent.startsWith('The chain does NOT hold: ')`)
}
