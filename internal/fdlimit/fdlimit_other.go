//go:build !linux && !darwin

package fdlimit

import (
	"fmt"
	"runtime"
)

// Raise is not implemented here: the limit is left as it is.
func Raise() (Limit, error) {
	return Limit{}, fmt.Errorf("raising the open-file limit is not implemented on %s; it stays as the system set it", runtime.GOOS)
}
