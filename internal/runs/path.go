package runs

import "fmt"

// maxIDBytes bounds an agent or run id, so that the file store's encoded
// form of it (at most three bytes per byte) stays a legal file name.
const maxIDBytes = 80

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
