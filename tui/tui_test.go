package tui_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/tui"
)

func usd(s string) *budget.USD {
	v, _ := budget.ParseUSD(s)
	return &v
}

func view(color bool) (*tui.Model, *int) {
	iters := 8
	cfg := budget.Config{Optimal: budget.Limits{USD: usd("1")}, Hard: budget.HardLimits{USD: usd("2"), MaxIterations: &iters}}
	interrupts := 0
	m := tui.New([]purser.Task{{ID: "t1", Budget: cfg}}, nil, color, func() { interrupts++ })
	m.Update(tui.EventMsg(purser.Event{TaskID: "t1", Type: "usage", Status: budget.Status{Tier: budget.Warning, Cause: budget.Money, UsedUSD: *usd("1.5"), UsedIterations: 2}}))
	return m, &interrupts
}

// One bar per configured metric, moving with the events; tokens and time are
// not configured here, so they have no bar.
func TestViewShowsABarPerConfiguredMetric(t *testing.T) {
	m, _ := view(false)
	out := m.Render()
	for _, want := range []string{"t1  RUNNING  WARNING by money", "money      [###############-----]  75.0% of hard  $1.50", "iterations [#####---------------]  25.0% of hard  2"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tokens") || strings.Contains(out, "time ") {
		t.Errorf("unconfigured metrics shown:\n%s", out)
	}
	m.Update(tui.EventMsg(purser.Event{TaskID: "t1", Type: "stop", State: purser.StateBlocked, Message: "BLOCKED: cap", Status: budget.Status{Tier: budget.Hard, Cause: budget.Money, UsedUSD: *usd("2")}}))
	if out := m.Render(); !strings.Contains(out, "t1  BLOCKED  HARD by money") || !strings.Contains(out, "[####################] 100.0% of hard") {
		t.Errorf("after stop:\n%s", out)
	}
}

func TestNoColorMeansNoEscapes(t *testing.T) {
	plain, _ := view(false)
	if strings.Contains(plain.Render(), "\x1b[") {
		t.Fatal("NO_COLOR view has ANSI escapes")
	}
	colored, _ := view(true)
	if !strings.Contains(colored.Render(), "\x1b[") {
		t.Fatal("colour view has no ANSI escapes")
	}
}

func TestUnknownMoneyIsNeverZero(t *testing.T) {
	m, _ := view(false)
	m.Update(tui.EventMsg(purser.Event{TaskID: "t1", Type: "usage", Status: budget.Status{USDSource: budget.SourceUnknown}}))
	if out := m.Render(); !strings.Contains(out, "unknown") || strings.Contains(out, "$0.00") {
		t.Fatalf("unknown money shown as:\n%s", out)
	}
}
