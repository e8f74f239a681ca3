package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/protocol"
)

// ledger is the test's own record of what the daemon asked it to do and
// what the daemon confirmed.
type ledger struct {
	mu         sync.Mutex
	dispatched map[string]int  // key -> tools.execute calls
	acked      map[string]bool // key -> a proposal result said succeeded
	submitted  []string
}

func (l *ledger) connect(t *testing.T, d *daemon) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c := d.dial(t)
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, raw json.RawMessage) (any, error) {
		var p protocol.ToolExecuteParams
		_ = json.Unmarshal(raw, &p)
		key, _ := p.Parameters["k"].(string)
		l.mu.Lock()
		l.dispatched[key]++
		l.mu.Unlock()
		return map[string]any{"charged": key}, nil
	})
	if err := c.Call(ctx, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "book_seat", Idempotent: true}}, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// submit sends one proposal of idempotent charges and records what came back.
func (l *ledger) submit(c *client.Client, keys []string) error {
	actions := make([]any, len(keys))
	for i, k := range keys {
		actions[i] = map[string]any{"id": fmt.Sprint("a", i), "type": "tool_call", "tool": "book_seat", "parameters": map[string]any{"k": k}}
	}
	var res protocol.ProposalResult
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": actions}}, &res); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range res.Results {
		if r.Status == protocol.StatusSucceeded {
			l.acked[keys[i]] = true
		}
	}
	return nil
}

func TestCrashNeverRepeatsAnAcknowledgedIdempotentCall(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials run the daemon many times")
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	home := t.TempDir()
	l := &ledger{dispatched: map[string]int{}, acked: map[string]bool{}}
	const trials = 12
	for trial := 0; trial < trials; trial++ {
		d := startDaemon(t, home)
		c := l.connect(t, d)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for p := 0; ; p++ {
				select {
				case <-stop:
					return
				default:
				}
				keys := make([]string, 1+p%4)
				for i := range keys {
					keys[i] = fmt.Sprintf("t%d-p%d-%d", trial, p, i)
				}
				l.mu.Lock()
				l.submitted = append(l.submitted, keys...)
				l.mu.Unlock()
				if err := l.submit(c, keys); err != nil {
					return // the daemon died under us
				}
			}
		}()
		time.Sleep(time.Duration(10+rng.Intn(150)) * time.Millisecond) // a random point to crash at
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		_ = d.cmd.Wait()
		close(stop)
		<-done
		c.Close()
		if _, err := journal.Verify(filepath.Join(home, "idempotency.jsonl")); err != nil {
			t.Fatalf("trial %d: the journal does not verify after SIGKILL: %v", trial, err)
		}
	}

	// Restart once more and re-submit everything ever submitted.
	d := startDaemon(t, home)
	c := l.connect(t, d)
	defer c.Close()
	l.mu.Lock()
	all := append([]string(nil), l.submitted...)
	ackedBefore := map[string]bool{}
	for k := range l.acked {
		ackedBefore[k] = true
	}
	l.mu.Unlock()
	for i := 0; i < len(all); i += 50 {
		end := min(i+50, len(all))
		if err := l.submit(c, all[i:end]); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ackedBefore) == 0 {
		t.Fatal("no result was acknowledged before a crash: the test exercised nothing")
	}
	for k := range ackedBefore {
		if n := l.dispatched[k]; n != 1 {
			t.Errorf("key %s: its result reached the client, yet it was dispatched %d times", k, n)
		}
	}
	window := 0
	for _, k := range all {
		if l.dispatched[k] > 1 {
			window++
		}
		if !l.acked[k] {
			t.Errorf("key %s never succeeded, even after the final re-submission", k)
		}
	}
	t.Logf("%d trials, %d keys, %d acknowledged before a crash, %d re-run inside the honest window (ran, not yet journaled)",
		trials, len(all), len(ackedBefore), window)
}
