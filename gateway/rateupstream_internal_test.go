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

// A body that names input the provider holds (a previous response, a
// conversation, cached content) is billed beyond its bytes: the door
// learns no rate from it, which would pin the model's rate at a token a
// byte for every later process.
func TestStatefulRequestsTeachNoRate(t *testing.T) {
	for _, tc := range []struct {
		body     string
		stateful bool
	}{
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, true},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, true},
		{`{"contents":[],"cachedContent":"cachedContents/abc"}`, true},
		{`{"model":"m","input":"hi","conversation":null}`, false},
		{`{"model":"m","input":"hi","previous_response_id":""}`, false},
		{`{"model":"m","messages":[]}`, false},
	} {
		if got := readFields(route{api: "responses"}, []byte(tc.body)).stateful; got != tc.stateful {
			t.Errorf("%s: stateful %v, want %v", tc.body, got, tc.stateful)
		}
	}
}
