package usagedelta_test

import (
	"math/rand/v2"
	"testing"

	"github.com/purser-dev/purser/backend/internal/usagedelta"
	"github.com/purser-dev/purser/budget"
)

func ev(in, cacheRead, cacheWrite, out, reasoning int64) budget.UsageEvent {
	return budget.UsageEvent{InputTokens: in, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite,
		OutputTokens: out, ReasoningTokens: reasoning, Model: "m"}
}

func TestGrow(t *testing.T) {
	tests := []struct {
		name        string
		have, want  budget.UsageEvent
		delta, next budget.UsageEvent
	}{
		{"a first snapshot is all new", ev(0, 0, 0, 0, 0), ev(100, 40, 10, 5, 2), ev(100, 40, 10, 5, 2), ev(100, 40, 10, 5, 2)},
		{"a snapshot that grew adds its growth", ev(100, 40, 10, 5, 2), ev(100, 40, 10, 60, 2), ev(0, 0, 0, 55, 0), ev(100, 40, 10, 60, 2)},
		{"the same snapshot again adds nothing", ev(100, 40, 10, 60, 2), ev(100, 40, 10, 60, 2), ev(0, 0, 0, 0, 0), ev(100, 40, 10, 60, 2)},
		{"an older, smaller snapshot adds nothing", ev(100, 40, 10, 60, 2), ev(50, 20, 0, 1, 0), ev(0, 0, 0, 0, 0), ev(100, 40, 10, 60, 2)},
		// The cache part grew but the input did not: there is no input to
		// hold it, so it waits, and next says what was really emitted.
		{"cache growth without input growth waits", ev(100, 40, 0, 5, 0), ev(100, 90, 0, 5, 0), ev(0, 0, 0, 0, 0), ev(100, 40, 0, 5, 0)},
		{"the waiting cache part lands when input grows", ev(100, 40, 0, 5, 0), ev(130, 90, 0, 5, 0), ev(30, 30, 0, 0, 0), ev(130, 70, 0, 5, 0)},
		{"cache writes fit in what cache reads leave", ev(0, 0, 0, 0, 0), ev(10, 8, 8, 0, 0), ev(10, 8, 2, 0, 0), ev(10, 8, 2, 0, 0)},
		{"reasoning stays within output", ev(0, 0, 0, 10, 0), ev(0, 0, 0, 12, 9), ev(0, 0, 0, 2, 2), ev(0, 0, 0, 12, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delta, next := usagedelta.Grow(tt.have, tt.want)
			if delta != tt.delta || next != tt.next {
				t.Fatalf("Grow(%+v, %+v) = %+v, %+v; want %+v, %+v", tt.have, tt.want, delta, next, tt.delta, tt.next)
			}
		})
	}
}

// Whatever order snapshots come in, each delta is a valid event, the deltas
// add up to what next says was emitted, and input and output total the
// largest snapshot seen: every token lands once.
func TestGrowCountsEveryTokenOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var have, sum budget.UsageEvent
		var maxIn, maxOut int64
		for range 1 + r.IntN(8) {
			in, out := r.Int64N(1000), r.Int64N(1000)
			cr := r.Int64N(in + 1)
			want := ev(in, cr, r.Int64N(in-cr+1), out, r.Int64N(out+1))
			maxIn, maxOut = max(maxIn, in), max(maxOut, out)
			var delta budget.UsageEvent
			delta, have = usagedelta.Grow(have, want)
			if err := delta.Validate(); err != nil {
				t.Fatalf("invalid delta %+v from %+v: %v", delta, want, err)
			}
			sum = usagedelta.Add(sum, delta)
		}
		sum.Model = have.Model
		if sum != have || sum.InputTokens != maxIn || sum.OutputTokens != maxOut {
			t.Fatalf("deltas sum to %+v; next says %+v; largest snapshot %d in, %d out", sum, have, maxIn, maxOut)
		}
	}
}

func TestMinKeepsAValidEvent(t *testing.T) {
	got := usagedelta.Min(ev(100, 60, 30, 50, 40), ev(80, 70, 5, 60, 10))
	if want := ev(80, 60, 5, 50, 10); got != want {
		t.Fatalf("Min = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
}
