package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/rpc"
)

// startPprof serves Go's profiler on addr (a loopback host:port the
// configuration has checked) until the returned stop is called. It is off
// unless the pprof setting names an address: profiles show the daemon's
// memory, so they are never served beside the WebSocket endpoint. Requests
// pass the same Host check as the daemon's listeners (allowed: the
// allowed_hosts setting), and there is no cmdline endpoint: the command
// line is not the profiler's to show.
func startPprof(addr string, allowed []string, log *zap.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the profiler on %s: %w (pick another address with --pprof, or leave it empty)", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: rpc.GuardHost(l, allowed, log.Named("pprof"), mux), ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(log.Named("pprof"))}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("profiler stopped", zap.Error(err))
		}
	}()
	// Contention is sampled only while the profiler is on: one lock wait in
	// 100, and blocking of 100 µs or more.
	runtime.SetMutexProfileFraction(100)
	runtime.SetBlockProfileRate(int((100 * time.Microsecond).Nanoseconds()))
	log.Warn("profiler on: /debug/pprof/ is served on loopback; turn it off when done", zap.String("addr", l.Addr().String()))
	return func() {
		// A CPU profile or trace in progress is cut short: shutdown does not wait.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			_ = hs.Close()
		}
		<-done
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}, nil
}
