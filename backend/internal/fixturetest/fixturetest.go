// Package fixturetest feeds captured agent-CLI output to a backend's parser,
// for the backends' golden tests.
package fixturetest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// Feed reads testdata/name line by line into feed and totals the usage it
// returns. A line the parser refuses, or an invalid event, fails the test.
func Feed(t testing.TB, name string, feed func([]byte) ([]budget.UsageEvent, error)) budget.Totals {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var tot budget.Totals
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		evs, err := feed(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatalf("%s: invalid event %+v: %v", name, ev, err)
			}
			tot.Add(ev)
		}
	}
	return tot
}
