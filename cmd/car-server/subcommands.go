package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/protocol"
)

// subcommand is one of car-server's commands besides the daemon itself.
type subcommand struct {
	summary string // one line for car-server help
	usage   string // what --help prints
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// subcommands are car-server's commands; each answers --help (or -h, or
// car-server help NAME) with its usage on stdout and exit 0, and a usage
// error with its usage on stderr and exit 2.
var subcommands = map[string]subcommand{
	"policy": {"check an operator policy directory offline", policyUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runPolicyCommand(a, o, e) }},
	"journal": {"verify or compact a journal file offline", journalUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runJournalCommand(a, o, e) }},
	"audit": {"verify, export and sign-check the durable event log offline", auditUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runAuditCommand(a, o, e) }},
	"migrate": {"show or apply the PostgreSQL schema migrations", migrateUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runMigrateCommand(a, o, e) }},
	"agents": {"issue, revoke and list the agents' own tokens", agentsUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runAgentsCommand(a, o, e) }},
	"people": {"issue, revoke and list the people's own host-role tokens", peopleUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runPeopleCommand(a, o, e) }},
	"dashboard": {"print (or open) the dashboard's link", dashboardUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runDashboardCommand(a, o, e) }},
	"status": {"the running daemon's version, uptime, connections and store", statusUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runOpsCommand("status", a, o, e) }},
	"policies": {"the operator policies in force", policiesUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runOpsCommand("policies", a, o, e) }},
	"approvals": {"list, watch and decide approvals", approvalsUsage,
		func(a []string, _ io.Reader, o, e io.Writer) int { return runOpsCommand("approvals", a, o, e) }},
	"call": {"send one JSON-RPC request to the running daemon", callUsage, runCallCommand},
	"mcp": {"a stdio MCP server in front of the running daemon's MCP endpoint", mcpUsage,
		func(a []string, _ io.Reader, _, e io.Writer) int { return runMCPCommand(a, os.Stdin, os.Stdout, e) }},
}

// wantsHelp reports whether args ask for help: -h or --help before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
}

// runSubcommand runs args[0] when it names a subcommand (or is help);
// handled is false for the daemon's own command line.
func runSubcommand(args []string) (code int, handled bool) {
	if len(args) == 0 {
		return 0, false
	}
	if args[0] == "help" {
		return runHelp(args[1:], os.Stdout, os.Stderr), true
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		return 0, false
	}
	if wantsHelp(args[1:]) {
		fmt.Fprintln(os.Stdout, sc.usage)
		return exitOK, true
	}
	return sc.run(args[1:], os.Stdin, os.Stdout, os.Stderr), true
}

// runHelp serves "car-server help [COMMAND]".
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, commandList())
		return exitOK
	case len(args) == 1:
		if sc, ok := subcommands[args[0]]; ok {
			fmt.Fprintln(stdout, sc.usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "car-server help: no command %q\n%s", args[0], commandList())
		return exitUsage
	}
	fmt.Fprintf(stderr, "usage: car-server help [COMMAND]\n%s", commandList())
	return exitUsage
}

// commandList is the commands, one line each.
func commandList() string {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: car-server [FLAGS]            run the daemon (car-server --help lists every flag)\n")
	b.WriteString("       car-server COMMAND [ARGS]     run a command (car-server help COMMAND, or COMMAND --help)\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, subcommands[n].summary)
	}
	return b.String()
}

// cliCommands name the commands that do what a method does, so an error
// the daemon words for a client points a person at the command instead.
var cliCommands = []struct{ method, command string }{
	{protocol.MethodHostResolveApproval, "car-server approvals approve|reject ID"},
	{protocol.MethodHostApprovals, "car-server approvals watch"},
	{protocol.MethodApprovalsList, "car-server approvals list"},
	{protocol.MethodPermissionApprove, "car-server approvals approve FINGERPRINT --tier TIER"},
	{protocol.MethodPermissionReject, "car-server approvals reject FINGERPRINT --tier TIER"},
	{protocol.MethodServerStatus, "car-server status"},
	{protocol.MethodPolicyList, "car-server policies"},
}

// daemonError is what a command prints of an error from the daemon: the
// daemon's message, without the client library's framing, with methods
// that have a command named as that command.
func daemonError(err error) string {
	var rerr *jsonrpc2.Error
	if !errors.As(err, &rerr) {
		return err.Error()
	}
	msg := rerr.Message
	for _, c := range cliCommands {
		msg = replaceWord(msg, c.method, c.command)
	}
	return msg
}

// replaceWord replaces each whole occurrence of word (not part of a longer
// dotted name) in s.
func replaceWord(s, word, with string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, word)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(word)
		whole := (i == 0 || !nameByte(s[i-1])) && (end == len(s) || !nameByte(s[end]) || s[end] == '.' && (end+1 == len(s) || !nameByte(s[end+1])))
		b.WriteString(s[:i])
		if whole {
			b.WriteString(with)
		} else {
			b.WriteString(word)
		}
		s = s[end:]
	}
}

func nameByte(c byte) bool {
	return c == '_' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
