package worker

import (
	"testing"
	"time"
)

// A job the engine refuses comes round later and later, never sooner than
// a second and never later than five minutes.
func TestARefusedJobComesRoundLaterAndLater(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		want     time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {1000, 5 * time.Minute}} {
		if got := refusalBackoff(tc.attempts); got != tc.want {
			t.Errorf("after %d leases: %s, want %s", tc.attempts, got, tc.want)
		}
	}
}
