package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"path"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres"
)

const migrateUsage = `usage:
  car-server migrate status [FLAGS]   the schema migrations this binary carries, and which the database has
  car-server migrate up [FLAGS]       apply the missing ones under the advisory lock, then show the status

For operators who migrate by hand (a daemon with store: postgres also migrates
at start). They need postgres_url: CAR_POSTGRES_URL, --postgres-url or the
config file; any daemon setting may be given as a flag.
Exit codes: 0 ok, 1 the migration failed, 2 usage, 3 the database cannot be reached.`

// migrateTimeout bounds one migrate command, the wait for another daemon's
// migration under the advisory lock included.
const migrateTimeout = 10 * time.Minute

// runMigrateCommand serves "car-server migrate status|up".
func runMigrateCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "status" && args[0] != "up") {
		fmt.Fprintln(stderr, migrateUsage)
		return exitUsage
	}
	cfg, code := loadConfig(command{name: "car-server migrate", help: migrateUsage}, args[1:], stdout, stderr)
	if cfg == nil {
		return code
	}
	if cfg.PostgresURL == "" {
		fmt.Fprintln(stderr, "car-server migrate: postgres_url is not set: set CAR_POSTGRES_URL (or --postgres-url) to the database's libpq URL, such as postgres://car@db.example:5432/car")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	pc := postgresConfig(cfg, "", nil)
	if args[0] == "up" {
		n, err := postgres.MigrateUp(ctx, pc)
		if err != nil {
			return storeFailed(stderr, "migrate", err)
		}
		fmt.Fprintf(stdout, "applied %d migration(s) to %s\n\n", n, postgres.Redact(cfg.PostgresURL))
	}
	list, current, err := postgres.MigrateStatus(ctx, pc)
	if err != nil {
		return storeFailed(stderr, "migrate", err)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tNAME\tSTATE")
	var known int64
	pending := 0
	for _, m := range list {
		state := "applied"
		if !m.Applied {
			state = "pending"
			pending++
		}
		known = max(known, m.Version)
		fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, path.Base(m.Name), state)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nschema version %d at %s; this binary knows up to %d", current, postgres.Redact(cfg.PostgresURL), known)
	switch {
	case current > known:
		fmt.Fprintln(stdout, ": the database is newer, and this binary refuses to start on it")
	case pending > 0:
		fmt.Fprintf(stdout, ": %d pending (car-server migrate up, or start a daemon, applies them)\n", pending)
	default:
		fmt.Fprintln(stdout, ": up to date")
	}
	return exitOK
}

// storeFailed reports err of the store command named (as "agents
// issue-token"): exit 3 when the store cannot be reached, 1 otherwise.
func storeFailed(stderr io.Writer, command string, err error) int {
	fmt.Fprintf(stderr, "car-server %s: %v\n", command, err)
	if errors.Is(err, store.ErrUnavailable) {
		return exitUnreachable
	}
	return exitFailed
}
