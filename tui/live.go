package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/mattn/go-isatty"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// Live shows what the engine does while tasks run: on a terminal, the live
// view with a bar per configured metric; elsewhere, one plain line per event
// (usage events excepted: they are many).
type Live struct {
	out  io.Writer
	json bool
	now  func() time.Time
	mu   sync.Mutex
	prog *tea.Program
	feed chan purser.Event
	done chan struct{}
}

// IsTerminal reports whether w is a terminal that can show the live view.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb"
}

// LiveOptions configures a Live view.
type LiveOptions struct {
	Tasks     []purser.Task
	RunBudget *budget.Config // the run's, or nil
	// Interrupt stops the run gracefully: on a terminal, the first Ctrl+C
	// (or q) calls it.
	Interrupt func()
	// Quit ends the process at once: a second Ctrl+C calls it, after the
	// terminal is restored.
	Quit func()
	// Sandbox is the run's line on the box (which of the agents and the
	// validators run in one, or "sandbox: off (…)"), shown under the
	// totals; "": none.
	Sandbox string
	// JSON prints every event but usage as one JSON object a line, for CI
	// and scripts, instead of the live view or plain lines.
	JSON bool
}

// NewLive returns a view of o.Tasks on out; the view is the live one when
// out is a terminal.
func NewLive(out io.Writer, o LiveOptions) *Live {
	v := &Live{out: out, now: time.Now, json: o.JSON}
	if o.JSON || !IsTerminal(out) {
		return v
	}
	var presses atomic.Int32
	onCtrlC := func() {
		if presses.Add(1) == 1 {
			if o.Interrupt != nil {
				o.Interrupt()
			}
			return
		}
		v.prog.Kill() // restores the terminal
		if o.Quit != nil {
			o.Quit()
		}
	}
	model := New(o.Tasks, o.RunBudget, os.Getenv("NO_COLOR") == "", onCtrlC)
	model.SetSandbox(o.Sandbox)
	v.prog = tea.NewProgram(model, tea.WithOutput(out), tea.WithoutSignalHandler())
	v.feed = make(chan purser.Event, 4096)
	v.done = make(chan struct{})
	return v
}

// Start begins showing; the returned function ends it, leaving the last
// frame on the screen.
func (v *Live) Start() func() {
	if v.prog == nil {
		return func() {}
	}
	go func() {
		_, _ = v.prog.Run()
		close(v.done)
	}()
	go func() {
		for ev := range v.feed {
			v.prog.Send(EventMsg(ev))
		}
		v.prog.Send(DoneMsg{})
	}()
	return func() {
		close(v.feed)
		<-v.done
	}
}

// Observe takes an engine event. It is safe to call from many goroutines.
func (v *Live) Observe(ev purser.Event) {
	if v.prog != nil {
		select {
		case v.feed <- ev:
		default:
			// A slow terminal must never stall a backend: only usage updates
			// are dropped; every other event waits its turn.
			if ev.Type != purser.EventUsage {
				v.feed <- ev
			}
		}
		return
	}
	if ev.Type == purser.EventUsage {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.json {
		_ = json.NewEncoder(v.out).Encode(eventJSON{Time: v.now().UTC(), Task: ev.TaskID, Type: ev.Type, Iteration: ev.Iteration,
			Call: ev.Call, Message: redact.String(ev.Message), State: ev.State, Budget: ev.Status, RunBudget: ev.Run})
		return
	}
	fmt.Fprintf(v.out, "%s %s  %s  [%s]\n", v.now().Format("15:04:05"), ev.TaskID, redact.Display(ev.Message), Summary(ev.Status))
}

// eventJSON is one line of `purser run --json`.
type eventJSON struct {
	Time      time.Time        `json:"time"`
	Task      string           `json:"task"`
	Type      purser.EventType `json:"type"`
	Iteration int              `json:"iteration,omitempty"`
	Call      purser.CallKind  `json:"call,omitempty"`
	Message   string           `json:"message,omitempty"`
	State     purser.TaskState `json:"state,omitempty"`
	Budget    budget.Status    `json:"budget"`
	RunBudget *budget.Status   `json:"runBudget,omitempty"`
}

// Summary is a budget status in one short line.
func Summary(st budget.Status) string {
	parts := []string{strings.ToUpper(st.Tier.String())}
	parts = append(parts, budget.FormatUSD(st.UsedUSD, st.USDSource))
	if st.ListUSD > 0 {
		parts = append(parts, budget.FormatListUSD(st.ListUSD))
	}
	parts = append(parts, fmt.Sprintf("%d tok", st.UsedTokens), st.UsedTime.Round(time.Second/10).String(),
		fmt.Sprintf("%d iter", st.UsedIterations))
	return strings.Join(parts, " · ")
}
