# car-server — the Common Agent Runtime daemon.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: run build test bench vet clean

## run: start the daemon on the embedded defaults (127.0.0.1:9100, state in ~/.car)
run:
	$(GO) run ./cmd/car-server

## build: a static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/car-server ./cmd/car-server

## test: vet, then every test with the race detector
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## bench: the go test benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
