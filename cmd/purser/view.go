package main

import (
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
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/tui"
)

// liveView shows what the engine does: on a terminal, a live view with a
// bar per configured metric; elsewhere, one plain line per event (usage
// events excepted: they are many).
type liveView struct {
	out  io.Writer
	mu   sync.Mutex
	prog *tea.Program
	feed chan engine.Event
	done chan struct{}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb"
}

// newLiveView shows tasks on out. interrupt stops the run gracefully; on a
// terminal, Ctrl+C calls it, and a second Ctrl+C quits at once.
func newLiveView(out io.Writer, tasks []purser.Task, runBudget *budget.Config, interrupt func()) *liveView {
	v := &liveView{out: out}
	if isTerminal(out) {
		var presses atomic.Int32
		onCtrlC := func() {
			if presses.Add(1) == 1 {
				interrupt()
				return
			}
			v.prog.Kill() // restores the terminal
			os.Exit(exitInterrupted)
		}
		model := tui.New(tasks, runBudget, os.Getenv("NO_COLOR") == "", onCtrlC)
		v.prog = tea.NewProgram(model, tea.WithOutput(out), tea.WithoutSignalHandler())
		v.feed = make(chan engine.Event, 4096)
		v.done = make(chan struct{})
	}
	return v
}

// start begins showing; the returned function ends it, leaving the last
// frame on the screen.
func (v *liveView) start() func() {
	if v.prog == nil {
		return func() {}
	}
	go func() {
		_, _ = v.prog.Run()
		close(v.done)
	}()
	go func() {
		for ev := range v.feed {
			v.prog.Send(tui.EventMsg(ev))
		}
		v.prog.Send(tui.DoneMsg{})
	}()
	return func() {
		close(v.feed)
		<-v.done
	}
}

func (v *liveView) observe(ev engine.Event) {
	if v.prog != nil {
		select {
		case v.feed <- ev:
		default:
			// A slow terminal must never stall a backend: only usage updates
			// are dropped; every other event waits its turn.
			if ev.Type != "usage" {
				v.feed <- ev
			}
		}
		return
	}
	if ev.Type == "usage" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.out, "%s %s  %s  [%s]\n", time.Now().Format("15:04:05"), ev.TaskID, redact.String(ev.Message), summary(ev.Status))
}

// summary is a budget status in one short line.
func summary(st budget.Status) string {
	parts := []string{strings.ToUpper(st.Tier.String())}
	money := st.UsedUSD.String()
	switch st.USDSource {
	case budget.SourceUnknown:
		money = "unknown"
	case budget.SourcePartial:
		money = "≥" + money
	case budget.SourceEstimated:
		money += " est."
	}
	parts = append(parts, money, fmt.Sprintf("%d tok", st.UsedTokens), st.UsedTime.Round(time.Second/10).String(),
		fmt.Sprintf("%d iter", st.UsedIterations))
	return strings.Join(parts, " · ")
}
