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
	"github.com/purser-dev/purser/pricing"
)

var builtin = pricing.Builtin()

// Price prices an event the way the engine records it with the built-in
// catalogue: parsers report tokens, and the engine estimates their dollars.
func Price(ev budget.UsageEvent) budget.UsageEvent { return builtin.Estimate(ev) }

// Events reads testdata/name line by line into feed and returns the usage
// it reports, as reported. A line the parser refuses, an invalid event, or an
// event a parser priced itself (pricing is the engine's) fails the test.
func Events(t testing.TB, name string, feed func([]byte) ([]budget.UsageEvent, error)) []budget.UsageEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []budget.UsageEvent
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
			if ev.CostSource == budget.CostEstimated {
				t.Fatalf("%s: the parser estimated %+v itself; pricing is the engine's", name, ev)
			}
		}
		out = append(out, evs...)
	}
	return out
}

// Feed totals the Events of testdata/name, each priced by Price as the
// engine records it.
func Feed(t testing.TB, name string, feed func([]byte) ([]budget.UsageEvent, error)) budget.Totals {
	t.Helper()
	var tot budget.Totals
	for _, ev := range Events(t, name, feed) {
		tot.Add(Price(ev))
	}
	return tot
}
