package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// closedPort is a loopback port nothing listens on: a connection to it is
// refused at once.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// TestPostgresUnreachableAtStartExits: a daemon with store postgres whose
// database does not answer exits 1 with a message that names the URL,
// its password hidden; without a URL it is a usage error (exit 2).
func TestPostgresUnreachableAtStartExits(t *testing.T) {
	port := closedPort(t)
	cmd := execBinary("--port", "0")
	cmd.Env = append(os.Environ(), "CAR_HOME="+t.TempDir(), "CAR_STORE=postgres",
		fmt.Sprintf("CAR_POSTGRES_URL=postgres://car:s3cret@127.0.0.1:%d/car", port))
	out, err := cmd.CombinedOutput()
	code := exitCode(t, err)
	want := fmt.Sprintf("cannot reach PostgreSQL at postgres://car:xxxxx@127.0.0.1:%d/car", port)
	if code != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "the shared store is unavailable") || strings.Contains(string(out), "s3cret") {
		t.Fatalf("start on an unreachable database: exit %d, want 1 with %q and no password:\n%s", code, want, out)
	}

	cmd = execBinary("--port", "0")
	cmd.Env = append(os.Environ(), "CAR_HOME="+t.TempDir(), "CAR_STORE=postgres", "CAR_POSTGRES_URL=")
	out, err = cmd.CombinedOutput()
	if code := exitCode(t, err); code != 2 || !strings.Contains(string(out), "store is postgres but postgres_url is empty") {
		t.Fatalf("store postgres without a URL: exit %d, want 2:\n%s", code, out)
	}
}

// TestStatusListsThisDaemonAsAMember: car-server status shows the store
// and this daemon as a live member under the id kept in $CAR_HOME/node-id
// (0600), and a restarted daemon keeps that id.
func TestStatusListsThisDaemonAsAMember(t *testing.T) {
	home := t.TempDir()
	status := func() (string, int) {
		t.Helper()
		cmd := execBinary("status")
		cmd.Env = append(os.Environ(), "CAR_HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), exitCode(t, err)
	}
	d := startDaemon(t, home)
	b, err := os.ReadFile(filepath.Join(home, "node-id"))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(b))
	if fi, err := os.Stat(filepath.Join(home, "node-id")); err != nil || fi.Mode().Perm() != 0o600 || id == "" {
		t.Fatalf("node-id %q: %v %v", id, fi, err)
	}
	out, code := status()
	if code != 0 || !strings.Contains(out, "store                file") || !regexpLine(out, id, "alive") {
		t.Fatalf("status: exit %d, want the store and %s alive:\n%s", code, id, out)
	}
	d.stop(t)

	startDaemon(t, home)
	b, err = os.ReadFile(filepath.Join(home, "node-id"))
	if err != nil || strings.TrimSpace(string(b)) != id {
		t.Fatalf("node-id after a restart %q %v, want %q", b, err, id)
	}
	cmd := execBinary("status", "--json")
	cmd.Env = append(os.Environ(), "CAR_HOME="+home)
	raw, err := cmd.Output()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("status --json: exit %d", code)
	}
	var st protocol.ServerStatusResult
	if err := json.Unmarshal(raw, &st); err != nil || st.Store != "file" || len(st.Members) != 1 || st.Members[0].ID != id || !st.Members[0].Alive {
		t.Fatalf("status --json after a restart: %v %s", err, raw)
	}
}

// regexpLine reports whether one line of out holds every word.
func regexpLine(out string, words ...string) bool {
	for l := range strings.Lines(out) {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// TestStatusPrintsADeadMember: a member whose heartbeat stopped is shown,
// marked dead; a member list the store could not give is said.
func TestStatusPrintsADeadMember(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	raw, err := json.Marshal(protocol.ServerStatusResult{Version: "1.0.0", Store: "postgres", Members: []protocol.Member{
		{ID: "web-1-aaaaaaaaaaaa", Version: "1.0.0", StartedAt: now.Add(-time.Hour), LastHeartbeat: now, Alive: true},
		{ID: "web-2-bbbbbbbbbbbb", Version: "0.9.0", StartedAt: now.Add(-2 * time.Hour), LastHeartbeat: now.Add(-time.Minute), Alive: false},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printHuman(&out, protocol.MethodServerStatus, raw)
	if !regexpLine(out.String(), "web-1-aaaaaaaaaaaa", "1.0.0", "2031-05-06T07:08:09Z", "alive") ||
		!regexpLine(out.String(), "web-2-bbbbbbbbbbbb", "0.9.0", "2031-05-06T07:07:09Z", "DEAD") ||
		!strings.Contains(out.String(), "store                postgres") {
		t.Fatalf("status with a dead member:\n%s", out.String())
	}

	raw, err = json.Marshal(protocol.ServerStatusResult{Version: "1.0.0", Store: "postgres", Members: []protocol.Member{}, MembersError: "the member list could not be read: the shared store is unavailable"})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	printHuman(&out, protocol.MethodServerStatus, raw)
	if !strings.Contains(out.String(), "members: the member list could not be read: the shared store is unavailable") {
		t.Fatalf("status while the store is down:\n%s", out.String())
	}
}

// TestStatusPrintsTheRingBytes: what server.status --json says the rings
// and queues hold, the human form says too, each figure on its line.
func TestStatusPrintsTheRingBytes(t *testing.T) {
	raw, err := json.Marshal(protocol.ServerStatusResult{Version: "1.0.0", Runtime: protocol.RuntimeStatus{
		Events: 1201, EventBytes: 734003, HostEvents: 32, HostEventBytes: 8387648,
		FeedQueueBytes: 65536, StreamBufferedBytes: 57344, StreamChunksDropped: 57,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printHuman(&out, protocol.MethodServerStatus, raw)
	for _, line := range [][]string{
		{"events retained", "1201", "734003 bytes"},
		{"host event ring", "32 events", "8387648 bytes"},
		{"feed queues", "65536 bytes"},
		{"stream buffers", "57344 bytes", "57 chunks dropped"},
	} {
		if !regexpLine(out.String(), line...) {
			t.Fatalf("status has no line with %q:\n%s", line, out.String())
		}
	}
}

// TestNodeIDIsKeptAndChecked: an id is generated once and read back after;
// a file that does not hold an id refuses the start, saying what to do.
func TestNodeIDIsKeptAndChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node-id")
	id, err := nodeID(path)
	if err != nil || !validNodeID(id) {
		t.Fatalf("a new id %q: %v", id, err)
	}
	again, err := nodeID(path)
	if err != nil || again != id {
		t.Fatalf("the id read back %q %v, want %q", again, err, id)
	}
	if err := os.WriteFile(path, []byte("not an id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeID(path); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("a file without an id: %v", err)
	}
}

// migrate runs car-server migrate in this process.
func migrate(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runMigrateCommand(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestMigrateCommand: against a real PostgreSQL, migrate status lists the
// embedded migrations as pending, up applies them once, and status then
// says the schema is up to date; an unreachable database is exit 3 without
// the password, a missing URL and a bad subcommand exit 2.
func TestMigrateCommand(t *testing.T) {
	url := pgtest.URL(t)
	t.Setenv("CAR_HOME", t.TempDir())
	t.Setenv("CAR_STORE", "file")
	t.Setenv("CAR_POSTGRES_URL", url)

	// Every migration the binary embeds, newest last.
	files, err := filepath.Glob("../../internal/store/postgres/migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("the migrations in the source tree: %v %v", files, err)
	}
	n, newest := len(files), filepath.Base(files[len(files)-1])
	version, err := strconv.Atoi(strings.SplitN(newest, "_", 2)[0]) // numbers may skip: each branch takes its own
	if err != nil {
		t.Fatalf("the newest migration %s has no number: %v", newest, err)
	}
	out, errOut, code := migrate(t, "status")
	if code != exitOK || !regexpLine(out, "00001_init.sql", "pending") || !strings.Contains(out, "schema version 0") || !regexpLine(out, newest, "pending") || !strings.Contains(out, fmt.Sprintf("%d pending", n)) {
		t.Fatalf("status of an empty database: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = migrate(t, "up")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("applied %d migration(s)", n)) || !regexpLine(out, "00001_init.sql", "applied") || !regexpLine(out, newest, "applied") || !strings.Contains(out, fmt.Sprintf("schema version %d", version)) || !strings.Contains(out, "up to date") {
		t.Fatalf("up: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = migrate(t, "up")
	if code != exitOK || !strings.Contains(out, "applied 0 migration(s)") {
		t.Fatalf("up again: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = migrate(t, "status")
	if code != exitOK || !regexpLine(out, "00001_init.sql", "applied") || !strings.Contains(out, "up to date") {
		t.Fatalf("status after up: exit %d\n%s%s", code, out, errOut)
	}

	t.Setenv("CAR_POSTGRES_URL", fmt.Sprintf("postgres://car:s3cret@127.0.0.1:%d/car", closedPort(t)))
	out, errOut, code = migrate(t, "status")
	if code != exitUnreachable || !strings.Contains(errOut, "cannot reach PostgreSQL at postgres://car:xxxxx@127.0.0.1:") || strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("an unreachable database: exit %d, want %d without the password\n%s%s", code, exitUnreachable, out, errOut)
	}
	t.Setenv("CAR_POSTGRES_URL", "")
	if _, errOut, code = migrate(t, "up"); code != exitUsage || !strings.Contains(errOut, "postgres_url is not set") {
		t.Fatalf("no URL: exit %d %s", code, errOut)
	}
	if _, errOut, code = migrate(t, "down"); code != exitUsage || !strings.Contains(errOut, "usage") {
		t.Fatalf("a bad subcommand: exit %d %s", code, errOut)
	}
}
