package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/parslee-ai/car-server/internal/policy"
)

const policyUsage = `usage: car-server policy check [DIR]

Checks an operator policy directory offline, as the daemon would load it:
DIR, or $CAR_HOME/policies. Exit 0 when the daemon would accept it (the
default directory may be missing: the daemon starts without it), 1 naming
the file and the fault when not (a DIR given that does not exist included),
2 on a usage error.`

// runPolicyCommand serves "car-server policy check [DIR]".
func runPolicyCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" || len(args) > 2 || len(args) == 2 && strings.HasPrefix(args[1], "-") {
		fmt.Fprintln(stderr, policyUsage)
		return exitUsage
	}
	dir := ""
	if len(args) == 2 {
		dir = args[1]
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "car-server policy check: %s does not exist\n", dir)
			return exitFailed
		}
	} else {
		cfg, code := loadConfig(command{}, nil, stdout, stderr)
		if cfg == nil {
			return code
		}
		dir = cfg.PoliciesDir
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// The daemon starts fine without the directory: nothing to refuse.
		fmt.Fprintf(stdout, "ok: no policy files (%s does not exist)\n", dir)
		return 0
	}
	if err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "car-server: %s is not a directory\n", dir)
		return 1
	}
	e, files, err := policy.LoadDir(dir)
	if err != nil {
		fmt.Fprintln(stderr, "car-server:", err)
		return 1
	}
	abs, _ := filepath.Abs(dir)
	fmt.Fprintf(stdout, "ok: %d rules from %d files in %s\n", e.Len(), files, abs)
	for _, p := range e.List() {
		fmt.Fprintf(stdout, "  %s\n", p.Name)
	}
	return 0
}
