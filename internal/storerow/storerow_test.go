package storerow

import (
	"database/sql"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// A time and a cost source read back as written; the zero time is stored
// as 0 and both 0 and NULL read back as the zero time; an unknown cost
// source reads as none.
func TestConversionsRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	if got := FromNanos(sql.NullInt64{Int64: Nanos(at), Valid: true}); !got.Equal(at) {
		t.Errorf("time read back %v, want %v", got, at)
	}
	if Nanos(time.Time{}) != 0 || !FromNanos(sql.NullInt64{Valid: true}).IsZero() || !FromNanos(sql.NullInt64{}).IsZero() {
		t.Error("the zero time is not stored as 0, or 0 or NULL does not read back as it")
	}
	for _, c := range []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown, budget.CostList} {
		if got := ParseCostSource(c.String()); got != c {
			t.Errorf("cost source %v read back as %v", c, got)
		}
	}
	if got := ParseCostSource("made-up"); got != budget.CostNone {
		t.Errorf("an unknown cost source read as %v, want none", got)
	}
}
