package main

import (
	"context"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/tracing"
)

// tracingFlushTimeout bounds what shutdown waits for the last spans: an
// unreachable collector costs the stop no more than this.
const tracingFlushTimeout = 5 * time.Second

// openTracing builds the trace pipeline the settings describe; off (a
// Provider whose Tracer is nil) without an endpoint.
func openTracing(ctx context.Context, cfg *config.Config, node string, log *zap.Logger) (*tracing.Provider, error) {
	p, err := tracing.New(ctx, cfg.Tracing, tracing.Resource{Version: version, NodeID: node, Home: cfg.Home}, log)
	if err != nil {
		return nil, err
	}
	if cfg.Tracing.Enabled() {
		endpoint := cfg.Tracing.TracesEndpoint
		if endpoint == "" {
			endpoint = cfg.Tracing.Endpoint
		}
		protocol := cfg.Tracing.Protocol
		if protocol == "" {
			protocol = tracing.DefaultProtocol
		}
		if u, err := url.Parse(endpoint); err == nil {
			endpoint = u.Redacted() // a password in the URL is not logged
		}
		log.Info("tracing on: spans are exported over OTLP", zap.String("endpoint", endpoint), zap.String("protocol", protocol))
	}
	return p, nil
}

// closeTracing exports the spans still queued, within tracingFlushTimeout.
func closeTracing(p *tracing.Provider, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("the last trace spans were not all exported", zap.Error(err), zap.Int64("dropped", p.Dropped()))
	}
}
