package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
)

// liveView shows what the engine does: one plain line per event (usage
// events excepted, they are many).
type liveView struct {
	out   io.Writer
	mu    sync.Mutex
	tasks map[string]purser.Task
}

func newLiveView(out io.Writer, tasks []purser.Task) *liveView {
	v := &liveView{out: out, tasks: map[string]purser.Task{}}
	for _, t := range tasks {
		v.tasks[t.ID] = t
	}
	return v
}

// start begins showing; the returned function ends it.
func (v *liveView) start() func() { return func() {} }

func (v *liveView) observe(ev engine.Event) {
	if ev.Type == "usage" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.out, "%s %s  %s  [%s]\n", time.Now().Format("15:04:05"), ev.TaskID, ev.Message, summary(ev.Status))
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
