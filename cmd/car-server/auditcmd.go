package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres"
	"github.com/parslee-ai/car-server/protocol"
)

const auditUsage = `usage:
  car-server audit verify [--home DIR] [--witness FILE] [--pubkey FILE]
        check the durable event log offline: every segment, every event's hash
        and link, every signed head and retention record, that the log still
        holds the newest signed head ($CAR_HOME/events/head.json) and, with
        --witness, every head a witness kept (audit.head events, one JSON per
        line). Exit 0: it holds; 1: the first failure and what it means.
  car-server audit verify --store URL
        check the shared PostgreSQL event log (store: postgres) at URL: each
        daemon's chain, every event's hash and link. Exit 0: every chain
        holds; 1: the first daemon whose chain breaks, and where; 3: the
        database cannot be reached.
  car-server audit pubkey [--home DIR]
        print the public key the heads are signed with (PEM); give it to a
        witness, and to audit verify --pubkey on another machine
  car-server audit export (--since T [--until T] | --proposal ID) [--format jsonl|cloudevents] [--home DIR]
        write the events from T (inclusive) to T (exclusive) to stdout, as the
        engine's JSON one per line, or as CloudEvents 1.0; T is RFC 3339 or a
        duration before now (24h). --proposal keeps one proposal's story:
        received, gated, who approved what and when, each use of an approval,
        dispatched, its results, what was rolled back, finished`

// runAuditCommand serves audit verify, pubkey and export.
func runAuditCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("audit", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	home := fs.String("home", "", "the daemon's state root ($CAR_HOME)")
	witness := fs.String("witness", "", "a file of heads a witness kept")
	pubkey := fs.String("pubkey", "", "the public key to verify with (default: the one of --home's audit key)")
	since := fs.String("since", "", "export from this time")
	until := fs.String("until", "", "export until this time")
	format := fs.String("format", "jsonl", "jsonl or cloudevents")
	proposal := fs.String("proposal", "", "export only this proposal's events")
	storeURL := fs.String("store", "", "verify the shared PostgreSQL event log at this URL")
	if err := fs.Parse(args); err != nil || len(fs.Args()) != 1 {
		if err == nil {
			err = errors.New("name one of verify, pubkey, export")
		}
		fmt.Fprintf(stderr, "car-server audit: %v\n%s\n", err, auditUsage)
		return exitUsage
	}
	if *storeURL != "" {
		if fs.Args()[0] != "verify" || *home != "" || *witness != "" || *pubkey != "" {
			fmt.Fprintf(stderr, "car-server audit: --store goes with verify alone (the shared log has no files, no signed heads to witness)\n%s\n", auditUsage)
			return exitUsage
		}
		return verifyStore(*storeURL, stdout, stderr)
	}
	if *home == "" {
		cfg, code := loadConfig(command{name: "car-server audit", help: auditUsage, faultHelp: auditUsage}, nil, stdout, stderr)
		if cfg == nil {
			return code
		}
		*home = cfg.Home
	}
	dir, keyPath := filepath.Join(*home, "events"), filepath.Join(*home, "audit-key")
	fail := func(err error) int {
		fmt.Fprintln(stderr, "car-server audit:", err)
		return 1
	}
	switch fs.Args()[0] {
	case "pubkey":
		key, err := auditlog.LoadKey(keyPath)
		if err != nil {
			return fail(err)
		}
		stdout.Write(auditlog.PublicKeyPEM(key))
		return 0
	case "verify":
		pub, err := verifyKey(keyPath, *pubkey)
		if err != nil {
			return fail(err)
		}
		o := auditlog.VerifyOptions{Dir: dir, Public: pub, CheckEvent: rpc.CheckEventLine}
		if *witness != "" {
			if o.Witness, err = auditlog.ReadWitness(*witness); err != nil {
				return fail(err)
			}
		}
		rep, err := auditlog.Verify(o)
		sum := sha256.Sum256(pub)
		fmt.Fprintf(stdout, "key SHA256:%s\n", base64.RawStdEncoding.EncodeToString(sum[:]))
		printVerify(stdout, dir, &rep, len(o.Witness))
		if err != nil {
			fmt.Fprintln(stdout, "FAILED:", err)
			return 1
		}
		fmt.Fprintln(stdout, "ok: the log holds")
		return 0
	case "export":
		if *since == "" && *proposal == "" {
			fmt.Fprintf(stderr, "car-server audit export: --since or --proposal is required\n%s\n", auditUsage)
			return exitUsage
		}
		var from time.Time
		var err error
		if *since != "" {
			if from, err = parseWhen(*since); err != nil {
				return fail(fmt.Errorf("--since: %w", err))
			}
		}
		var to time.Time
		if *until != "" {
			if to, err = parseWhen(*until); err != nil {
				return fail(fmt.Errorf("--until: %w", err))
			}
		}
		if *format != "jsonl" && *format != "cloudevents" {
			fmt.Fprintf(stderr, "car-server audit export: --format must be jsonl or cloudevents, got %q\n", *format)
			return exitUsage
		}
		if err := exportEvents(stdout, dir, exportFilter{from: from, to: to, proposal: *proposal}, *format); err != nil {
			return fail(err)
		}
		return 0
	}
	fmt.Fprintf(stderr, "car-server audit: unknown command %q\n%s\n", fs.Args()[0], auditUsage)
	return exitUsage
}

// storeVerifyWait bounds audit verify --store: connecting, and reading the
// whole log a page at a time.
const storeVerifyWait = 30 * time.Minute

// verifyStore checks every daemon's chain in the shared PostgreSQL event
// log at url, and says what it checked.
func verifyStore(url string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), storeVerifyWait)
	defer cancel()
	read, closeRead, err := postgres.OpenEventReader(ctx, postgres.Config{URL: url})
	if err != nil {
		fmt.Fprintln(stderr, "car-server audit verify --store:", err)
		if errors.Is(err, store.ErrUnavailable) {
			return exitUnreachable
		}
		return exitFailed
	}
	defer closeRead()
	rep, err := engine.VerifyChains(ctx, read, false)
	if err != nil {
		fmt.Fprintln(stderr, "car-server audit verify --store:", err)
		if errors.Is(err, store.ErrUnavailable) {
			return exitUnreachable
		}
		return exitFailed
	}
	events := 0
	for _, n := range rep.Nodes {
		events += n.Verified
		if n.Tampered != nil {
			events++
		}
	}
	fmt.Fprintf(stdout, "store: %d events in the chains of %d daemons\n", events, len(rep.Nodes))
	var broken *protocol.NodeChain
	for i, n := range rep.Nodes {
		if n.Tampered != nil {
			fmt.Fprintf(stdout, "daemon %s: %d events hold, then its chain breaks at seq %d\n", n.Node, n.Verified, *n.Tampered)
			if broken == nil {
				broken = &rep.Nodes[i]
			}
			continue
		}
		fmt.Fprintf(stdout, "daemon %s: %d events, every hash and link holds\n", n.Node, n.Verified)
	}
	fmt.Fprintln(stdout, "the shared log has no signed heads: the newest events of a daemon's chain can be cut off undetected")
	if broken != nil {
		fmt.Fprintf(stdout, "FAILED: daemon %s's event seq %d does not hold: its body does not hash to its hash, its columns disagree with its body, or it does not link to the event before it (an event edited, deleted, reordered, or refused by the database when written)\n", broken.Node, *broken.Tampered)
		return exitFailed
	}
	fmt.Fprintln(stdout, "ok: every chain holds")
	return exitOK
}

// verifyKey is the key heads must be signed with: the one in pubkeyPath
// when given, else the public half of the daemon's key.
func verifyKey(keyPath, pubkeyPath string) (ed25519.PublicKey, error) {
	if pubkeyPath != "" {
		b, err := os.ReadFile(pubkeyPath)
		if err != nil {
			return nil, err
		}
		pub, err := auditlog.ParsePublicKeyPEM(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pubkeyPath, err)
		}
		return pub, nil
	}
	key, err := auditlog.LoadKey(keyPath)
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}

// printVerify says what Verify checked.
func printVerify(w io.Writer, dir string, rep *auditlog.Report, witnessed int) {
	fmt.Fprintf(w, "%s: %d segments, %d events (seq %d to %d), %d signed heads, %d retention records\n",
		dir, rep.Segments, rep.Events, rep.FirstSeq, rep.LastSeq, rep.Heads, rep.Retentions)
	if rep.HeadFile != nil {
		fmt.Fprintf(w, "newest signed head: event %d at %s\n", rep.HeadFile.Seq, rep.HeadFile.Time.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "no signed head yet: a truncation of the log cannot be detected")
	}
	if witnessed > 0 {
		fmt.Fprintf(w, "witness: %d heads found in the log, %d older than its first event (retained away)\n", rep.Witnessed, rep.Retained)
	}
	if rep.TornTail != "" {
		fmt.Fprintf(w, "%s ends in a torn line (crash residue of an unanswered write); the daemon cuts it off at start\n", rep.TornTail)
	}
}

// parseWhen reads a time: RFC 3339, or a duration before now.
func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration before now (24h)", s)
	}
	return time.Now().Add(-d), nil
}

// exportFilter is which events audit export writes: those in [from, to)
// (a zero to: no end), of proposal when it is set.
type exportFilter struct {
	from, to time.Time
	proposal string
}

func (f exportFilter) keeps(l auditlog.Line) bool {
	return !l.At.Before(f.from) && (f.to.IsZero() || l.At.Before(f.to)) && (f.proposal == "" || l.ProposalID == f.proposal)
}

// exportEvents writes the events of dir's segments that f keeps to w.
func exportEvents(w io.Writer, dir string, f exportFilter, format string) error {
	names, err := auditlog.Segments(dir)
	if err != nil {
		return fmt.Errorf("list the segments of %s: %w", dir, err)
	}
	out := bufio.NewWriter(w)
	for _, name := range names {
		var werr error
		err := auditlog.ScanSegment(filepath.Join(dir, name), 0, func(_ int64, _ int, b []byte) bool {
			l, err := auditlog.ParseLine(b)
			if err != nil || l.Op != auditlog.OpEvent || !f.keeps(l) {
				return true
			}
			if format == "jsonl" {
				out.Write(l.Body)
				werr = out.WriteByte('\n')
				return werr == nil
			}
			ce, err := json.Marshal(cloudEvent{SpecVersion: "1.0", ID: fmt.Sprintf("%s-%d", l.Node, l.Seq), Source: "car-server/" + l.Node,
				Type: "car." + l.Kind, Time: l.At, Subject: l.ProposalID, DataContentType: "application/json", Data: l.Body})
			if err != nil {
				werr = err
				return false
			}
			out.Write(ce)
			werr = out.WriteByte('\n')
			return werr == nil
		})
		if werr != nil {
			return werr
		}
		if err != nil && !errors.Is(err, auditlog.ErrTorn) {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	return out.Flush()
}

// cloudEvent is one event as CloudEvents 1.0 JSON.
type cloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            time.Time       `json:"time"`
	Subject         string          `json:"subject,omitempty"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}
