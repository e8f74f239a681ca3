// Command car-server is the Common Agent Runtime daemon: one Runtime served
// to any number of clients over JSON-RPC 2.0 on WebSocket (TCP and a Unix
// socket).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/connectors"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run is main with an exit code: 0 on a clean stop, 1 on a runtime failure,
// 2 on a usage or configuration error.
func run(args []string) int {
	if len(args) > 0 && args[0] == connectors.ReaperCommand {
		return connectors.RunReaper(args[1:])
	}
	if code, ok := runSubcommand(args); ok {
		return code
	}
	cfg, code := loadConfig(command{}, args, os.Stdout, os.Stderr)
	if cfg == nil {
		return code
	}
	if cfg.ShowVersion {
		fmt.Println("car-server", version)
		return 0
	}
	log, err := newLogger(cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "car-server:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := serve(ctx, cfg, log, hup); err != nil {
		fmt.Fprintln(os.Stderr, "car-server:", err)
		var ue *config.UsageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}
