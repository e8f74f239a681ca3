package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrSymlink is the refusal of a symbolic link at the path of one of the
// daemon's files: whoever planted it would have the daemon write, or read,
// where it points.
var ErrSymlink = errors.New("is a symbolic link, which the daemon does not follow at the path of its own files; remove the link (put the real file there, or let the daemon create it)")

// OpenFile is os.OpenFile, except that a symbolic link at path (the last
// element; its directories may be links) is refused with ErrSymlink, naming
// the path. Where the system has O_NOFOLLOW the open itself refuses it.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	if noFollow == 0 {
		if err := refuseSymlink(path); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, flag|noFollow, perm)
	if err != nil {
		if lerr := refuseSymlink(path); lerr != nil {
			return nil, lerr
		}
		return nil, err
	}
	return f, nil
}

// ReadFile is os.ReadFile with OpenFile's refusal of a symbolic link.
func ReadFile(path string) ([]byte, error) {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// refuseSymlink returns ErrSymlink, naming path, when path is a symbolic
// link, and nil otherwise (a missing path included).
func refuseSymlink(path string) error {
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s %w", path, ErrSymlink)
	}
	return nil
}
