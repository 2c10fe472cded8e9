package dashboard_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
)

// plainStore hides every method but purser.Store's: a store that does not
// sum /metrics itself (no purser.MetricsStore), read the long way.
type plainStore struct{ purser.Store }

// samples is a scrape as label sets and values, for comparing two scrapes.
func samples(fams map[string]*dto.MetricFamily) map[string]string {
	out := map[string]string{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			m.Label = nil
			out[key] = m.String()
		}
	}
	return out
}

func TestMetricsAreTheSameWhetherTheStoreSumsThemOrNot(t *testing.T) {
	for name, store := range map[string]func(t *testing.T) purser.Store{
		"filled":  filledStore,
		"stopped": func(t *testing.T) purser.Store { s, _ := stoppedStore(t); return s },
		"agents":  agentStore,
	} {
		t.Run(name, func(t *testing.T) {
			s := store(t)
			if _, ok := s.(purser.MetricsStore); !ok {
				t.Fatal("the SQLite store is expected to sum /metrics itself")
			}
			summed := samples(scrape(t, dashboard.NewHandler(s, dashboard.Options{})))
			long := samples(scrape(t, dashboard.NewHandler(plainStore{s}, dashboard.Options{})))
			if !reflect.DeepEqual(summed, long) {
				for k, v := range summed {
					if long[k] != v {
						t.Errorf("%s: summed by the store %s, from the ledger %s", k, v, long[k])
					}
				}
				for k := range long {
					if _, ok := summed[k]; !ok {
						t.Errorf("%s: only from the ledger", k)
					}
				}
			}
		})
	}
}

func TestAScrapeSeesWhatWasAddedSinceTheLast(t *testing.T) {
	s := openStore(t)
	h := dashboard.NewHandler(s, dashboard.Options{})
	fill := filledStore(t) // a second database, to copy from
	ctx := t.Context()
	if got, _ := value(scrape(t, h), "purser_tokens_total", "type=input"); got != 0 {
		t.Fatalf("an empty store: input tokens %v", got)
	}
	recs, err := fill.Tasks(ctx)
	must(t, err)
	for _, rec := range recs {
		must(t, s.SaveTask(ctx, rec))
		usage, err := fill.Usage(ctx, rec.ID)
		must(t, err)
		for i, e := range usage {
			must(t, s.AppendUsage(ctx, e))
			if got, _ := value(scrape(t, h), "purser_tokens_total", "type=input"); i == 0 && got == 0 {
				t.Fatalf("after an append, the scrape still says 0 input tokens")
			}
		}
	}
	if got, _ := value(scrape(t, h), "purser_tokens_total", "type=input"); got != 2600 {
		t.Errorf("input tokens = %v, want 2600 once the whole ledger is in", got)
	}
}

// A handler keeps what it found between scrapes; a task that moves is seen
// moving.
func TestTimeToStopFollowsATaskAcrossScrapes(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tokenCap := budget.Config{Hard: budget.HardLimits{Tokens: ptr(int64(1000)), MaxIterations: ptr(10)}}
	store := openStore(t)
	f := stopFixture{t: t, store: store}
	h := dashboard.NewHandler(store, dashboard.Options{})
	stops := func() (uint64, float64) {
		t.Helper()
		hist := scrape(t, h)["purser_time_to_stop_seconds"].GetMetric()[0].GetHistogram()
		return hist.GetSampleCount(), hist.GetSampleSum()
	}
	f.task("cut", "r", purser.StateRunning, tokenCap, 3*time.Second, sec(60))
	f.iteration("cut", 1, sec(0), sec(2.5))
	f.call("cut", "cut-1", 1, sec(0), sec(2.3), purser.CallCancelled)
	f.spend("cut", "r", "cut/1", "cut-1", 0, 600, sec(1))
	if n, _ := stops(); n != 0 {
		t.Fatalf("a RUNNING task: %d observed", n)
	}
	f.spend("cut", "r", "cut/2", "cut-1", 0, 600, sec(2))
	f.task("cut", "r", purser.StateBlocked, tokenCap, 3*time.Second, sec(60))
	if n, sum := stops(); n != 1 || math.Abs(sum-0.3) > 1e-9 {
		t.Fatalf("BLOCKED: %d observed, %v s; want 1, 0.3 s", n, sum)
	}
	f.task("other", "r", purser.StateRunning, tokenCap, 0, sec(61))
	f.spend("other", "r", "o/1", "", 0, 10, sec(61))
	if n, sum := stops(); n != 1 || math.Abs(sum-0.3) > 1e-9 {
		t.Fatalf("another task spending: %d observed, %v s; want 1, 0.3 s", n, sum)
	}
	f.task("cut", "r", purser.StateRunning, tokenCap, 3*time.Second, sec(70))
	if n, _ := stops(); n != 0 {
		t.Fatalf("resumed: %d observed, want 0", n)
	}
	if got, _ := value(scrape(t, h), "purser_tokens_total", "type=input"); got != 1210 {
		t.Errorf("input tokens = %v, want 1210", got)
	}
}
