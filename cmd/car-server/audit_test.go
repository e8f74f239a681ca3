package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// echoClient connects a client that serves the tool "echo".
func echoClient(t *testing.T, d *daemon) *client.Client {
	t.Helper()
	c := d.dial(t)
	c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"ok": true}, nil
	})
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "echo"}}, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// submitEchoes sends proposal id with n independent echo actions.
func submitEchoes(ctx context.Context, c *client.Client, id string, n int) error {
	actions := make([]any, n)
	for i := range actions {
		actions[i] = map[string]any{"id": fmt.Sprint("a", i), "type": "tool_call", "tool": "echo", "parameters": map[string]any{"pad": strings.Repeat("x", 64)}}
	}
	var res protocol.ProposalResult
	if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"id": id, "actions": actions}}, &res); err != nil {
		return err
	}
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			return fmt.Errorf("proposal %s: action %s %s", id, r.ActionID, r.Status)
		}
	}
	return nil
}

// proposalEvents reads the events of one proposal, oldest first.
func proposalEvents(t *testing.T, c *client.Client, id string) []engine.Event {
	t.Helper()
	var q protocol.EventsQueryResult
	if err := c.Call(ctxT(t), protocol.MethodEventsQuery, map[string]any{"proposal_id": id}, &q); err != nil {
		t.Fatal(err)
	}
	sort.Slice(q.Events, func(i, j int) bool { return q.Events[i].Seq < q.Events[j].Seq })
	return q.Events
}

// auditVerify runs car-server audit verify on home.
func auditVerify(t *testing.T, home string, extra ...string) (string, int) {
	t.Helper()
	return runBinary(t, append([]string{"audit", "verify", "--home", home}, extra...)...)
}

// TestEventsSurviveSIGKILL: every event of every answered proposal is in
// the log after a SIGKILL and a restart, the chain continues from the
// newest, and the log verifies.
func TestEventsSurviveSIGKILL(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	c := echoClient(t, d)
	const actions = 3
	var mu sync.Mutex
	var answered []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := 0; ; p++ {
			id := fmt.Sprint("p", p)
			if submitEchoes(ctxT(t), c, id, actions) != nil {
				return // the daemon died under us
			}
			mu.Lock()
			answered = append(answered, id)
			n := len(answered)
			mu.Unlock()
			if n == 40 {
				close(stop)
			}
		}
	}()
	select {
	case <-stop:
	case <-done:
		t.Fatal("the submissions stopped before the kill")
	case <-time.After(waitLimit):
		t.Fatal("40 proposals were never answered")
	}
	d.kill(t) // proposals are still being submitted
	<-done
	c.Close()

	d = startDaemon(t, home)
	c = d.dial(t)
	defer c.Close()
	mu.Lock()
	ids := append([]string(nil), answered...)
	mu.Unlock()
	var newest uint64
	for _, id := range ids {
		evs := proposalEvents(t, c, id)
		kinds := map[engine.EventKind]int{}
		for _, e := range evs {
			kinds[e.Kind]++
			newest = max(newest, e.Seq)
		}
		if kinds[engine.EventProposalReceived] != 1 || kinds[engine.EventActionStarted] != actions || kinds[engine.EventActionSucceeded] != actions || kinds[engine.EventProposalFinished] != 1 {
			t.Fatalf("answered proposal %s lost events in the crash: %v", id, kinds)
		}
	}
	c2 := echoClient(t, d)
	defer c2.Close()
	if err := submitEchoes(ctxT(t), c2, "after", 1); err != nil {
		t.Fatal(err)
	}
	after := proposalEvents(t, c2, "after")
	if after[0].Seq <= newest {
		t.Fatalf("the seq went back after the restart: %d after %d", after[0].Seq, newest)
	}
	var chain protocol.ChainVerifyResult
	if err := c2.Call(ctxT(t), protocol.MethodEventsChainVerify, nil, &chain); err != nil {
		t.Fatal(err)
	}
	if chain.TamperedAt != nil || chain.Verified == nil || uint64(*chain.Verified) < after[len(after)-1].Seq {
		t.Fatalf("events.chain.verify across the restart: %+v", chain)
	}
	d.stop(t)
	if out, code := auditVerify(t, home); code != 0 || !strings.Contains(out, "ok: the log holds") {
		t.Fatalf("audit verify after a crash and a restart: %d\n%s", code, out)
	}
}

// fillLog runs n proposals of k actions on d.
func fillLog(t *testing.T, d *daemon, prefix string, n, k int) {
	t.Helper()
	c := echoClient(t, d)
	defer c.Close()
	for p := range n {
		if err := submitEchoes(ctxT(t), c, fmt.Sprint(prefix, p), k); err != nil {
			t.Fatal(err)
		}
	}
}

func dirBytes(t *testing.T, dir string) (n int64) {
	t.Helper()
	names, err := auditlog.Segments(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

func eventCount(t *testing.T, d *daemon) int {
	t.Helper()
	c := d.dial(t)
	defer c.Close()
	var n int
	if err := c.Call(ctxT(t), protocol.MethodEventsCount, nil, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEventRetentionByBytesAndAge(t *testing.T) {
	home := t.TempDir()
	const bound = 256 << 10
	d := startDaemon(t, home, fmt.Sprint("CAR_EVENTS_MAX_BYTES=", bound))
	fillLog(t, d, "p", 60, 10) // about 1,300 events, 4 times the bound
	kept := eventCount(t, d)
	if size := dirBytes(t, filepath.Join(home, "events")); size > bound+bound/16 || kept >= 60*(10*2+3) {
		t.Fatalf("retention by bytes: %d bytes and %d events kept, bound %d", size, kept, bound)
	}
	d.stop(t)
	if out, code := auditVerify(t, home); code != 0 || strings.Contains(out, " 0 retention records") {
		t.Fatalf("a log retained by bytes verifies from its retention record: %d\n%s", code, out)
	}
	// Age: restarted with a retention shorter than the time since the
	// last event, every sealed segment goes.
	d = startDaemon(t, home, "CAR_EVENTS_RETENTION=1ms", fmt.Sprint("CAR_EVENTS_MAX_BYTES=", bound))
	if n := eventCount(t, d); n != 0 {
		t.Fatalf("retention by age kept %d events", n)
	}
	fillLog(t, d, "q", 1, 1)
	d.stop(t)
	if out, code := auditVerify(t, home); code != 0 {
		t.Fatalf("a log retained by age verifies: %d\n%s", code, out)
	}
}

func TestEventLogTornTailAndCorruptSegment(t *testing.T) {
	home := t.TempDir()
	small := fmt.Sprint("CAR_EVENTS_MAX_BYTES=", 1<<20) // segments of 64 KiB
	d := startDaemon(t, home, small)
	fillLog(t, d, "p", 20, 10)
	d.stop(t)
	dir := filepath.Join(home, "events")
	names, err := auditlog.Segments(dir)
	if err != nil || len(names) < 3 {
		t.Fatalf("%d segments (%v); the test needs an interior one", len(names), err)
	}
	// A torn tail: the start of a line the crash cut.
	last := filepath.Join(dir, names[len(names)-1])
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"key":"e","op":"event","seq":99999,"at":"2026-`)
	f.Close()
	if out, code := auditVerify(t, home); code != 0 || !strings.Contains(out, "torn line") {
		t.Fatalf("a torn tail is crash residue, not a failure: %d\n%s", code, out)
	}
	d = startDaemon(t, home, small)
	fillLog(t, d, "q", 1, 1)
	d.stop(t)
	if out, code := auditVerify(t, home); code != 0 || strings.Contains(out, "torn line") {
		t.Fatalf("after the daemon cut the torn tail: %d\n%s", code, out)
	}

	// A corrupt interior segment: reported at start, by name, and not fatal.
	interior := filepath.Join(dir, names[1])
	b, err := os.ReadFile(interior)
	if err != nil {
		t.Fatal(err)
	}
	mid := len(b) / 2
	b = append(b[:mid:mid], append([]byte("\x00\x00garbage\n"), b[mid:]...)...)
	if err := os.WriteFile(interior, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, home, small)
	line, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool {
		e, _ := l["error"].(string)
		return l["msg"] == "event log" && strings.Contains(e, names[1]) && strings.Contains(e, "corrupt")
	})
	if err != nil {
		t.Fatalf("no log line at start naming the corrupt segment %s: %v", names[1], err)
	}
	if line["level"] != "error" {
		t.Fatalf("the corrupt segment is logged at level %v", line["level"])
	}
	fillLog(t, d, "r", 2, 2) // the daemon serves
	d.stop(t)
	if out, code := auditVerify(t, home); code != 1 || !strings.Contains(out, names[1]) {
		t.Fatalf("audit verify of a corrupt interior segment: %d\n%s", code, out)
	}
}

// segLines reads every line of the segments of home, in order, with the
// segment each came from.
type segLine struct {
	seg  string
	text string
}

func readSegLines(t *testing.T, home string) []segLine {
	t.Helper()
	dir := filepath.Join(home, "events")
	names, err := auditlog.Segments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []segLine
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			out = append(out, segLine{n, l})
		}
	}
	return out
}

// writeSegLines writes lines back into the segments they name; a segment
// left with no line is emptied.
func writeSegLines(t *testing.T, home string, lines []segLine) {
	t.Helper()
	dir := filepath.Join(home, "events")
	names, _ := auditlog.Segments(dir)
	content := map[string]*strings.Builder{}
	for _, n := range names {
		content[n] = &strings.Builder{}
	}
	for _, l := range lines {
		content[l.seg].WriteString(l.text)
	}
	for n, b := range content {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func eventIdx(lines []segLine) []int {
	var out []int
	for i, l := range lines {
		if strings.Contains(l.text, `"op":"event"`) {
			out = append(out, i)
		}
	}
	return out
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	// CopyFS makes files 0644; the daemon's are 0600, and the audit key
	// must be.
	err := filepath.WalkDir(to, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			err = os.Chmod(path, 0o600)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyCatchesTampering edits the files of a real daemon's log
// and runs car-server audit verify on each.
func TestAuditVerifyCatchesTampering(t *testing.T) {
	pristine := t.TempDir()
	d := startDaemon(t, pristine, "CAR_AUDIT_HEAD_EVERY=20")
	// A witness keeps the heads the daemon signs.
	w := d.dial(t)
	heads := make(chan engine.Event, 1024)
	w.HandleNotification(protocol.MethodEventsEvent, func(raw json.RawMessage) {
		var n protocol.EventNotice
		if json.Unmarshal(raw, &n) == nil {
			heads <- n.Event
		}
	})
	if err := w.Call(ctxT(t), protocol.MethodEventsSubscribe, map[string]any{"kinds": []string{string(engine.EventAuditHead)}}, nil); err != nil {
		t.Fatal(err)
	}
	fillLog(t, d, "p", 10, 5)
	snapshot := t.TempDir() // the log as it was after 10 proposals
	d.stop(t)
	w.Close()
	copyDir(t, pristine, snapshot)

	d = startDaemon(t, pristine, "CAR_AUDIT_HEAD_EVERY=20")
	w = d.dial(t)
	defer w.Close()
	w.HandleNotification(protocol.MethodEventsEvent, func(raw json.RawMessage) {
		var n protocol.EventNotice
		if json.Unmarshal(raw, &n) == nil {
			heads <- n.Event
		}
	})
	if err := w.Call(ctxT(t), protocol.MethodEventsSubscribe, map[string]any{"kinds": []string{string(engine.EventAuditHead)}}, nil); err != nil {
		t.Fatal(err)
	}
	fillLog(t, d, "q", 10, 5)
	snapHead, ok, err := auditlog.ReadHeadFile(filepath.Join(snapshot, "events", auditlog.HeadFile))
	if err != nil || !ok {
		t.Fatalf("the first run left no signed head: %v", err)
	}
	var witnessed []engine.Event
	deadline := time.After(waitLimit)
	for len(witnessed) < 2 {
		select {
		case e := <-heads:
			if e.Seq > snapHead.Seq { // a head of the second run
				witnessed = append(witnessed, e)
			}
		case <-deadline:
			t.Fatalf("the witness received %d heads of the second run", len(witnessed))
		}
	}
	d.stop(t)
	witness := filepath.Join(t.TempDir(), "witness.jsonl")
	var wb strings.Builder
	for _, e := range witnessed {
		b, _ := json.Marshal(e)
		wb.Write(append(b, '\n'))
	}
	if err := os.WriteFile(witness, []byte(wb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := auditVerify(t, pristine, "--witness", witness); code != 0 || !strings.Contains(out, "witness: 2 heads found") {
		t.Fatalf("the intact log against its witness: %d\n%s", code, out)
	}

	cases := []struct {
		name   string
		tamper func(t *testing.T, home string)
		want   string
	}{
		{"an edited event", func(t *testing.T, home string) {
			l := readSegLines(t, home)
			i := eventIdx(l)[30]
			l[i].text = strings.Replace(l[i].text, `"tool":"echo"`, `"tool":"ech0"`, 1)
			writeSegLines(t, home, l)
		}, "edited"},
		{"a deleted interior event", func(t *testing.T, home string) {
			l := readSegLines(t, home)
			i := eventIdx(l)[30]
			writeSegLines(t, home, append(l[:i:i], l[i+1:]...))
		}, "deleted"},
		{"a reordering", func(t *testing.T, home string) {
			l := readSegLines(t, home)
			ev := eventIdx(l)
			l[ev[30]].text, l[ev[31]].text = l[ev[31]].text, l[ev[30]].text
			writeSegLines(t, home, l)
		}, "reordered"},
		{"a truncated tail below a signed head", func(t *testing.T, home string) {
			l := readSegLines(t, home)
			ev := eventIdx(l)
			writeSegLines(t, home, l[:ev[len(ev)-40]])
		}, "truncated"},
		{"a log replaced by a consistent shorter one", func(t *testing.T, home string) {
			dir := filepath.Join(home, "events")
			os.RemoveAll(dir)
			copyDir(t, filepath.Join(snapshot, "events"), dir)
			// The head file of the longer log stays.
			b, err := os.ReadFile(filepath.Join(pristine, "events", auditlog.HeadFile))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, auditlog.HeadFile), b, 0o600)
		}, "shorter"},
		{"a forged signature", func(t *testing.T, home string) {
			path := filepath.Join(home, "events", auditlog.HeadFile)
			var h auditlog.Head
			b, _ := os.ReadFile(path)
			json.Unmarshal(b, &h)
			h.Hash = strings.Repeat("0", 64)
			b, _ = json.Marshal(h)
			os.WriteFile(path, b, 0o600)
		}, "forged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			copyDir(t, pristine, home)
			c.tamper(t, home)
			out, code := auditVerify(t, home)
			if code != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(out, c.want) {
				t.Fatalf("audit verify: exit %d, want 1 and a failure saying %q:\n%s", code, c.want, out)
			}
		})
	}
	t.Run("a history rewritten after the witness saw it", func(t *testing.T) {
		// The log and its head file rolled back together: consistent,
		// signed, and it verifies alone; the witness saw more.
		home := t.TempDir()
		copyDir(t, snapshot, home)
		if out, code := auditVerify(t, home); code != 0 {
			t.Fatalf("the rolled-back log verifies alone: %d\n%s", code, out)
		}
		out, code := auditVerify(t, home, "--witness", witness)
		if code != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(out, "witness") {
			t.Fatalf("audit verify --witness of a rolled-back log: exit %d\n%s", code, out)
		}
	})
}

func TestAuditPubkeyAndExport(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	fillLog(t, d, "p", 2, 2)
	d.stop(t)
	out, code := runBinary(t, "audit", "pubkey", "--home", home)
	if code != 0 {
		t.Fatalf("audit pubkey: %d %s", code, out)
	}
	pub, err := auditlog.ParsePublicKeyPEM([]byte(out))
	if err != nil {
		t.Fatalf("audit pubkey printed %q: %v", out, err)
	}
	pubFile := filepath.Join(t.TempDir(), "pub.pem")
	os.WriteFile(pubFile, []byte(out), 0o600)
	if out, code := auditVerify(t, home, "--pubkey", pubFile); code != 0 {
		t.Fatalf("verify with the printed key: %d\n%s", code, out)
	}
	_ = pub
	if st, err := os.Stat(filepath.Join(home, "audit-key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the audit key: %v %v", st.Mode(), err)
	}

	cmd := execBinary("audit", "export", "--home", home, "--since", "1h", "--format", "cloudevents")
	b, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for l := range strings.Lines(string(b)) {
		var ce map[string]any
		if err := json.Unmarshal([]byte(l), &ce); err != nil {
			t.Fatalf("a line that is not JSON: %q", l)
		}
		if ce["specversion"] != "1.0" || ce["id"] == "" || ce["source"] == "" || ce["time"] == nil || ce["data"] == nil {
			t.Fatalf("not a CloudEvent: %v", ce)
		}
		kinds = append(kinds, ce["type"].(string))
	}
	if len(kinds) == 0 || kinds[0] != "car.proposal_received" || !strings.Contains(strings.Join(kinds, ","), "car.action_succeeded") {
		t.Fatalf("exported types %v", kinds)
	}
	b, err = execBinary("audit", "export", "--home", home, "--since", "1h", "--until", time.Now().Add(-2*time.Hour).Format(time.RFC3339)).Output()
	if err != nil || len(b) != 0 {
		t.Fatalf("an empty window exported %q %v", b, err)
	}
	if out, code := runBinary(t, "audit", "export", "--home", home); code != exitUsage || !strings.Contains(out, "--since or --proposal is required") {
		t.Fatalf("export without --since: %d %s", code, out)
	}
}

// audit verify --store checks every daemon's chain in the shared log, and
// names the daemon and the event where an edited or deleted row breaks it.
func TestAuditVerifyStoreChecksEveryDaemonsChain(t *testing.T) {
	url := pgtest.URL(t)
	ds := startCluster(t, url, 2)
	for i, d := range ds {
		c := d.dial(t)
		for j := range 3 {
			var res protocol.ProposalResult
			if err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
				map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": fmt.Sprintf("k%d-%d", i, j), "value": j}},
			}}}, &res); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	db, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	nodes := []string{nodeOf(t, ds[0]), nodeOf(t, ds[1])}
	// Each daemon's events reach the database a batch behind its replies.
	testwait.Eventually(t, waitLimit, "both daemons' events in the database", func() bool {
		for _, n := range nodes {
			var k int
			if db.QueryRow(ctxT(t), "SELECT count(*) FROM car_events WHERE node = $1", n).Scan(&k) != nil || k < 12 {
				return false
			}
		}
		return true
	})

	out, code := runBinary(t, "audit", "verify", "--store", url)
	if code != exitOK || !strings.Contains(out, "in the chains of 2 daemons") || !strings.Contains(out, "daemon "+nodes[0]+": ") ||
		!strings.Contains(out, "daemon "+nodes[1]+": ") || !strings.Contains(out, "ok: every chain holds") {
		t.Fatalf("audit verify --store on an untouched log: %d\n%s", code, out)
	}

	// An edited event of daemon 1: its chain breaks there; daemon 0's holds.
	if _, err := db.Exec(ctxT(t), `UPDATE car_events SET body = replace(body::text, '"k1-1"', '"k1-9"')::json WHERE node = $1 AND body::text LIKE '%"k1-1"%'`, nodes[1]); err != nil {
		t.Fatal(err)
	}
	out, code = runBinary(t, "audit", "verify", "--store", url)
	if code != exitFailed || !strings.Contains(out, "FAILED: daemon "+nodes[1]+"'s event seq ") || !strings.Contains(out, "daemon "+nodes[0]+": ") || strings.Contains(out, "daemon "+nodes[0]+"'s") {
		t.Fatalf("audit verify --store after an edit: %d\n%s", code, out)
	}

	// A deleted interior event of daemon 0 breaks its chain at the next one.
	var seq int64
	if err := db.QueryRow(ctxT(t), "SELECT seq FROM car_events WHERE node = $1 ORDER BY seq OFFSET 3 LIMIT 1", nodes[0]).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctxT(t), "DELETE FROM car_events WHERE node = $1 AND seq = $2", nodes[0], seq); err != nil {
		t.Fatal(err)
	}
	out, code = runBinary(t, "audit", "verify", "--store", url)
	if code != exitFailed || !strings.Contains(out, fmt.Sprintf("daemon %s: 3 events hold, then its chain breaks at seq %d", nodes[0], seq+1)) {
		t.Fatalf("audit verify --store after a deletion: %d\n%s", code, out)
	}

	if out, code := runBinary(t, "audit", "verify", "--store", url, "--witness", "w.jsonl"); code != exitUsage || !strings.Contains(out, "--store goes with verify alone") {
		t.Fatalf("--store with --witness: %d %s", code, out)
	}
}

// audit.status answers a person with the daemon's check of its durable
// log, verified up to the newest signed head; a second call within the
// minute is the same check; an agent may not ask.
func TestAuditStatusFromTheDaemon(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home, "CAR_AUDIT_HEAD_EVERY=1")
	c := echoClient(t, d)
	defer c.Close()
	var res protocol.ProposalResult
	if err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "e", "type": "tool_call", "tool": "echo", "parameters": map[string]any{}},
	}}}, &res); err != nil {
		t.Fatal(err)
	}
	// The head is signed with the events; its file is replaced just after.
	testwait.Eventually(t, waitLimit, "the signed head's file", func() bool {
		_, err := os.Stat(filepath.Join(home, "events", "head.json"))
		return err == nil
	})
	hostToken, err := os.ReadFile(filepath.Join(home, "ai.parslee.car", "host-token"))
	if err != nil {
		t.Fatal(err)
	}
	person, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{HostToken: string(hostToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()
	var st, again protocol.AuditStatus
	if err := person.Call(ctxT(t), protocol.MethodAuditStatus, nil, &st); err != nil {
		t.Fatal(err)
	}
	if !st.OK || st.Log != "file" || st.Events == 0 || st.Head == nil || st.Head.Seq == 0 || st.Head.Seq > st.LastSeq || st.CheckedAt.IsZero() {
		t.Fatalf("audit.status: %+v", st)
	}
	if err := person.Call(ctxT(t), protocol.MethodAuditStatus, nil, &again); err != nil || !again.CheckedAt.Equal(st.CheckedAt) {
		t.Fatalf("a second audit.status within the minute checked again: %+v %v", again, err)
	}
	issue := execBinary("agents", "issue-token", "bot")
	issue.Env = append(os.Environ(), "CAR_HOME="+home)
	token, err := issue.Output()
	if err != nil {
		t.Fatal(err)
	}
	bot, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: strings.TrimSpace(string(token)), AgentID: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Close()
	if err := bot.Call(ctxT(t), protocol.MethodAuditStatus, nil, &again); err == nil || !strings.Contains(err.Error(), "audit.status") {
		t.Fatalf("an agent asked audit.status: %v", err)
	}
}
