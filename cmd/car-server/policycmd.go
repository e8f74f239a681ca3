package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/parslee-ai/car-server/internal/policy"
)

// runPolicyCommand serves "car-server policy check [DIR]": it validates an
// operator policy directory offline (default $CAR_HOME/policies) and exits 0
// when the daemon would accept it (a missing directory included), 1 naming the file and the fault when not,
// 2 on a usage error.
func runPolicyCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" || len(args) > 2 {
		fmt.Fprintln(stderr, "usage: car-server policy check [DIR]   (DIR defaults to $CAR_HOME/policies)")
		return 2
	}
	dir := ""
	if len(args) == 2 {
		dir = args[1]
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
