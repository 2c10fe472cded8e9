package budget_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

func randomConfig(rng *rand.Rand) budget.Config {
	var cfg budget.Config
	cfg.Hard.MaxIterations = ptr(1 + rng.IntN(20))
	// For each metric, pick ascending thresholds and keep a random subset.
	pick := func() (o, w, h *int64) {
		base := 1 + rng.Int64N(1000)
		a := base
		b := a + rng.Int64N(1000)
		c := b + rng.Int64N(1000)
		if rng.IntN(2) == 0 {
			o = &a
		}
		if rng.IntN(2) == 0 {
			w = &b
		}
		if rng.IntN(2) == 0 {
			h = &c
		}
		return
	}
	o, w, h := pick()
	conv := func(v *int64) *budget.USD {
		if v == nil {
			return nil
		}
		u := budget.USD(*v * 1_000_000)
		return &u
	}
	cfg.Optimal.USD, cfg.Warning.USD, cfg.Hard.USD = conv(o), conv(w), conv(h)
	cfg.Optimal.Tokens, cfg.Warning.Tokens, cfg.Hard.Tokens = pick()
	mins := func(v *int64) *budget.Minutes {
		if v == nil {
			return nil
		}
		m := budget.Minutes(time.Duration(*v) * time.Second)
		return &m
	}
	o, w, h = pick()
	cfg.Optimal.TimeMinutes, cfg.Warning.TimeMinutes, cfg.Hard.TimeMinutes = mins(o), mins(w), mins(h)
	return cfg
}

// perMetricTier applies the spec's rule to one metric independently of the
// Manager, to check the Manager against.
func perMetricTier(cfg budget.Config, m budget.Metric, used int64) budget.Tier {
	if h, ok := cfg.Threshold(budget.Hard, m); ok && used >= h {
		return budget.Hard
	}
	start, ok := cfg.Threshold(budget.Optimal, m)
	if !ok {
		start, ok = cfg.Threshold(budget.Warning, m)
	}
	if ok && used >= start {
		return budget.Warning
	}
	return budget.Optimal
}

// Properties over random budgets and random usage: the tier never goes down
// as usage grows, and the overall tier is the maximum of the metrics' tiers.
func TestTierProperties(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 42))
		cfg := randomConfig(rng)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("seed %d: generated invalid config: %v", seed, err)
		}
		m := newManager(t, cfg, budget.Options{})
		prev := budget.Optimal
		for range 60 {
			ev := budget.UsageEvent{
				InputTokens:  rng.Int64N(40),
				OutputTokens: rng.Int64N(10),
				USD:          budget.USD(rng.Int64N(40_000_000)),
				CostSource:   budget.CostReported,
				Elapsed:      time.Duration(rng.Int64N(int64(40 * time.Second))),
				IterationEnd: rng.IntN(8) == 0,
			}
			m.RecordUsage(ev)
			st := m.Status()
			if st.Tier < prev {
				t.Fatalf("seed %d: tier went down from %s to %s", seed, prev, st.Tier)
			}
			prev = st.Tier
			want := budget.Optimal
			for _, metric := range budget.Metrics {
				want = max(want, perMetricTier(cfg, metric, st.Used(metric)))
			}
			if st.Tier != want {
				t.Fatalf("seed %d: overall tier %s, max of metrics %s (status %+v)", seed, st.Tier, want, st)
			}
		}
	}
}
