package advise_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

func load(t *testing.T) []replay.Run {
	t.Helper()
	runs, err := replay.ParseFile("../replay/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func usd(s string) int64 {
	v, _ := budget.ParseUSD(s)
	return int64(v)
}

// Worked by hand for group "agent" (runs a 0.90 solved, b 1.20 unsolved,
// c 0.50 solved, d 1.00 solved). Three solved runs are fewer than MinSolved,
// so all four are the basis: sorted 0.50 0.90 1.00 1.20; nearest-rank p50 is
// 0.90, p75 1.00, p95 1.20. Tokens 110 110 330 660 round up to 1000 each.
//
// Candidate caps: $0.90 (p50) stops a (exactly at its last call), b (third
// call refused) and d (second call refused, a solved run cut), saving b's
// 0.40 and d's 0.50. $1.00 (p75) stops b and d (d exactly, nothing cut),
// saving 0.40. $1.20 (p90) stops b exactly at its end, saving nothing.
func TestAdviseWorkedByHand(t *testing.T) {
	groups, err := advise.Advise(pricing.Builtin(), load(t))
	if err != nil {
		t.Fatal(err)
	}
	g := groups[0]
	if g.System != "agent" || g.Runs != 4 || g.Solved != 3 || !strings.HasPrefix(g.Basis, "all runs") {
		t.Fatalf("group = %+v", g)
	}
	money := g.Proposals[0]
	if money.Metric != budget.Money || money.Optimal != usd("0.90") || money.Warning != usd("1.00") || money.Hard != usd("1.20") {
		t.Fatalf("money proposal = %+v", money)
	}
	if tok := g.Proposals[1]; tok.Metric != budget.Tokens || tok.Optimal != 1000 || tok.Hard != 1000 {
		t.Fatalf("tokens proposal = %+v", tok)
	}
	if len(g.Proposals) != 2 {
		t.Fatalf("time proposed though not every run has a wall time: %+v", g.Proposals)
	}
	type c struct {
		cap                string
		stopped, solvedCut int
		saved              string
	}
	want := []c{{"0.90", 3, 1, "0.90"}, {"1.00", 2, 0, "0.40"}, {"1.20", 1, 0, "0"}}
	if len(g.TradeOff) != len(want) {
		t.Fatalf("trade-off = %+v", g.TradeOff)
	}
	for i, w := range want {
		got := g.TradeOff[i]
		if got.Cap != usd(w.cap) || got.Stopped != w.stopped || got.SolvedCut != w.solvedCut || int64(got.SavedUSD) != usd(w.saved) {
			t.Errorf("candidate %d = %+v, want %+v", i, got, w)
		}
	}
	cfg := advise.Config(g.Proposals, 10)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the proposal is not a valid budget: %v", err)
	}
}

func TestAdviseOutputs(t *testing.T) {
	groups, err := advise.Advise(pricing.Builtin(), load(t))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	for _, g := range groups {
		if err := advise.WriteText(&text, g); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"agent · m: 4 runs, 3 solved", "optimal $0.90", "hard $1.20", "$0.90  p50 of all", "█", "░",
		"hard: {usd: 1.2, tokens: 1000, maxIterations: 10}", "totals only: savings are lower bounds"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var svg bytes.Buffer
	if err := advise.WriteSVG(&svg, groups); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed XML: %v", err)
			}
			break
		}
	}
	for _, want := range []string{"<svg", "optimal $0.90", "hard $1.20", "solved", "unsolved", "stroke-dasharray"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

// One run is no history: the quantiles would all be its own figure, so no
// proposal is made, and the text says why.
func TestAdviseSaysWhenThereIsNotEnoughHistory(t *testing.T) {
	runs := load(t)
	for n := 1; n < advise.MinRuns; n++ {
		groups, err := advise.Advise(pricing.Builtin(), runs[:n])
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 1 || !groups[0].TooFew || len(groups[0].Proposals) != 0 {
			t.Fatalf("%d run(s): %+v, want no proposal", n, groups)
		}
		var text bytes.Buffer
		if err := advise.WriteText(&text, groups[0]); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "not enough history") || strings.Contains(text.String(), "optimal") {
			t.Fatalf("%d run(s):\n%s", n, text.String())
		}
	}
}

// Issue 23 #6: the recorded runs count calls, not Purser iterations, so the
// proposed budget's maxIterations is not read from them: the text says it
// is a default, on the line that proposes it, where every other figure is
// said to come from the runs' percentiles.
func TestProposedMaxIterationsIsSaidToBeADefault(t *testing.T) {
	groups, err := advise.Advise(pricing.Builtin(), load(t))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := advise.WriteText(&text, groups[0]); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(text.String(), "\n") {
		if strings.Contains(l, "maxIterations") {
			line = l
		}
	}
	want := "maxIterations: " + fmt.Sprint(advise.DefaultMaxIterations) + "}  # a default, not from the runs"
	if !strings.Contains(line, want) {
		t.Fatalf("the maxIterations line %q does not say it is a default (%q):\n%s", line, want, text.String())
	}
	// What is printed is still a budget that reads back.
	var yamlText strings.Builder
	for _, l := range strings.Split(text.String()[strings.Index(text.String(), "as a budget:")+len("as a budget:"):], "\n") {
		yamlText.WriteString(strings.TrimPrefix(l, "    ") + "\n")
	}
	if _, err := config.ParseBudget("proposal.yaml", []byte(yamlText.String())); err != nil {
		t.Fatalf("the proposal does not read back as a budget: %v\n%s", err, yamlText.String())
	}
}
