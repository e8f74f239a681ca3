package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/parslee-ai/car-server/config"

	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/postgres"
)

const peopleUsage = `usage:
  car-server people issue-token NAME   mint NAME's own host-role token and print it (only it) on stdout;
                                       replaces any earlier one. A connection that presents it with
                                       session.auth {host_token} (or CAR_HOST_TOKEN for the CLI) has the
                                       host role, and its decisions are recorded as person:NAME
  car-server people revoke NAME        refuse NAME's token from now on; a connection that holds it loses
                                       the host role at its next host-role call
  car-server people list [--json]      the people with a token (never the tokens)

The daemon keeps only a hash of each token in $CAR_HOME/people-tokens.json (0600), or,
with store: postgres, in the shared database (postgres_url), where every daemon reads
it. The daemon's own host-token file stays, as the person "operator", which is why
NAME may not be operator.`

// runPeopleCommand serves people issue-token, revoke and list.
func runPeopleCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("people", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "car-server people: %v\n%s\n", err, peopleUsage)
		return exitUsage
	}
	rest := fs.Args()
	if !tokenCommandLine("people", rest, checkPersonName, peopleUsage, stderr) {
		return exitUsage
	}
	cfg, code := loadConfig(command{}, nil, stdout, stderr)
	if cfg == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentsLockWait)
	defer cancel()
	people, closePeople, err := openPeople(ctx, cfg)
	if err != nil {
		return storeFailed(stderr, "people "+rest[0], err)
	}
	defer closePeople()
	switch rest[0] {
	case "issue-token":
		token, err := rpc.NewToken()
		if err == nil {
			err = people.Issue(ctx, rest[1], token)
		}
		if err != nil {
			return storeFailed(stderr, "people "+rest[0], err)
		}
		fmt.Fprintln(stdout, token)
	case "revoke":
		revoked, err := people.Revoke(ctx, rest[1])
		if err != nil {
			return storeFailed(stderr, "people "+rest[0], err)
		}
		if !revoked {
			fmt.Fprintf(stdout, "%s had no token\n", rest[1])
			break
		}
		fmt.Fprintf(stdout, "revoked %s's token; a connection holding it loses the host role at its next host-role call\n", rest[1])
	default:
		list, err := people.List(ctx)
		if err != nil {
			return storeFailed(stderr, "people "+rest[0], err)
		}
		if *asJSON {
			b, _ := json.Marshal(map[string]any{"people": list})
			fmt.Fprintln(stdout, string(b))
			break
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PERSON\tISSUED")
		for _, p := range list {
			fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.IssuedAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
	}
	return exitOK
}

// checkPersonName refuses a name a person could not read on a decision,
// and the name the daemon's own host token goes by.
func checkPersonName(name string) error {
	if err := runs.CheckID("NAME", name); err != nil {
		return err
	}
	if name == rpc.OperatorName {
		return errors.New("NAME operator is the daemon's own host token (the host-token file); pick another name")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '@') {
			return fmt.Errorf("NAME %q may hold letters, digits and . _ - @ only (it is shown on every decision the person makes)", name)
		}
	}
	return nil
}

// openPeople opens where the people's token hashes are kept: the people
// token file, or the shared database when the store is postgres.
func openPeople(ctx context.Context, cfg *config.Config) (store.People, func(), error) {
	if cfg.Store != config.StorePostgres {
		return file.PeopleFile(cfg.PeoplePath), func() {}, nil
	}
	return postgres.OpenPeople(ctx, postgresConfig(cfg, "", nil))
}
