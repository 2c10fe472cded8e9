package alert_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/budget"
)

// receiver is a local webhook receiver: it records every request, and
// answers each with what respond says (200 when nil).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	respond  func(n int) int // status for the n-th request (1-based)
}

type request struct {
	key, event string
	body       []byte
}

func newReceiver(t *testing.T, respond func(n int) int) *receiver {
	r := &receiver{respond: respond}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, request{key: req.Header.Get("Idempotency-Key"), event: req.Header.Get("X-Purser-Event"), body: body})
		n := len(r.requests)
		r.mu.Unlock()
		code := http.StatusOK
		if r.respond != nil {
			code = r.respond(n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.requests...)
}

// accepted is what a receiver deduplicating on the idempotency key keeps:
// the kinds of the requests it answered 2xx, each key once.
func accepted(reqs []request, respond func(int) int) (kinds []string, dupes int) {
	seen := map[string]bool{}
	for i, r := range reqs {
		if respond != nil && respond(i+1) >= 300 {
			continue
		}
		if seen[r.key] {
			dupes++
			continue
		}
		seen[r.key] = true
		kinds = append(kinds, r.event)
	}
	return kinds, dupes
}

func status(tier budget.Tier, past bool, cause budget.Metric, usd string) budget.Status {
	u, _ := budget.ParseUSD(usd)
	return budget.Status{Tier: tier, PastWarningLine: past, Cause: cause, UsedUSD: u, IsInWarning: tier == budget.Warning, IsAtHardCap: tier == budget.Hard}
}

// runawayEvents is a task going OPTIMAL → WARNING → past its warning line →
// HARD → BLOCKED, with several events at each level (as usage streams).
func runawayEvents() []purser.Event {
	ev := func(typ purser.EventType, st budget.Status) purser.Event {
		return purser.Event{TaskID: "runaway", Type: typ, Status: st}
	}
	stop := ev(purser.EventStop, status(budget.Hard, true, budget.Money, "1.05"))
	stop.State, stop.Message = purser.StateBlocked, "BLOCKED: money hard cap"
	return []purser.Event{
		ev(purser.EventIteration, status(budget.Optimal, false, budget.NoMetric, "0")),
		ev(purser.EventUsage, status(budget.Optimal, false, budget.NoMetric, "0.30")),
		ev(purser.EventUsage, status(budget.Warning, false, budget.Money, "0.55")),
		ev(purser.EventTier, status(budget.Warning, false, budget.Money, "0.55")),
		ev(purser.EventUsage, status(budget.Warning, false, budget.Money, "0.60")),
		ev(purser.EventUsage, status(budget.Warning, true, budget.Money, "0.80")),
		ev(purser.EventUsage, status(budget.Warning, true, budget.Money, "0.90")),
		ev(purser.EventUsage, status(budget.Hard, true, budget.Money, "1.05")),
		ev(purser.EventTier, status(budget.Hard, true, budget.Money, "1.05")),
		stop,
		stop, // an observer may see a stop twice; the task is blocked once
	}
}

func fast(url string, format alert.Format) alert.Config {
	return alert.Config{Webhooks: []alert.Webhook{{Name: "test", URL: url, Format: format}},
		Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Flush: time.Minute}
}

func TestEveryTierEventDeliveredOnce(t *testing.T) {
	rcv := newReceiver(t, nil)
	n := alert.New(fast(rcv.URL, alert.FormatJSON), alert.Options{})
	for _, ev := range runawayEvents() {
		n.Observe(ev)
	}
	res := n.Close()
	reqs := rcv.got()
	kinds, dupes := accepted(reqs, nil)
	want := []string{"warning", "warning_line", "hard", "blocked"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") || dupes != 0 || len(reqs) != 4 {
		t.Fatalf("receiver got %v (%d requests, %d duplicates), want %v each once", kinds, len(reqs), dupes, want)
	}
	if res.Delivered != 4 || res.Undelivered != 0 {
		t.Fatalf("Close = %+v, want 4 delivered", res)
	}
	var p struct {
		ID, Event, Task, Tier, Metric, Scope, Text string
		Budget                                     json.RawMessage
	}
	if err := json.Unmarshal(reqs[2].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != reqs[2].key || p.Event != "hard" || p.Task != "runaway" || p.Tier != "hard" || p.Metric != "money" || p.Scope != "task" || !strings.Contains(p.Text, "HARD cap") {
		t.Fatalf("hard payload = %+v", p)
	}
	if !strings.Contains(string(reqs[2].body), `"usedUsd":1.05`) {
		t.Fatalf("hard payload lacks the budget: %s", reqs[2].body)
	}
}

func TestReceiverFailingTwiceGetsTheAlertOnce(t *testing.T) {
	respond := func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	rcv := newReceiver(t, respond)
	n := alert.New(fast(rcv.URL, alert.FormatJSON), alert.Options{})
	n.Observe(purser.Event{TaskID: "t", Type: purser.EventUsage, Status: status(budget.Hard, true, budget.Tokens, "0")})
	res := n.Close()
	reqs := rcv.got()
	if len(reqs) != 3 || reqs[0].key != reqs[1].key || reqs[1].key != reqs[2].key {
		t.Fatalf("want 3 attempts with one idempotency key, got %+v", reqs)
	}
	if kinds, _ := accepted(reqs, respond); len(kinds) != 1 || res.Delivered != 1 {
		t.Fatalf("accepted %v, Close = %+v; want the alert once", kinds, res)
	}
}

func TestRefusalIsNotRetried(t *testing.T) {
	rcv := newReceiver(t, func(int) int { return http.StatusNotFound })
	var logged []string
	var mu sync.Mutex
	n := alert.New(fast(rcv.URL+"/T000/B000/secretpath", alert.FormatJSON), alert.Options{Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, f)
	}})
	n.Observe(purser.Event{TaskID: "t", Type: purser.EventUsage, Status: status(budget.Warning, false, budget.Money, "1")})
	res := n.Close()
	if got := len(rcv.got()); got != 1 || res.Undelivered != 1 {
		t.Fatalf("a 404 was tried %d times (Close = %+v), want once and undelivered", got, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 {
		t.Fatalf("want the failure logged once, got %v", logged)
	}
}

func TestDeadReceiverBoundedByFlush(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	cfg := fast(hung.URL, alert.FormatJSON)
	cfg.Flush = 200 * time.Millisecond
	n := alert.New(cfg, alert.Options{})

	observed := make(chan struct{})
	go func() {
		for _, ev := range runawayEvents() {
			n.Observe(ev)
		}
		close(observed)
	}()
	select {
	case <-observed: // the engine's side never waits for the receiver
	case <-time.After(30 * time.Second):
		t.Fatal("Observe blocked on a receiver that does not answer")
	}
	start := time.Now()
	res := n.Close()
	// The point of the flush is a bound: Close returns after it, not after
	// the receiver (which never answers) or the retries (minutes).
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("Close took %s with a 200ms flush", took)
	}
	if res.Delivered != 0 || res.Undelivered != 4 {
		t.Fatalf("Close = %+v, want 4 undelivered", res)
	}
}

func TestDeadReceiverDelaysNoOtherWebhook(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	good := newReceiver(t, nil)
	cfg := fast(good.URL, alert.FormatJSON)
	cfg.Webhooks = append([]alert.Webhook{{Name: "hung", URL: hung.URL}}, cfg.Webhooks...)
	cfg.Flush = 100 * time.Millisecond
	n := alert.New(cfg, alert.Options{})
	for _, ev := range runawayEvents() {
		n.Observe(ev)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(good.got()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(good.got()); got != 4 {
		t.Fatalf("the good receiver got %d alerts while the other hung, want 4", got)
	}
	if res := n.Close(); res.Delivered != 4 || res.Undelivered != 4 {
		t.Fatalf("Close = %+v, want 4 delivered (good) and 4 not (hung)", res)
	}
}

func TestSlackPayloadCarriesNoSecret(t *testing.T) {
	rcv := newReceiver(t, nil)
	cfg := fast(rcv.URL, alert.FormatSlack)
	cfg.Webhooks[0].Events = []alert.Kind{alert.Blocked}
	n := alert.New(cfg, alert.Options{})
	secret := "sk-ant-api03-" + strings.Repeat("A1b2", 10)
	stop := purser.Event{TaskID: "leaky", Type: purser.EventStop, State: purser.StateBlocked,
		Status:  status(budget.Hard, true, budget.Money, "2"),
		Message: "BLOCKED: backend said: invalid x-api-key " + secret}
	n.Observe(purser.Event{TaskID: "leaky", Type: purser.EventUsage, Status: status(budget.Warning, false, budget.Money, "1")})
	n.Observe(stop)
	n.Close()
	reqs := rcv.got()
	if len(reqs) != 1 || reqs[0].event != "blocked" {
		t.Fatalf("want only the blocked alert (Events filter), got %+v", reqs)
	}
	var p struct{ Text string }
	if err := json.Unmarshal(reqs[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(reqs[0].body), secret) || !strings.Contains(p.Text, "[REDACTED]") {
		t.Fatalf("slack text carries the secret or lost the message: %s", reqs[0].body)
	}
	if !strings.Contains(p.Text, "task leaky is BLOCKED") || !strings.Contains(p.Text, "purser explain leaky") {
		t.Fatalf("slack text = %q", p.Text)
	}
}

func TestAlertLevels(t *testing.T) {
	tests := []struct {
		name     string
		baseline *budget.Status
		statuses []budget.Status
		want     string
	}{
		{"a jump from OPTIMAL to HARD is one HARD alert", nil,
			[]budget.Status{status(budget.Optimal, false, 0, "0"), status(budget.Hard, true, budget.Money, "5")}, "hard,blocked"},
		{"entering WARNING past the line (no separate warning line) is one WARNING alert", nil,
			[]budget.Status{status(budget.Warning, true, budget.Money, "1")}, "warning"},
		{"a resumed task already in WARNING is not announced again", ptr(status(budget.Warning, true, budget.Money, "1")),
			[]budget.Status{status(budget.Warning, true, budget.Money, "1.1"), status(budget.Hard, true, budget.Money, "3")}, "hard,blocked"},
		{"a resumed BLOCKED task refused again is not announced again", ptr(status(budget.Hard, true, budget.Money, "3")),
			[]budget.Status{status(budget.Hard, true, budget.Money, "3")}, ""},
		{"a raised budget crossing HARD again is announced again", nil,
			[]budget.Status{status(budget.Hard, true, budget.Money, "3"), status(budget.Warning, true, budget.Money, "3"), status(budget.Hard, true, budget.Money, "5")}, "hard,hard,blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, nil)
			n := alert.New(fast(rcv.URL, alert.FormatJSON), alert.Options{})
			if tt.baseline != nil {
				state := purser.StatePending // interrupted
				if tt.baseline.Tier == budget.Hard {
					state = purser.StateBlocked
				}
				n.Baseline("t", *tt.baseline, state)
			}
			for _, st := range tt.statuses {
				n.Observe(purser.Event{TaskID: "t", Type: purser.EventUsage, Status: st})
			}
			if last := tt.statuses[len(tt.statuses)-1]; last.Tier == budget.Hard {
				n.Observe(purser.Event{TaskID: "t", Type: purser.EventStop, State: purser.StateBlocked, Status: last})
			}
			n.Close()
			kinds, _ := accepted(rcv.got(), nil)
			if got := strings.Join(kinds, ","); got != tt.want {
				t.Fatalf("alerts %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunBudgetAlerts(t *testing.T) {
	rcv := newReceiver(t, nil)
	n := alert.New(fast(rcv.URL, alert.FormatJSON), alert.Options{})
	run := status(budget.Warning, false, budget.Tokens, "0")
	n.Observe(purser.Event{TaskID: "a", Type: purser.EventUsage, Status: status(budget.Optimal, false, 0, "0"), Run: &run})
	n.Observe(purser.Event{TaskID: "b", Type: purser.EventUsage, Status: status(budget.Optimal, false, 0, "0"), Run: &run})
	n.Close()
	reqs := rcv.got()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].body), `"scope":"run"`) {
		t.Fatalf("want one run-scope WARNING alert for the two tasks sharing the run, got %d: %v", len(reqs), reqs)
	}
}

func ptr[T any](v T) *T { return &v }
