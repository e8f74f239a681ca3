#!/usr/bin/env bash
# Drive car-server from the shell: state.set / state.get, then verify a
# proposal file. Needs a running daemon (make run) and jq.
#   examples/shell/demo.sh
# CAR_SERVER names the binary (default bin/car-server, from make build);
# CAR_HOME names the daemon's state root, as for the daemon.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
car="${CAR_SERVER:-bin/car-server}"

"$car" call state.set '{"key":"greeting","value":{"text":"hello from bash"}}' >/dev/null
text="$("$car" call state.get '{"key":"greeting"}' | jq -r .text)"
echo "state.get greeting: $text"

# verify takes {proposal}; jq wraps the proposal file.
report="$(jq '{proposal: .}' "$here/proposal.json" | "$car" call verify -)"
echo "verify valid: $(jq .valid <<<"$report")"
echo "verify levels: $(jq -c .execution_levels <<<"$report")"
