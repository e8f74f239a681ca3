package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/rpc"
)

// Every request to /mcp carries Authorization: Bearer <token>: the
// daemon's token (a plain client) or an agent's token (that agent, named by
// the token alone). It is read on every request, so a revoked token is
// refused at its next request; the SDK keeps each session to the principal
// that opened it (TokenInfo.UserID), so another principal's token cannot
// ride a session it did not open.

// authenticate reads r's bearer token; on a refusal it has answered 401
// with WWW-Authenticate and a body that says where the token is.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (rpc.MCPPrincipal, bool) {
	token, present := bearer(r)
	if present || r.Header.Get("Authorization") == "" {
		p, err := s.opts.Gateway.AuthenticateMCP(r.Context(), token)
		if err == nil {
			return p, true
		}
		if !errors.Is(err, rpc.ErrMCPUnauthorized) {
			s.log.Error("MCP request refused: the token could not be checked", zap.Error(err))
			http.Error(w, "car-server: the token could not be checked: "+err.Error(), http.StatusServiceUnavailable)
			return rpc.MCPPrincipal{}, false
		}
	}
	s.log.Warn("MCP request refused: no valid bearer token", zap.String("remote", r.RemoteAddr), zap.Bool("token_sent", present))
	w.Header().Set("WWW-Authenticate", `Bearer realm="car-server", error="invalid_token", error_description="send Authorization: Bearer <token>"`)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	what := "no bearer token"
	if present {
		what = "the bearer token is not this daemon's token nor an agent's current token"
	}
	_, _ = fmt.Fprintf(w, "car-server: %s. Send Authorization: Bearer <token>, where the token is the daemon's (%s; it changes on every start) or an agent's own (car-server agents issue-token ID --mcp-config prints a client configuration with it).\n", what, s.tokenHint())
	return rpc.MCPPrincipal{}, false
}

func (s *Server) tokenHint() string {
	if s.opts.TokenHint != "" {
		return "in the file " + s.opts.TokenHint
	}
	return "in the daemon's auth-token file"
}

// bearer is the token of r's Authorization header, and whether it has one.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p rpc.MCPPrincipal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf is the principal a request of the session carries: the
// SDK's token info of the request (set by withTokenInfo), or the context
// the session was made under.
func principalOf(ctx context.Context, ti *auth.TokenInfo) (rpc.MCPPrincipal, bool) {
	if ti != nil {
		if p, ok := ti.Extra["principal"].(rpc.MCPPrincipal); ok {
			return p, true
		}
	}
	p, ok := ctx.Value(principalKey{}).(rpc.MCPPrincipal)
	return p, ok
}

// withTokenInfo hands the SDK the request's principal as its token info:
// UserID keeps each session to the principal that opened it.
func (s *Server) withTokenInfo(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := ctx.Value(principalKey{}).(rpc.MCPPrincipal)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Key(), Extra: map[string]any{"principal": p}}, nil
	}
	guarded := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := bearer(r); !ok {
			// Auth off: no token was needed. The SDK's middleware wants
			// one to hand the principal over.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer none")
		}
		guarded.ServeHTTP(w, r)
	})
}
