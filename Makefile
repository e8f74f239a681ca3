# car-server — the Common Agent Runtime daemon.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: run build test check bench bench-peers load fuzz crashtest clean openrpc ts-types

## run: build, then replace make with the daemon on the embedded defaults
## (127.0.0.1:9100, state in ~/.car), so that Ctrl-C stops it cleanly
run: build
	exec ./bin/car-server

## build: a static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/car-server ./cmd/car-server

## test: vet, then every test with the race detector (the process tests in
## cmd/car-server build the daemon with it too)
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

CRASH_CUTS ?= 300
CRASH_KILLS ?= 1000

## crashtest: the crash soaks, not part of test. The SIGKILL tests, under
## journal_sync full and proposal, with CRASH_KILLS kills each (test runs
## them with 12); then the power-loss test, under both modes: the daemon on
## a FUSE file system that keeps only what was made durable, the power cut
## CRASH_CUTS times at seeded random points (the seed is logged; replay with
## CAR_CRASH_SEED=<seed>). Needs /dev/fuse and fusermount3 (Debian fuse3).
crashtest:
	CAR_CRASH_KILLS=$(CRASH_KILLS) $(GO) test -count=1 -timeout 60m -run '^TestCrash(JournalSyncProposal)?NeverRepeatsAnAcknowledgedIdempotentCall$$' -v ./cmd/car-server/
	CAR_CRASH_CUTS=$(CRASH_CUTS) $(GO) test -tags crashtest -count=1 -timeout 60m -run '^TestPowerLoss' -v ./cmd/car-server/

STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

## check: the static checks CI runs; any finding fails
check:
	$(GO) mod tidy -diff
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@$(STATICCHECK) -version 2>/dev/null | grep -qF "($(STATICCHECK_VERSION:v%=%))" || \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(STATICCHECK) ./...

FUZZTIME ?= 30s
FUZZ_TARGETS := \
	./internal/rpc:FuzzCheckFrame \
	./internal/wsstream:FuzzDecodeMessage \
	./internal/jsonvalue:FuzzAppend \
	./internal/jsonvalue:FuzzValid \
	./internal/jsonvalue:FuzzMembers \
	./protocol:FuzzParseValue \
	./protocol:FuzzFastProposalDecode \
	./protocol:FuzzResultDecode \
	./protocol:FuzzDecodeValue \
	./protocol:FuzzDecodeProposal \
	./internal/engine:FuzzGraph \
	./internal/engine:FuzzInterpolate \
	./internal/engine:FuzzSchemaCost \
	./internal/policy:FuzzLoadFile \
	./internal/policy:FuzzClassify \
	./internal/journal:FuzzOpen \
	./internal/journal:FuzzHeader \
	./internal/messaging:FuzzParseParams

## fuzz: each fuzz target for FUZZTIME, one after another (make fuzz FUZZTIME=5m);
## a failing input lands in the package's testdata/fuzz/ and then runs in make test
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## openrpc: regenerate openrpc.json from the method tables in protocol/
## (a test fails while the checked-in file is stale)
openrpc:
	$(GO) run ./internal/openrpc/gen > openrpc.json.tmp && mv openrpc.json.tmp openrpc.json

## ts-types: regenerate the TypeScript example's types from openrpc.json
ts-types:
	cd examples/typescript && npm ci --no-audit --no-fund && npm run types

## bench: the go test benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-peers: a durable step beside DBOS and Temporal, in one run, interleaved rounds (opt-in; bench/peers is a module of its own and builds the Temporal peer, bench/peers/temporal, with GOTOOLCHAIN=go1.27.3; PostgreSQL rows with CAR_TEST_POSTGRES_URL; see BENCHMARKS.md)
bench-peers: build
	CGO_ENABLED=0 $(GO) build -o bin/car-bench ./cmd/car-bench
	cd bench/peers && $(GO) run . --car-bench ../../bin/car-bench --car-server ../../bin/car-server --rounds 5 --chains 4 --steps 100

## load: the load tool against a daemon it starts and stops itself (see BENCHMARKS.md)
load: build
	$(GO) run ./cmd/car-bench --spawn ./bin/car-server --connections 1 --proposals 20 --actions 1000 --baseline 2000
	$(GO) run ./cmd/car-bench --spawn ./bin/car-server --connections 1000 --proposals 5 --actions 5 --baseline 5
	$(GO) run ./cmd/car-bench --spawn ./bin/car-server --connections 1 --proposals 1 --actions 1 --baseline 10 --idle 10000
	$(GO) run ./cmd/car-bench --spawn ./bin/car-server --connections 10000 --proposals 3 --actions 3 --baseline 3
	$(GO) run ./cmd/car-bench --spawn ./bin/car-server --chain 300 --proposals 10 --baseline 3000
	$(GO) run ./cmd/car-bench --spawn ./bin/car-server --durable-chain 100 --proposals 20 --baseline 2000 --fsync-probes 400
	@if [ -n "$$CAR_TEST_POSTGRES_URL" ]; then \
		$(GO) run ./cmd/car-bench --spawn ./bin/car-server --store postgres --postgres-url "$$CAR_TEST_POSTGRES_URL" --durable-chain 100 --proposals 20 --baseline 2000 --fsync-probes 400; \
	else echo "load: CAR_TEST_POSTGRES_URL is not set, so the durable chain on the PostgreSQL store is not run"; fi

clean:
	rm -rf bin
