// Package tui is Purser's live terminal view: per task, its state, its tier
// and one bar per configured metric, moving as usage streams in.
package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/report"
)

// EventMsg carries an engine event into the view.
type EventMsg purser.Event

// DoneMsg ends the view, leaving its last frame on the screen.
type DoneMsg struct{}

type row struct {
	task   purser.Task
	state  purser.TaskState
	status budget.Status
	run    *budget.Status
	last   string
	seen   bool
}

// Model is the bubbletea model of the live view.
type Model struct {
	rows      []*row
	byID      map[string]*row
	runBudget *budget.Config
	color     bool
	interrupt func()
	stopping  bool
}

// New returns a view of tasks. color false renders no colours (NO_COLOR).
// interrupt is called on every Ctrl+C (or q).
func New(tasks []purser.Task, runBudget *budget.Config, color bool, interrupt func()) *Model {
	m := &Model{byID: map[string]*row{}, runBudget: runBudget, color: color, interrupt: interrupt}
	for _, t := range tasks {
		r := &row{task: t, state: purser.StatePending}
		m.rows = append(m.rows, r)
		m.byID[t.ID] = r
	}
	return m
}

// Init starts nothing.
func (m *Model) Init() tea.Cmd { return nil }

// Update applies an event, a key or the end.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case EventMsg:
		r := m.byID[msg.TaskID]
		if r == nil {
			return m, nil
		}
		r.seen = true
		r.status, r.run = msg.Status, msg.Run
		if r.state == purser.StatePending {
			r.state = purser.StateRunning
		}
		switch msg.Type {
		case purser.EventStop:
			r.state = msg.State
		case purser.EventNotStarted:
			r.state = purser.StatePending
		}
		if msg.Type != purser.EventUsage {
			r.last = redact.Display(msg.Message)
		}
	case tea.KeyPressMsg:
		if k := msg.String(); k == "ctrl+c" || k == "q" {
			m.stopping = true
			if m.interrupt != nil {
				m.interrupt() // the first stops gracefully; the caller decides what a second does
			}
		}
	case DoneMsg:
		return m, tea.Quit
	}
	return m, nil
}

var (
	tierColor = map[budget.Tier]string{budget.Optimal: "2", budget.Warning: "3", budget.Hard: "1"}
	bold      = lipgloss.NewStyle().Bold(true)
)

func (m *Model) paint(s string, color string, strong bool) string {
	if !m.color {
		return s
	}
	st := lipgloss.NewStyle().Foreground(lipgloss.Color(color))
	if strong {
		st = st.Bold(true)
	}
	return st.Render(s)
}

// View renders every task.
func (m *Model) View() tea.View { return tea.NewView(m.Render()) }

// Render returns the view as text.
func (m *Model) Render() string {
	var b strings.Builder
	if m.run() != nil && m.runBudget != nil {
		b.WriteString(m.block("run budget", "", *m.runBudget, *m.run()))
	}
	for _, r := range m.rows {
		title := r.task.ID
		if m.color {
			title = bold.Render(title)
		}
		state := string(r.state)
		head := fmt.Sprintf("%s  %s", title, state)
		b.WriteString(m.block(head, r.last, r.task.Budget, r.status))
	}
	if m.stopping {
		b.WriteString(m.paint("stopping: the calls in flight are being cancelled; tasks stay resumable (press Ctrl+C again to quit at once)\n", "3", false))
	}
	return b.String()
}

func (m *Model) run() *budget.Status {
	for _, r := range m.rows {
		if r.run != nil {
			return r.run
		}
	}
	return nil
}

func (m *Model) block(head, last string, cfg budget.Config, st budget.Status) string {
	var b strings.Builder
	tier := strings.ToUpper(st.Tier.String())
	fmt.Fprintf(&b, "%s  %s", head, m.paint(tier, tierColor[st.Tier], true))
	if st.Tier != budget.Optimal {
		fmt.Fprintf(&b, " by %s", st.Cause)
	}
	b.WriteString("\n")
	for _, metric := range budget.Metrics {
		bar, ok := report.BarFor(cfg, st, metric)
		if !ok {
			continue
		}
		used := metric.Format(st.Used(metric))
		switch {
		case metric == budget.Money && st.USDSource == budget.SourceUnknown:
			used, bar = "unknown", "not enforced: no dollar figure is known"
		case metric == budget.Money:
			used = budget.FormatUSD(st.UsedUSD, st.USDSource)
		case metric == budget.Time:
			used = st.UsedTime.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  %-10s %s  %s\n", metric, m.paint(bar, tierColor[cfg.MetricTier(metric, st.Used(metric))], false), used)
	}
	if last != "" {
		fmt.Fprintf(&b, "  %s\n", last)
	}
	b.WriteString("\n")
	return b.String()
}
