package rpc

import (
	"math"
	"unicode/utf8"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// A proposal's RuntimeScope: tenantId picks the state namespace (an
// agent only its token's, tenants.go), callerId and claims say on whose
// behalf it runs. They never outrank the connection's principal: a bound
// agent's caller is its own id (another is refused), and its claims may
// make a policy deny, never allow (engine.Submission.ClaimsTrusted). A
// plain client or the host role is the trusted bridge that verified its
// caller, and its callerId and claims are taken as said.

// DefaultMaxScopeClaimsBytes bounds scope.claims as JSON
// (max_scope_claims_bytes).
const DefaultMaxScopeClaimsBytes = 4096

// MaxCallerIDBytes bounds scope.callerId.
const MaxCallerIDBytes = 256

// scopeCaller checks scope's callerId and claims and returns the caller
// the submission records.
func (c *conn) scopeCaller(scope protocol.RuntimeScope) (string, error) {
	if n := len(scope.CallerID); n > MaxCallerIDBytes || !utf8.ValidString(scope.CallerID) {
		return "", invalidParams("scope.callerId must be valid UTF-8 of at most %d bytes, got %d bytes", MaxCallerIDBytes, n)
	}
	if len(scope.Claims) > 0 {
		most := c.srv.opts.MaxScopeClaimsBytes
		if n := jsonvalue.Size(scope.Claims, math.MaxInt64); n > int64(most) {
			return "", invalidParams("scope.claims is %d bytes as JSON; at most %d are accepted (max_scope_claims_bytes): send fewer claims", n, most)
		}
		for k := range scope.Claims {
			if k == "" {
				return "", invalidParams("scope.claims: a claim needs a non-empty name")
			}
		}
	}
	agent := c.agentID()
	switch {
	case agent == "":
		return scope.CallerID, nil
	case scope.CallerID != "" && scope.CallerID != agent:
		return "", rpcError(protocol.CodeApprovalDenied,
			"proposal.submit: agent %s may not submit as callerId '%s': a bound agent's caller is itself; omit scope.callerId or give its own id",
			agent, echoName(scope.CallerID))
	}
	return agent, nil
}
