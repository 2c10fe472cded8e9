package forecast

import (
	"math"
	"testing"
)

// The coverage's standard error takes runs, not checkpoints, as the draws:
// a run's checkpoints share its final and hold or miss together.
func TestClusterSE(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs [][2]int
		want float64
	}{
		// Two runs of one checkpoint each, one covered: a binomial's
		// sqrt(p(1-p)/(n-1)).
		{"one checkpoint per run", [][2]int{{1, 1}, {0, 1}}, 0.5},
		// The same two runs, each forecast ten times: ten times the
		// checkpoints, no more information.
		{"ten alike checkpoints per run", [][2]int{{10, 10}, {0, 10}}, 0.5},
		{"every run covered throughout", [][2]int{{3, 3}, {5, 5}, {1, 1}}, 0},
		{"one run: no spread to read", [][2]int{{1, 2}}, 0},
	} {
		covered, n := 0, 0
		for _, r := range tc.runs {
			covered, n = covered+r[0], n+r[1]
		}
		if got := clusterSE(tc.runs, float64(covered)/float64(n), n); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: SE %v, want %v", tc.name, got, tc.want)
		}
	}
}
