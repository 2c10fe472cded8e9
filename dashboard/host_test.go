package dashboard_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/purser-dev/purser/dashboard"
)

// Issue 23 #12: a page on another site that points its own name at this
// machine (DNS rebinding) reaches the dashboard with its name in Host; the
// dashboard answers only to the names it listens on, so the page reads no
// snapshot, stream or metrics.
func TestRequestsForAnotherHostAreRefused(t *testing.T) {
	hostname, _ := os.Hostname()
	for _, tc := range []struct {
		name, addr  string
		ok, refused []string
	}{
		{"address not given", "",
			[]string{"127.0.0.1:8417", "localhost:8417", "[::1]:8417", "LOCALHOST.", "app.localhost:8417", "", "192.168.1.5:8417"},
			[]string{"evil.example:8417", "evil.example", "127.0.0.1.nip.io:8417", "localhost.evil.example"}},
		{"loopback", "127.0.0.1:8417",
			[]string{"127.0.0.1:8417", "localhost:8417", "[::1]:8417"},
			[]string{"rebind.attacker.test:8417", "192.168.1.5:8417"}},
		{"one address", "192.168.1.5:8417",
			[]string{"192.168.1.5:8417", "127.0.0.1:8417", "localhost"},
			[]string{"evil.example:8417", "10.0.0.9:8417"}},
		{"every address", "0.0.0.0:8417",
			[]string{"192.168.1.5:8417", "[fe80::1]:8417", "localhost:8417", hostname + ":8417"},
			[]string{"evil.example:8417"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{Addr: tc.addr}))
			defer srv.Close()
			get := func(host string) (int, string) {
				req, err := http.NewRequest("GET", srv.URL+"/api/snapshot", nil)
				must(t, err)
				req.Host = host
				resp, err := http.DefaultClient.Do(req)
				must(t, err)
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			for _, host := range tc.ok {
				if code, body := get(host); code != http.StatusOK {
					t.Errorf("Host %q: %d %s, want 200", host, code, body)
				}
			}
			for _, host := range tc.refused {
				code, body := get(host)
				if code != http.StatusMisdirectedRequest || !strings.Contains(body, "not an address this dashboard answers to") {
					t.Errorf("Host %q: %d %q, want 421 saying why", host, code, body)
				}
				if strings.Contains(body, "blocked") {
					t.Errorf("Host %q: the snapshot leaked: %s", host, body)
				}
			}
		})
	}
}

// A token a browser page could guess is no guard: CheckBind refuses one
// shorter than MinTokenLength, saying the minimum, wherever it listens.
func TestCheckBindRefusesAWeakToken(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		weak        bool
	}{
		{"0.0.0.0:8417", "x", true},
		{"0.0.0.0:8417", "s3cret", true},
		{"127.0.0.1:8417", "abc", true},
		{"0.0.0.0:8417", strings.Repeat("k", dashboard.MinTokenLength-1), true},
		{"0.0.0.0:8417", strings.Repeat("k", dashboard.MinTokenLength), false},
		{"127.0.0.1:8417", "", false},
	} {
		err := dashboard.CheckBind(tc.addr, tc.token)
		if got := errors.Is(err, dashboard.ErrWeakToken); got != tc.weak {
			t.Errorf("CheckBind(%q, %q) = %v, want weak=%v", tc.addr, tc.token, err, tc.weak)
		}
		if tc.weak && !strings.Contains(err.Error(), "at least 16 characters") {
			t.Errorf("the refusal does not say the minimum: %v", err)
		}
		if tc.weak && strings.Contains(err.Error(), tc.token) && len(tc.token) > 3 {
			t.Errorf("the refusal prints the token: %v", err)
		}
	}
}
