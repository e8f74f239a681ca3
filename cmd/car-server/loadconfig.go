package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parslee-ai/car-server/config"
)

// A command is what loadConfig needs to know of the one reading the
// daemon's settings; the zero value is the daemon itself.
type command struct {
	// name starts every fault it prints: "car-server migrate". Empty is
	// "car-server".
	name string
	// help is printed to stdout on --help. Empty: the daemon's own flags,
	// which config.Load prints (to stdout, as it does for a flag it does
	// not know).
	help string
	// faultHelp is printed to stderr after a fault, to show the right form.
	faultHelp string
}

// loadConfig reads the daemon's settings for a command: the flags in args
// (nil for a command that passes none on), the CAR_* environment and the
// config file, with the default state root under the user's home. The
// daemon and every operator command read them here, so a command finds the
// socket, the tokens and the stores where the daemon it talks to put them.
//
// When the command must stop, cfg is nil and code is its exit code: exitOK
// after --help, exitUsage after a fault, printed to stderr.
func loadConfig(cmd command, args []string, stdout, stderr io.Writer) (cfg *config.Config, code int) {
	name := cmd.name
	if name == "" {
		name = "car-server"
	}
	flagsOut := io.Discard
	if cmd.help == "" {
		flagsOut = stdout
	}
	home, _ := os.UserHomeDir()
	cfg, err := config.Load(args, home, flagsOut)
	switch {
	case errors.Is(err, config.ErrHelp):
		if cmd.help != "" {
			fmt.Fprintln(stdout, cmd.help)
		}
		return nil, exitOK
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		if cmd.faultHelp != "" {
			fmt.Fprintln(stderr, cmd.faultHelp)
		}
		return nil, exitUsage
	}
	return cfg, exitOK
}
