package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/postgres"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkStoreOverhead measures, in one run, the per-action overhead of
// a proposal with the file store (its journals under a temporary directory)
// and with the postgres store (a real PostgreSQL from pgtest), side by
// side, wired as the daemon wires them: idempotency, approvals, messages
// and state from the store, and with postgres the event log joined to the
// cluster's and followed.
//
// Plain tool calls reach the store only through the event log; idempotent
// ones carry fresh parameters every time, so every call claims its key and
// commits its result. Proposals have 100 actions, run at the default
// concurrency (16) and one action at a time (1).
//
// Each sub-benchmark measures, over its own connection, a raw round trip
// (session.capabilities.get, which touches no store, so the baseline is the
// same whatever the store) and reports the time per action as a ratio to
// it; the postgres ones also measure one statement's round trip to the
// database (SELECT 1 on a connection of their own). Without PostgreSQL the
// benchmark skips, saying what to install.
func BenchmarkStoreOverhead(b *testing.B) {
	newDB := benchDatabases(b)
	for _, conc := range []int{16, 1} {
		for _, idempotent := range []bool{false, true} {
			mode := "plain"
			if idempotent {
				mode = "idempotent"
			}
			for _, kind := range []string{file.Kind, "postgres"} {
				b.Run(fmt.Sprintf("concurrency=%d/store=%s/%s", conc, kind, mode), func(b *testing.B) {
					benchStore(b, kind, newDB, conc, idempotent)
				})
			}
		}
	}
}

// benchDatabases returns how a sub-benchmark gets an empty database: on the
// server named by pgtest.EnvURL, or on a private cluster that lives as long
// as b (started here, so the benchmark skips here when there is none).
func benchDatabases(b *testing.B) func(testing.TB) string {
	b.Helper()
	if os.Getenv(pgtest.EnvURL) != "" {
		return pgtest.URL
	}
	return pgtest.NewServer(b).NewDatabase
}

func benchStore(b *testing.B, kind string, newDB func(testing.TB) string, concurrency int, idempotent bool) {
	const actions = 100
	ctx := context.Background()
	st, pg, dbURL := openBenchStore(b, kind, newDB)
	var bus store.Bus
	if kind != file.Kind {
		bus = st.Bus // as the daemon does: the file store's bus stays out of rpc
	}
	idem := &timedIdempotency{Idempotency: st.Idempotency}
	ts := startServerWith(b, serverSetup{
		opts: Options{Store: st, Node: st.Node, Bus: bus},
		engine: engine.Options{
			MaxConcurrency: concurrency,
			Idempotency:    idem,
			Approvals:      st.Approvals,
			Messages:       st.Messages,
			State:          st.State,
		},
		closeAfter: st.Close,
	})
	if st.Events != nil {
		followClusterLog(b, ts.rt, st)
	}
	var db *pgx.Conn
	if dbURL != "" {
		var err error
		if db, err = pgx.Connect(ctx, dbURL); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close(context.Background()) })
	}

	c, err := client.Dial(ctx, ts.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var calls atomic.Int64
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, _ json.RawMessage) (any, error) {
		calls.Add(1)
		return map[string]any{"ok": true}, nil
	})
	if err := c.Call(ctx, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "noop"}}, nil); err != nil {
		b.Fatal(err)
	}

	var raw, dbRaw, prop time.Duration
	var allocs uint64
	var events0 postgres.EventStats
	if pg != nil {
		events0 = pg.EventStats()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Fresh parameters every iteration: an idempotent call never hits.
		list := make([]any, actions)
		for j := range list {
			a := toolCall(fmt.Sprintf("a%d", j), "noop", map[string]any{"i": j, "round": i})
			if idempotent {
				a["idempotent"] = true
			}
			list[j] = a
		}
		params := map[string]any{"proposal": map[string]any{"actions": list}}

		start := time.Now()
		for j := 0; j < actions; j++ {
			if err := c.Call(ctx, protocol.MethodSessionCapabilitiesGet, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
		raw += time.Since(start)
		if db != nil {
			start = time.Now()
			for j := 0; j < actions; j++ {
				var one int
				if err := db.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
					b.Fatal(err)
				}
			}
			dbRaw += time.Since(start)
		}

		before := calls.Load()
		res, took, n := submitMeasured(b, c, params)
		prop += took
		allocs += n
		if n := calls.Load() - before; n != actions || len(res.Results) != actions {
			b.Fatalf("%d of %d actions dispatched, %d results", n, actions, len(res.Results))
		}
		for _, r := range res.Results {
			if r.Status != protocol.StatusSucceeded {
				b.Fatalf("action %s: %s %q", r.ActionID, r.Status, r.ErrorText())
			}
		}
	}
	b.StopTimer()
	n := float64(b.N * actions)
	b.ReportMetric(float64(raw.Nanoseconds())/n, "ns/roundtrip")
	if db != nil {
		b.ReportMetric(float64(dbRaw.Nanoseconds())/n, "ns/db_roundtrip")
	}
	b.ReportMetric(float64(prop.Nanoseconds())/n, "ns/action")
	b.ReportMetric(float64(prop)/float64(raw), "action/roundtrip")
	b.ReportMetric(float64(allocs)/n, "allocs/action")
	if pg != nil {
		// Written as the writer got to them: the last proposal's may still
		// be queued, so these are lower bounds.
		ev := pg.EventStats()
		if ev.Dropped != events0.Dropped || ev.Spooled != events0.Spooled {
			b.Fatalf("events dropped %d, spooled %d: the database did not take them", ev.Dropped-events0.Dropped, ev.Spooled-events0.Spooled)
		}
		b.ReportMetric(float64(ev.Written-events0.Written)/n, "events/action")
		b.ReportMetric(float64(ev.Batches-events0.Batches)/n, "event_batches/action")
	}
	if idempotent {
		claims, commits := idem.claims.Load(), idem.commits.Load()
		if claims != int64(b.N*actions) || commits != claims {
			b.Fatalf("%d claims and %d commits for %d idempotent calls", claims, commits, b.N*actions)
		}
		b.ReportMetric(float64(idem.beginNs.Load())/n, "ns/claim")
		b.ReportMetric(float64(idem.commitNs.Load())/n, "ns/commit")
	}
}

// timedIdempotency counts and times the claims and commits of the
// idempotency part of a store, so the benchmark can say where an
// idempotent call's time goes.
type timedIdempotency struct {
	store.Idempotency
	claims, commits   atomic.Int64
	beginNs, commitNs atomic.Int64
}

func (t *timedIdempotency) Begin(ctx context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
	start := time.Now()
	out, hit, c, err := t.Idempotency.Begin(ctx, key, tool, proposalID)
	t.beginNs.Add(int64(time.Since(start)))
	if c == nil {
		return out, hit, c, err
	}
	t.claims.Add(1)
	return out, hit, &timedClaim{Claim: c, t: t}, err
}

type timedClaim struct {
	store.Claim
	t *timedIdempotency
}

func (c *timedClaim) Commit(ctx context.Context, out any) error {
	start := time.Now()
	err := c.Claim.Commit(ctx, out)
	c.t.commitNs.Add(int64(time.Since(start)))
	if err == nil {
		c.t.commits.Add(1)
	}
	return err
}

// openBenchStore opens a store of kind for b, and for postgres returns its
// database and URL too. The caller closes it (closeAfter).
func openBenchStore(b *testing.B, kind string, newDB func(testing.TB) string) (*store.Store, *postgres.DB, string) {
	b.Helper()
	dir := b.TempDir()
	if kind == file.Kind {
		st, _, err := file.Open(file.Config{
			IdempotencyPath: filepath.Join(dir, "idempotency.jsonl"),
			ApprovalsPath:   filepath.Join(dir, "approvals.jsonl"),
			MessagesPath:    filepath.Join(dir, "messages.jsonl"),
			Node:            "bench",
		})
		if err != nil {
			b.Fatal(err)
		}
		return st, nil, ""
	}
	dbURL := newDB(b)
	db, err := postgres.Open(context.Background(), postgres.Config{
		URL:       dbURL,
		Node:      "bench",
		SpoolPath: filepath.Join(dir, "events-spool.jsonl"),
	})
	if err != nil {
		b.Fatal(err)
	}
	return db.Store(), db, dbURL
}

// followClusterLog joins rt's event log to the cluster's and follows the
// other daemons' events, as the daemon does on the postgres store, until b
// ends (before the server stops: cleanups run last first).
func followClusterLog(b *testing.B, rt *engine.Runtime, st *store.Store) {
	b.Helper()
	if err := rt.Events.JoinCluster(ctxT(b), st.Node, st.Events); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var mu sync.Mutex
	var failed []error
	go func() {
		defer close(done)
		rt.Events.Follow(ctx, engine.FollowOptions{Bus: st.Bus, Every: time.Second, OnError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, err)
		}})
	}()
	b.Cleanup(func() {
		cancel()
		<-done
		if err := errors.Join(failed...); err != nil {
			b.Errorf("following the cluster's event log: %v", err)
		}
	})
}
