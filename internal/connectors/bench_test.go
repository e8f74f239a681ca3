package connectors

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkToolsCall is one tools/call to a stdio server, made directly
// with the SDK (the baseline) and as a one-action proposal through a
// connector (every gate, the event log, the result as JSON), in one run:
//
//	go test -run '^$' -bench BenchmarkToolsCall -benchtime 2000x ./internal/connectors/
func BenchmarkToolsCall(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), serverModeEnv+"=ok")
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		b.ResetTimer()
		for b.Loop() {
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call", Arguments: map[string]any{}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("governed", func(b *testing.B) {
		h := newHarness(b, Options{})
		ctx := context.Background()
		if _, err := h.m.AddStdio(ctx, selfServer(b, "bench", "ok", nil)); err != nil {
			b.Fatal(err)
		}
		if _, err := h.m.Enable("bench", []string{"call"}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			res, err := h.rt.Submit(ctx, submission(h, protocol.Action{ID: "a", Tool: Canonical("bench", "call")}))
			if err != nil || res.Results[0].Status != protocol.StatusSucceeded {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
}
