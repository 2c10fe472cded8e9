package dashboard

import (
	"testing"
	"time"
)

func TestSpendChartKeepsFirstAndLastOfALongLedger(t *testing.T) {
	var points []SpendPoint
	for i := range 10_000 {
		points = append(points, SpendPoint{At: time.Unix(int64(i), 0), Tokens: int64(i)})
	}
	got := thin(points, maxSpendPoints)
	if len(got) != maxSpendPoints || got[0].Tokens != 0 || got[len(got)-1].Tokens != 9999 {
		t.Fatalf("thin: %d points from %d to %d", len(got), got[0].Tokens, got[len(got)-1].Tokens)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Tokens <= got[i-1].Tokens {
			t.Fatalf("points out of order at %d", i)
		}
	}
	if short := thin(points[:5], maxSpendPoints); len(short) != 5 {
		t.Errorf("a short ledger is kept whole, got %d points", len(short))
	}
}
