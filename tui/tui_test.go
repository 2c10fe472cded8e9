package tui_test

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

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
	for _, want := range []string{"t1  RUNNING  WARNING by money", "money      [##########O####-----]  75.0% of hard  $1.50 (reported)", "iterations [#####---------------]  25.0% of hard  2"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tokens") || strings.Contains(out, "time ") {
		t.Errorf("unconfigured metrics shown:\n%s", out)
	}
	m.Update(tui.EventMsg(purser.Event{TaskID: "t1", Type: "stop", State: purser.StateBlocked, Message: "BLOCKED: cap", Status: budget.Status{Tier: budget.Hard, Cause: budget.Money, UsedUSD: *usd("2")}}))
	if out := m.Render(); !strings.Contains(out, "t1  BLOCKED by money  [HARD · $2.00 (reported)") {
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

// Issue 10 #7: many tasks. Running tasks keep their blocks; finished ones
// take a line each; pending ones fold into a count; the run's totals have a
// row; the key hint is there from the start; and the frame never grows past
// the terminal, so it is drawn in place.
func TestManyTasksFitTheTerminal(t *testing.T) {
	iters := 8
	cfg := budget.Config{Optimal: budget.Limits{USD: usd("1")}, Warning: budget.Limits{USD: usd("1.5")}, Hard: budget.HardLimits{USD: usd("2"), MaxIterations: &iters}}
	var tasks []purser.Task
	for i := range 40 {
		tasks = append(tasks, purser.Task{ID: fmt.Sprintf("task-%02d", i), Budget: cfg})
	}
	m := tui.New(tasks, nil, false, nil)
	if out := m.Render(); !strings.Contains(out, "q or Ctrl+C: stop gracefully") || !strings.Contains(out, "40 pending: task-00, task-01, task-02, task-03, task-04, …") {
		t.Fatalf("before any event:\n%s", out)
	}
	for i := range 10 {
		m.Update(tui.EventMsg(purser.Event{TaskID: fmt.Sprintf("task-%02d", i), Type: purser.EventUsage, Status: budget.Status{UsedUSD: *usd("0.5"), UsedTokens: 100}}))
	}
	m.Update(tui.EventMsg(purser.Event{TaskID: "task-00", Type: purser.EventStop, State: purser.StateDone, Status: budget.Status{UsedUSD: *usd("0.5"), UsedTokens: 100}}))
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 24})
	out := m.Render()
	if n := strings.Count(out, "\n"); n > 24 {
		t.Fatalf("a %d-line frame on a 24-line terminal:\n%s", n, out)
	}
	for _, want := range []string{"all 40 tasks: 9 RUNNING, 30 PENDING, 1 DONE · $5.00 (reported) · 1000 tok", "task-00  DONE", "30 pending:",
		"more running, not shown: the terminal is too short", "q or Ctrl+C", "[#####-----O----W----]"} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q:\n%s", want, out)
		}
	}
}

// A warning given before spending (a model with no price) stays on the
// task's block after later events, cut to a line's length.
func TestWarningStaysOnTheTasksBlock(t *testing.T) {
	m, _ := view(false)
	warning := "warning: model \"sim-large\" of backend sim has no price in Purser's catalogue: " + strings.Repeat("its dollars are unknown; ", 10)
	m.Update(tui.EventMsg(purser.Event{TaskID: "t1", Type: purser.EventWarning, Message: warning}))
	m.Update(tui.EventMsg(purser.Event{TaskID: "t1", Type: purser.EventCall, Message: "main call (attempt 1) to sim-large"}))
	out := m.Render()
	if !strings.Contains(out, "warning: model \"sim-large\" of backend sim has no price") || !strings.Contains(out, "main call (attempt 1)") {
		t.Fatalf("the warning or the last event is missing:\n%s", out)
	}
	if strings.Contains(out, warning) || !strings.Contains(out, "…") {
		t.Fatalf("the warning is not cut to a line:\n%s", out)
	}
}

// The run's sandbox line is shown under the totals, once; an unboxed run's
// in the warning colour.
func TestViewShowsTheSandboxLine(t *testing.T) {
	m, _ := view(false)
	if strings.Contains(m.Render(), "sandbox") {
		t.Fatalf("a sandbox line nobody set:\n%s", m.Render())
	}
	const on = "sandbox: on (agent a boxed; validators boxed)"
	m.SetSandbox(on)
	out := m.Render()
	if strings.Count(out, on+"\n") != 1 || strings.Index(out, on) > strings.Index(out, "t1  RUNNING") {
		t.Errorf("want the line once, above the tasks:\n%s", out)
	}
	colored, _ := view(true)
	colored.SetSandbox("sandbox: off (purser.yaml sandbox: off; agents and validators run unboxed, as you)")
	boxed, _ := view(true)
	boxed.SetSandbox(on)
	warn := func(m *tui.Model) bool {
		for _, line := range strings.Split(m.Render(), "\n") {
			if strings.Contains(line, "sandbox:") {
				return strings.Contains(line, "\x1b[33m") || strings.Contains(line, "\x1b[38;5;3m")
			}
		}
		return false
	}
	if !warn(colored) || warn(boxed) {
		t.Errorf("unboxed in the warning colour: %v, boxed: %v", warn(colored), warn(boxed))
	}
}
