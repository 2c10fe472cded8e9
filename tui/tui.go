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
	// warning stays on the task's block once given (a call on a model
	// with no price), where the next event would replace last at once.
	warning string
	seen    bool
}

// Model is the bubbletea model of the live view.
type Model struct {
	rows      []*row
	byID      map[string]*row
	runBudget *budget.Config
	color     bool
	interrupt func()
	stopping  bool
	height    int // the terminal's, once known: the frame never grows past it
	sandbox   string
}

// SetSandbox sets the run's line on the box, shown under the totals: a line
// that says anything runs unboxed is in the warning colour, where it is seen.
func (m *Model) SetSandbox(line string) { m.sandbox = line }

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
		if msg.Type == purser.EventWarning {
			r.warning = shorten(redact.Display(msg.Message), warningWidth)
		}
		if msg.Type != purser.EventUsage {
			r.last = redact.Display(msg.Message)
		}
	case tea.WindowSizeMsg:
		m.height = msg.Height
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

// keyHint is shown from the start, so nobody has to guess how to stop.
const keyHint = "q or Ctrl+C: stop gracefully, tasks stay resumable · again: quit at once"

// Render returns the view as text: the run's budget and totals, a block per
// running task, a line per finished one, the pending ones folded into a
// count, and the key hint. It never grows past the terminal's height, so
// each frame is drawn in place.
func (m *Model) Render() string {
	var head, running, finished []string
	if m.run() != nil && m.runBudget != nil {
		head = append(head, m.block("run budget", "", *m.runBudget, *m.run()))
	}
	head = append(head, m.totals())
	if m.sandbox != "" {
		color := tierColor[budget.Optimal]
		if strings.Contains(m.sandbox, "unboxed") {
			color = tierColor[budget.Warning]
		}
		head = append(head, m.paint(m.sandbox, color, false)+"\n")
	}
	var pending []string
	for _, r := range m.rows {
		title := r.task.ID
		if m.color {
			title = bold.Render(title)
		}
		switch {
		case r.state == purser.StatePending:
			pending = append(pending, r.task.ID)
		case r.state == purser.StateRunning:
			last := r.last
			if r.warning != "" && r.warning != r.last {
				last = m.paint(r.warning, tierColor[budget.Warning], false) + "\n  " + r.last
			}
			running = append(running, m.block(fmt.Sprintf("%s  %s", title, r.state), last, r.task.Budget, r.status))
		default:
			why := ""
			if r.status.Tier != budget.Optimal {
				why = " by " + r.status.Cause.String()
			}
			finished = append(finished, fmt.Sprintf("%s  %s%s  [%s]\n", title, r.state, why, Summary(r.status)))
		}
	}
	var tail []string
	if len(finished) > 0 {
		tail = append(tail, strings.Join(finished, "")+"\n")
	}
	if len(pending) > 0 {
		names := pending
		if len(names) > 5 {
			names = append(names[:5:5], "…")
		}
		tail = append(tail, fmt.Sprintf("%d pending: %s\n", len(pending), strings.Join(names, ", ")))
	}
	if m.stopping {
		tail = append(tail, m.paint("stopping: the calls in flight are being cancelled; tasks stay resumable (press Ctrl+C again to quit at once)\n", "3", false))
	} else {
		tail = append(tail, m.paint(keyHint+"\n", "8", false))
	}
	return m.fit(head, running, tail)
}

// fit joins the frame's parts, leaving out running tasks' blocks (said in a
// line) when the whole would be taller than the terminal.
func (m *Model) fit(head, running, tail []string) string {
	lines := func(parts []string) int {
		n := 0
		for _, p := range parts {
			n += strings.Count(p, "\n")
		}
		return n
	}
	shown := running
	if m.height > 0 {
		room := m.height - lines(head) - lines(tail) - 1
		for len(shown) > 0 && lines(shown) > room {
			shown = shown[:len(shown)-1]
		}
	}
	parts := append(append([]string{}, head...), shown...)
	if hidden := len(running) - len(shown); hidden > 0 {
		parts = append(parts, fmt.Sprintf("(%d more running, not shown: the terminal is too short)\n", hidden))
	}
	return strings.Join(append(parts, tail...), "")
}

// totals is the run's row: its tasks by state and what they spent together.
func (m *Model) totals() string {
	byState := map[purser.TaskState]int{}
	var usd budget.USD
	var tokens int64
	known, unknown := false, false
	for _, r := range m.rows {
		byState[r.state]++
		usd = usd.Plus(r.status.UsedUSD)
		tokens = budget.SatAdd(tokens, r.status.UsedTokens)
		switch r.status.USDSource {
		case budget.SourceUnknown:
			unknown = unknown || r.seen
		case budget.SourcePartial:
			known, unknown = true, true
		default:
			known = known || r.status.UsedUSD > 0
		}
	}
	source := budget.SourceReported
	switch {
	case unknown && known:
		source = budget.SourcePartial
	case unknown:
		source = budget.SourceUnknown
	}
	var states []string
	for _, st := range []purser.TaskState{purser.StateRunning, purser.StatePending, purser.StateDone, purser.StateBlocked, purser.StateFailed} {
		if n := byState[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	return fmt.Sprintf("all %d tasks: %s · %s · %d tok\n\n", len(m.rows), strings.Join(states, ", "), budget.FormatUSD(usd, source), tokens)
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
		bar, ok := markedBar(cfg, st, metric)
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

// warningWidth bounds a warning on a task's block: the full text is in the
// log and on stderr, and a frame must not grow past the terminal.
const warningWidth = 160

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// markedBar is a metric's bar against its hard cap (or its first threshold)
// with the optimal and warning lines marked on it, O and W, so how near the
// next tier is can be seen at a glance.
func markedBar(cfg budget.Config, st budget.Status, metric budget.Metric) (string, bool) {
	bar, ok := report.BarFor(cfg, st, metric)
	if !ok {
		return "", false
	}
	limit, set := cfg.Threshold(budget.Hard, metric)
	if !set || limit <= 0 || !strings.HasPrefix(bar, "[") {
		return bar, true
	}
	cells := []rune(bar)
	width := strings.IndexRune(bar, ']') - 1
	for _, line := range []struct {
		tier budget.Tier
		mark rune
	}{{budget.Optimal, 'O'}, {budget.Warning, 'W'}} {
		if v, ok := cfg.Threshold(line.tier, metric); ok && v < limit {
			if i := 1 + int(v*int64(width)/limit); i >= 1 && i <= width {
				cells[i] = line.mark
			}
		}
	}
	return string(cells), true
}
