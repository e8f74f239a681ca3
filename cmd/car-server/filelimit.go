package main

import (
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/fdlimit"
)

// fileReserve is what the daemon keeps open besides its connections:
// listeners, journals and ledgers, run traces being written, checkpoints,
// the poller, the standard streams.
const fileReserve = 256

// raiseFileLimit raises the daemon's soft limit on open files to the hard
// limit and logs what it got; it warns when that is below what
// max_connections needs, one descriptor each plus fileReserve. Past the
// limit the listener cannot accept: new connections wait in the kernel's
// backlog (the server retries) until others close.
func raiseFileLimit(log *zap.Logger, maxConnections int) {
	need := uint64(maxConnections) + fileReserve
	lim, err := fdlimit.Raise()
	if err != nil {
		log.Warn("could not raise the open-file limit", zap.Error(err), zap.Uint64("max_connections_needs", need))
		if lim.Soft == 0 {
			return
		}
	}
	log.Info("open-file limit", zap.Uint64("soft", lim.Soft), zap.Uint64("hard", lim.Hard), zap.Uint64("max_connections_needs", need))
	if lim.Soft < need {
		log.Warn("the open-file limit is below what max_connections needs: connections past it wait to be accepted; raise the hard limit (as root: ulimit -Hn or limits.conf; LimitNOFILE= in a systemd unit; kern.maxfilesperproc on macOS) or lower max_connections",
			zap.Uint64("limit", lim.Soft), zap.Uint64("max_connections_needs", need), zap.Int("max_connections", maxConnections))
	}
}
