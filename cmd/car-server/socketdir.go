package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// prepareSocketDir makes dir ready to hold the daemon's Unix socket without
// changing a directory the daemon did not create. A missing dir is created
// 0700, with any missing parents. An existing one must be a directory of
// the daemon's user that neither its group nor others may write to:
// anyone else who can write there could replace the socket, or reach it
// before its mode is set. Any other is refused, and left as it is.
func prepareSocketDir(dir string) error {
	err := os.MkdirAll(filepath.Dir(dir), 0o700)
	if err == nil {
		// Mkdir, not MkdirAll: it says whether this call created dir. The
		// umask only takes bits away, so the mode is 0700 or narrower.
		err = os.Mkdir(dir, 0o700)
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the socket's directory %s: %w (pick another path with --socket, or turn the socket off with --socket off)", dir, err)
	}
	return checkSocketDir(dir)
}

// checkSocketDir refuses an existing socket directory that is not the
// daemon user's alone.
func checkSocketDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("the socket's directory %s: %w", dir, err)
	}
	const fix = "put the socket in a directory of your own (--socket DIR/car-server.sock, where DIR is yours with mode 0700 or does not exist yet, and the daemon creates it 0700), or turn it off with --socket off"
	if !st.IsDir() {
		return fmt.Errorf("the socket's directory %s is not a directory; %s", dir, fix)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("the socket's directory %s belongs to uid %d, not to this daemon's user (uid %d), so the daemon does not use it; %s", dir, sys.Uid, os.Geteuid(), fix)
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("the socket's directory %s is writable by its group or others (mode %04o), so the daemon does not use it (and does not change it); %s", dir, perm, fix)
	}
	return nil
}
