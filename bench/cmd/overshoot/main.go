// Command overshoot prints how far past a shared hard cap 64 concurrent
// tasks spend, with Purser's reservations and with check-then-record.
package main

import (
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/purser-dev/purser/bench"
)

func main() {
	tasks := flag.Int("tasks", 64, "concurrent tasks sharing the run budget")
	seeds := flag.Int("seeds", 5, "runs per row")
	flag.Parse()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cap (tokens)\tmax call\tlatency\tPurser: max overshoot\tcheck-then-record: max overshoot\tcheck-then-record: mean overshoot\t")
	for _, row := range []struct {
		cap, call int64
		lat       time.Duration
	}{{1_000_000, 16_000, 2 * time.Millisecond}, {200_000, 16_000, 2 * time.Millisecond}, {1_000_000, 64_000, 5 * time.Millisecond}, {5_000_000, 8_000, time.Millisecond}} {
		var pMax, nMax, nSum float64
		for s := range *seeds {
			p := bench.OvershootParams{Tasks: *tasks, Cap: row.cap, MaxCall: row.call, MaxLatency: row.lat, Seed: uint64(s + 1)}
			pMax = max(pMax, bench.Purser(p).Share(row.cap)*100)
			n := bench.Naive(p).Share(row.cap) * 100
			nMax, nSum = max(nMax, n), nSum+n
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.2f%%\t%.2f%%\t%.2f%%\t\n", row.cap, row.call, row.lat, pMax, nMax, nSum/float64(*seeds))
	}
	tw.Flush()
}
