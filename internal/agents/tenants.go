package agents

import (
	"slices"
	"strconv"
	"strings"
)

// DefaultTenant is the unscoped state namespace: a tenant_id (or
// scope.tenantId) that is absent or "". An agent whose token names no
// tenant may use it alone.
const DefaultTenant = ""

// Tenants is the set of tenants an agent's token admits, sorted, each
// once; it is never empty: a token issued without a tenant admits the
// default one.
func Tenants(granted []string) []string {
	if len(granted) == 0 {
		return []string{DefaultTenant}
	}
	out := slices.Clone(granted)
	slices.Sort(out)
	return slices.Compact(out)
}

// Admits reports whether tenant is one of granted (as Tenants reads it).
func Admits(granted []string, tenant string) bool {
	return slices.Contains(Tenants(granted), tenant)
}

// TenantName is how a message names a tenant: quoted, or "the default
// tenant".
func TenantName(tenant string) string {
	if tenant == DefaultTenant {
		return "the default tenant"
	}
	return "tenant " + strconv.Quote(tenant)
}

// TenantList names the tenants granted admits, for agents list and
// refusals: "(default)" for the default tenant, the others quoted when they
// need it.
func TenantList(granted []string) string {
	names := make([]string, 0, len(granted))
	for _, t := range Tenants(granted) {
		switch {
		case t == DefaultTenant:
			names = append(names, "(default)")
		case strings.ContainsAny(t, " ,\"()") || strconv.Quote(t) != `"`+t+`"`:
			names = append(names, strconv.Quote(t))
		default:
			names = append(names, t)
		}
	}
	return strings.Join(names, ",")
}

// TenantFlags is the --tenant flags that grant the tenants granted again,
// for a refusal that says how to widen a token.
func TenantFlags(granted []string) string {
	var b strings.Builder
	for _, t := range Tenants(granted) {
		b.WriteString(" --tenant " + ShellWord(t))
	}
	return b.String()
}

// ShellWord quotes s for a POSIX shell when it needs it.
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
