package report_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/replay"
	"github.com/purser-dev/purser/report"
)

// A replay's totals are printed in cents, as money is everywhere else, not
// with the seven decimals thousands of recorded costs add up to; exact
// amounts stay in --json (issue 23 #9).
func TestReplayTotalsArePrintedInCents(t *testing.T) {
	for _, tc := range []struct {
		nanos int64
		want  string
	}{
		{8_961_814_567_890, "$8961.81"}, {1_005_000_000, "$1.01"}, {1_004_999_999, "$1.00"}, {-1_005_000_000, "-$1.01"}, {0, "$0.00"},
	} {
		if got := report.Cents(budget.USD(tc.nanos)).String(); got != tc.want {
			t.Errorf("report.Cents(%d nanos) = %s, want %s", tc.nanos, got, tc.want)
		}
	}
	var b strings.Builder
	rep := replay.Report{Summary: replay.Summary{Runs: 1, RecordedUSD: 1_234_567_890, SpentUSD: 1_000_000_010, SavedUSD: 234_567_880, NaiveOvershootUSD: 5_123_456, USDSource: budget.SourceReported}}
	if err := report.WriteReplay(&b, rep); err != nil {
		t.Fatal(err)
	}
	if want := "Recorded spend $1.23 (reported); under this budget $1.00 (reported); saved $0.23 (reported).\nA check-then-spend rule would have gone $0.01 past"; !strings.Contains(b.String(), want) {
		t.Errorf("replay text:\n%s\nwant it to contain:\n%s", b.String(), want)
	}
}
