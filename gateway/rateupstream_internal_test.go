package gateway

import (
	"strings"
	"testing"
)

// The rates file keys an upstream by scheme and host, its path only as a
// hash: a proxy's path may carry an account or a token, and the file is
// kept for good. Two paths stay two keys.
func TestRateUpstreamKeepsNoPath(t *testing.T) {
	a := rateUpstream("https://Proxy.example.com/acct-123/sk-secret-token/v1/")
	b := rateUpstream("https://proxy.example.com/other/v1")
	for _, k := range []string{a, b} {
		if strings.Contains(k, "secret") || strings.Contains(k, "acct") || strings.Contains(k, "other") || !strings.HasPrefix(k, "https://proxy.example.com/#") {
			t.Fatalf("rate key %q: want scheme and host, the path hashed", k)
		}
	}
	if a == b || rateUpstream("https://proxy.example.com/acct-123/sk-secret-token/v1") != a {
		t.Fatalf("keys %q and %q: want distinct paths distinct, a trailing slash the same", a, b)
	}
	if k := rateUpstream("https://api.anthropic.com"); k != "https://api.anthropic.com" {
		t.Fatalf("no path: %q", k)
	}
	if k := rateUpstream("::not a url with sk-secret"); strings.Contains(k, "secret") {
		t.Fatalf("an unparsed upstream kept as %q", k)
	}
}
