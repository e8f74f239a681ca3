package runs

import (
	"fmt"
	"strings"
)

// maxIDBytes bounds an agent or run id, so that its encoded form (at most
// three bytes per byte) stays a legal file name.
const maxIDBytes = 80

// encodeID is the file-name form of an id: a-z, 0-9, '-' and '_' pass
// through and every other byte (a path separator, '.', an uppercase letter)
// becomes '%' and two lowercase hex digits, so an id can never name a path
// outside its directory, and two ids never share a file on a case-folding
// file system.
func encodeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02x", c)
	}
	return b.String()
}

// CheckID refuses an id that cannot key a run or an agent.
func CheckID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%s is empty", what)
	case len(id) > maxIDBytes:
		return fmt.Errorf("%s is %d bytes; at most %d are accepted", what, len(id), maxIDBytes)
	}
	return nil
}
