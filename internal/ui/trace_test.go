package ui_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/parslee-ai/car-server/protocol"
)

// startTracedDaemon is a daemon with tracing on (its spans kept in memory:
// what the page shows is the event log's trace id) and, when traceURL is
// set, otel_trace_url.
func startTracedDaemon(t *testing.T, traceURL string) *daemon {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	d := &daemon{t: t, dir: t.TempDir(), hostToken: hostToken, tracer: tp.Tracer("dashboard-test"), traceURL: traceURL}
	d.start("127.0.0.1:0")
	t.Cleanup(d.stop)
	return d
}

// traceIDOf is the trace id the event log gave a proposal.
func traceIDOf(t *testing.T, r *runner, id string) string {
	t.Helper()
	var got protocol.EventsQueryResult
	if err := r.Call(ctxT(t), protocol.MethodEventsQuery, protocol.EventsQueryParams{ProposalID: id, Kinds: []protocol.EventKind{"proposal_received"}}, &got); err != nil || len(got.Events) != 1 {
		t.Fatalf("proposal_received of %s: %+v %v", id, got.Events, err)
	}
	tid, _ := got.Events[0].Data["trace_id"].(string)
	if len(tid) != 32 {
		t.Fatalf("proposal_received of %s carries trace_id %q", id, tid)
	}
	return tid
}

// With otel_trace_url, a traced proposal's card links to its trace; the
// link is the template with the proposal's trace id.
func TestAProposalCardLinksToItsTrace(t *testing.T) {
	d := startTracedDaemon(t, "http://127.0.0.1:16686/trace/{trace_id}?from=car")
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"read_file": echo})
	if res, err := resultOf(r.submit(t, "p-traced", "read_file", map[string]any{"path": "/srv/a"}).wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("proposal: %+v %v", res, err)
	}
	tid := traceIDOf(t, r, "p-traced")
	sel := `document.querySelector('#proposals li[data-id="p-traced"] a.trace')`
	p.until("the trace link on the proposal card", sel+` !== null`)
	if href := eval[string](p, sel+`.href`); href != "http://127.0.0.1:16686/trace/"+tid+"?from=car" {
		t.Fatalf("the trace link is %q, want the template with trace id %s", href, tid)
	}
	if rel := eval[string](p, sel+`.rel`); rel != "noopener noreferrer" {
		t.Fatalf("the trace link's rel is %q", rel)
	}
}

// Without otel_trace_url, the card shows the trace id, and links nowhere.
func TestWithoutATemplateTheCardShowsTheTraceID(t *testing.T) {
	d := startTracedDaemon(t, "")
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"read_file": echo})
	if res, err := resultOf(r.submit(t, "p-traced", "read_file", map[string]any{"path": "/srv/a"}).wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("proposal: %+v %v", res, err)
	}
	tid := traceIDOf(t, r, "p-traced")
	card := `document.querySelector('#proposals li[data-id="p-traced"]')`
	p.until("the trace id on the proposal card", card+`?.querySelector('code.trace-id')?.textContent === "`+tid+`"`)
	if n := eval[int](p, card+`.querySelectorAll('a').length`); n != 0 {
		t.Fatalf("the card has %d links without a template", n)
	}
}
