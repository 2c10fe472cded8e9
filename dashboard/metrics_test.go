package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/purser-dev/purser/dashboard"
)

// scrape fetches /metrics as Prometheus does and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
	must(t, err)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	must(t, err)
	return families
}

// value returns the sample of a family whose labels are exactly labels
// ("k=v,k=v", sorted by key; "" for none), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name, labels string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsMatchTheStore(t *testing.T) {
	fams := scrape(t, dashboard.NewHandler(filledStore(t), dashboard.Options{}))
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{"purser_spend_usd_total", "source=reported", 0.25},
		{"purser_spend_usd_total", "source=estimated", 0.125},
		{"purser_unknown_cost_events_total", "", 1},
		{"purser_tokens_total", "type=input", 2600},
		{"purser_tokens_total", "type=output", 500},
		{"purser_tokens_total", "type=cache_read", 300},
		{"purser_tokens_total", "type=reasoning", 100},
		{"purser_calls_total", "kind=main,outcome=ok", 2},
		{"purser_calls_total", "kind=self_review,outcome=transient_error", 1},
		{"purser_calls_total", "kind=main,outcome=refused", 1},
		{"purser_admission_refusals_total", "", 1},
		{"purser_tasks", "state=BLOCKED,tier=hard", 1},
		{"purser_tasks", "state=PENDING,tier=optimal", 1},
		{"purser_runs", "tier=optimal", 1},
		{"purser_hard_stops", "", 1},
		{"purser_degrade_actions_total", "action=shrink_context,tier=warning", 1},
		{"purser_degrade_actions_total", "action=disable_self_review,tier=warning", 1},
		{"purser_store_read_errors", "", 0},
		// Known combinations are there at zero from the first scrape.
		{"purser_calls_total", "kind=planning,outcome=cancelled", 0},
		{"purser_tasks", "state=DONE,tier=optimal", 0},
	} {
		got, ok := value(fams, tc.name, tc.labels)
		if !ok {
			t.Errorf("%s{%s}: missing", tc.name, tc.labels)
			continue
		}
		if got != tc.want {
			t.Errorf("%s{%s} = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if f := fams["purser_spend_usd_total"]; f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("purser_spend_usd_total must be a counter, got %v", f.GetType())
	}
	if _, ok := value(fams, "purser_calls_total", "kind=other,outcome=ok"); ok {
		t.Error(`purser_calls_total{kind="other"} appears without such a call`)
	}
	// No label carries a task or run id: series stay bounded however many
	// tasks run.
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); v == "blocked" || v == "fresh" || v == "run-1" {
					t.Errorf("%s has an id as a label value: %s=%s", name, l.GetName(), v)
				}
			}
		}
	}
}

func TestMetricsSayWhenTheStoreCannotBeRead(t *testing.T) {
	store := filledStore(t)
	must(t, store.Close()) // a closed store cannot be read
	fams := scrape(t, dashboard.NewHandler(store, dashboard.Options{}))
	if _, ok := value(fams, "purser_spend_usd_total", "source=reported"); ok {
		t.Error("a store that cannot be read must not report spend")
	}
	if got, ok := value(fams, "purser_store_read_errors", ""); !ok || got != 1 {
		t.Errorf("purser_store_read_errors = %v (present %v), want 1", got, ok)
	}
}
