package bench_test

import (
	"testing"
	"time"

	"github.com/purser-dev/purser/bench"
)

func params(seed uint64) bench.OvershootParams {
	return bench.OvershootParams{Tasks: 64, Cap: 1_000_000, MaxCall: 16_000, MaxLatency: 2 * time.Millisecond, Seed: seed}
}

// BenchmarkOvershoot reports spend past the hard cap, as a percentage of the
// cap, for 64 concurrent tasks sharing one run budget.
func BenchmarkOvershoot(b *testing.B) {
	for _, s := range []struct {
		name string
		run  func(bench.OvershootParams) bench.OvershootResult
	}{{"purser", bench.Purser}, {"naive", bench.Naive}} {
		b.Run(s.name, func(b *testing.B) {
			var worst float64
			seed := uint64(0)
			for b.Loop() {
				seed++
				r := s.run(params(seed))
				worst = max(worst, r.Share(params(seed).Cap)*100)
			}
			b.ReportMetric(worst, "%-max-overshoot")
		})
	}
}

// Purser never spends past the cap; the naive rule does, under this load.
func TestOvershoot(t *testing.T) {
	for seed := range uint64(5) {
		p := params(seed)
		if r := bench.Purser(p); r.Overshoot != 0 || r.Spent < p.Cap*95/100 {
			t.Fatalf("seed %d: Purser spent %d of %d", seed, r.Spent, p.Cap)
		}
	}
	if r := bench.Naive(params(1)); r.Overshoot == 0 {
		t.Fatalf("the naive baseline did not overshoot (spent %d): the simulation is too gentle to show anything", r.Spent)
	}
}
