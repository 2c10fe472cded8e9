package replay_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// BenchmarkReplaySharedCorpus replays the whole shared corpus (1,960 runs,
// 21,623 calls counting each totals-only run as one) under a $1.00 cap, and
// reports calls replayed per second. Parsing is not timed.
func BenchmarkReplaySharedCorpus(b *testing.B) {
	runs, err := replay.ParseFile("../../shared/replay/replay.jsonl")
	if errors.Is(err, fs.ErrNotExist) {
		b.Skip("shared corpus not beside the repository:", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	prices := pricing.Builtin()
	cfg := capAt("1.00", "0.50")
	calls := 0
	b.ReportAllocs()
	for b.Loop() {
		rep, err := replay.Replay(cfg, prices, runs)
		if err != nil {
			b.Fatal(err)
		}
		calls += rep.Summary.Calls
	}
	b.ReportMetric(float64(calls)/b.Elapsed().Seconds(), "calls/s")
}
