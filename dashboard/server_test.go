package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/dashboard"
)

func TestSnapshotShowsTiersGaugesAndHistory(t *testing.T) {
	snap, err := dashboard.Load(context.Background(), filledStore(t))
	must(t, err)
	if len(snap.Runs) != 1 || len(snap.Runs[0].Tasks) != 2 {
		t.Fatalf("want one run of two tasks, got %+v", snap.Runs)
	}
	run := snap.Runs[0]
	if run.Budget == nil || run.Budget.Tier != "OPTIMAL" {
		t.Errorf("run budget: want OPTIMAL, got %+v", run.Budget)
	}
	blocked := run.Tasks[0]
	if blocked.ID != "blocked" || blocked.State != "BLOCKED" || blocked.Budget.Tier != "HARD" || blocked.Budget.Cause != "tokens" {
		t.Errorf("blocked task: got id %s state %s tier %s cause %s", blocked.ID, blocked.State, blocked.Budget.Tier, blocked.Budget.Cause)
	}
	if got, want := blocked.Budget.Money, "≥ $0.375 (partial: some unknown)"; got != want {
		t.Errorf("money: got %q, want %q", got, want)
	}
	byMetric := map[string]dashboard.Gauge{}
	for _, g := range blocked.Budget.Gauges {
		byMetric[g.Metric] = g
	}
	tok := byMetric["tokens"]
	if !tok.Enforced || tok.Tier != "HARD" || tok.Optimal == nil || tok.Hard == nil || tok.Warning != nil {
		t.Fatalf("tokens gauge: %+v", tok)
	}
	// 3100 of a 3000 hard cap fills the gauge (and is HARD); the optimal
	// line is a third in.
	if tok.Fill != 100 || int(tok.Optimal.At) != 33 || tok.Hard.At != 100 {
		t.Errorf("tokens gauge positions: fill %v optimal %v hard %v", tok.Fill, tok.Optimal.At, tok.Hard.At)
	}
	for _, want := range []string{"tokens: 3100 used", "tier HARD", "optimal line 1000", "103.3% of hard", "hard line 3000"} {
		if !strings.Contains(tok.Label, want) {
			t.Errorf("tokens label %q lacks %q", tok.Label, want)
		}
	}
	if tm := byMetric["time"]; tm.Enforced || tm.Note != "not enforced" {
		t.Errorf("time has no threshold, want not enforced, got %+v", tm)
	}
	if len(blocked.Spend) != 3 || blocked.Spend[2].Tokens != 3100 {
		t.Errorf("spend points: %+v", blocked.Spend)
	}
	if len(blocked.Degrades) != 2 || blocked.Degrades[0].Action != "shrink_context" || blocked.Degrades[0].Tier != "WARNING" || blocked.Degrades[0].Why == "" {
		t.Errorf("degrades: %+v", blocked.Degrades)
	}
	sources := map[string]string{}
	for _, c := range blocked.Calls {
		sources[c.ID] = c.Outcome + "/" + c.Source
	}
	want := map[string]string{"c1": "ok/reported", "c2": "ok/estimated", "c3": "transient_error/unknown", "c4": "refused/none"}
	for id, w := range want {
		if sources[id] != w {
			t.Errorf("call %s: got %s, want %s", id, sources[id], w)
		}
	}
	if len(blocked.Docs) != 1 || blocked.Docs[0].Name != "STATUS.md" {
		t.Errorf("docs: %+v", blocked.Docs)
	}
	if fresh := run.Tasks[1]; fresh.Budget.Tier != "OPTIMAL" || fresh.Budget.Money != "$0.00" {
		t.Errorf("fresh task: tier %s money %s", fresh.Budget.Tier, fresh.Budget.Money)
	}
}

func TestCheckBindNeedsATokenOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		refused     bool
	}{
		{"127.0.0.1:8417", "", false},
		{"localhost:0", "", false},
		{"[::1]:8417", "", false},
		{"0.0.0.0:8417", "", true},
		{":8417", "", true},
		{"192.168.1.5:80", "", true},
		{"0.0.0.0:8417", "s3cret", false},
	} {
		err := dashboard.CheckBind(tc.addr, tc.token)
		if got := errors.Is(err, dashboard.ErrTokenRequired); got != tc.refused {
			t.Errorf("CheckBind(%q, %q) = %v, want refused=%v", tc.addr, tc.token, err, tc.refused)
		}
	}
	if err := dashboard.CheckBind("no-port", ""); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("a malformed address must say what is expected, got %v", err)
	}
}

func TestEveryRequestNeedsTheToken(t *testing.T) {
	srv := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{Token: "s3cret"}))
	defer srv.Close()
	for _, tc := range []struct {
		name, path, header string
		want               int
	}{
		{"no token", "/api/snapshot", "", http.StatusUnauthorized},
		{"wrong token", "/api/snapshot?token=nope", "", http.StatusUnauthorized},
		{"query token", "/api/snapshot?token=s3cret", "", http.StatusOK},
		{"bearer token", "/metrics", "Bearer s3cret", http.StatusOK},
		{"wrong bearer", "/", "Bearer s3cre", http.StatusUnauthorized},
		{"page with token", "/?token=s3cret", "", http.StatusOK},
		{"asset without token", "/static/app.js", "", http.StatusUnauthorized},
		{"asset with the cookie", "/static/app.js", "cookie:s3cret", http.StatusOK},
		{"stream with a wrong cookie", "/api/snapshot", "cookie:nope", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", srv.URL+tc.path, nil)
			must(t, err)
			if v, ok := strings.CutPrefix(tc.header, "cookie:"); ok {
				req.AddCookie(&http.Cookie{Name: "purser_token", Value: v})
			} else if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s: got %d, want %d", tc.path, resp.StatusCode, tc.want)
			}
			setsCookie := len(resp.Cookies()) > 0
			if want := strings.Contains(tc.path, "token=") && tc.want == http.StatusOK; setsCookie != want {
				t.Errorf("GET %s: sets a cookie %v, want %v", tc.path, setsCookie, want)
			}
		})
	}
}

func TestPageAndAssetsAreServedFromTheBinary(t *testing.T) {
	srv := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{}))
	defer srv.Close()
	for path, want := range map[string]string{"/": "static/app.js", "/static/app.js": "EventSource", "/static/style.css": ".gauge"} {
		resp, err := http.Get(srv.URL + path)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: status %d, body lacks %q", path, resp.StatusCode, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	// The page builds everything with textContent; no path puts store text
	// into innerHTML.
	resp, err := http.Get(srv.URL + "/static/app.js")
	must(t, err)
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(js), "innerHTML") {
		t.Error("app.js uses innerHTML")
	}
}

// snapshots reads a stream's snapshot events, in order.
func snapshots(t *testing.T, ctx context.Context, url string) <-chan dashboard.Snapshot {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	out := make(chan dashboard.Snapshot, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<24)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && event == "snapshot" {
				var snap dashboard.Snapshot
				if json.Unmarshal([]byte(data), &snap) != nil {
					return
				}
				out <- snap
			}
		}
	}()
	return out
}

func stateOf(snap dashboard.Snapshot, task string) string {
	for _, r := range snap.Runs {
		for _, tv := range r.Tasks {
			if tv.ID == task {
				return tv.State
			}
		}
	}
	return ""
}

func TestEveryOpenStreamSeesTheStoreChange(t *testing.T) {
	store := filledStore(t)
	srv := httptest.NewServer(dashboard.NewHandler(store, dashboard.Options{PollInterval: 20 * time.Millisecond}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	streams := []<-chan dashboard.Snapshot{snapshots(t, ctx, srv.URL+"/events"), snapshots(t, ctx, srv.URL+"/events")}
	for i, s := range streams {
		snap, ok := <-s
		if !ok || stateOf(snap, "fresh") != "PENDING" || stateOf(snap, "blocked") != "BLOCKED" {
			t.Fatalf("stream %d: first snapshot %+v", i, snap)
		}
	}
	must(t, store.SetTaskState(ctx, "fresh", "RUNNING", ""))
	for i, s := range streams {
		seen := false
		for snap := range s {
			if seen = stateOf(snap, "fresh") == "RUNNING"; seen {
				break
			}
		}
		if !seen {
			t.Fatalf("stream %d ended without showing the task RUNNING", i)
		}
	}
}
