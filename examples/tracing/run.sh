#!/bin/sh
# One command: Jaeger, the daemon with tracing on, the traced agent, and the
# link to its trace. Ctrl-C stops Jaeger and the daemon.
#   sh examples/tracing/run.sh
set -eu
cd "$(dirname "$0")/../.."
jaeger=$(command -v jaeger || echo "$(go env GOPATH | cut -d: -f1)/bin/jaeger")
if [ ! -x "$jaeger" ]; then
	echo "needs Jaeger: (cd tools/jaeger && go install github.com/jaegertracing/jaeger/cmd/jaeger)" >&2
	exit 1
fi
[ -d examples/tracing/node_modules ] || (cd examples/tracing && npm ci --no-audit --no-fund)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT INT TERM
go build -o "$work/car-server" ./cmd/car-server

"$jaeger" --config "file:examples/tracing/jaeger.yaml" >"$work/jaeger.log" 2>&1 &
until curl -fsS -o /dev/null http://127.0.0.1:16686/api/v3/services 2>/dev/null; do sleep 0.2; done

export CAR_HOME="$work/home" OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
CAR_OTEL_TRACE_URL='http://127.0.0.1:16686/trace/{trace_id}' "$work/car-server" --port 9100 2>"$work/car-server.log" &
until [ -s "$CAR_HOME/ai.parslee.car/auth-token" ]; do sleep 0.2; done

CAR_URL=ws://127.0.0.1:9100/ node examples/tracing/agent.mjs >"$work/agent.out"
cat "$work/agent.out"
trace=$(sed -n 's/^trace //p' "$work/agent.out")
echo "the trace:      http://127.0.0.1:16686/trace/$trace (with a Jaeger built with its UI)"
echo "its spans:      curl -s http://127.0.0.1:16686/api/v3/traces/$trace"
echo "the dashboard:  $work/car-server dashboard --home $CAR_HOME --port 9100 (the proposal links to the trace)"
echo "Ctrl-C to stop"
wait
