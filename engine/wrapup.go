package engine

import (
	"fmt"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// The wrap-up turn (wrapUp:): once a task's budget passes its WARNING line,
// or when the request the agent is sending is the last of its size that
// the budget can admit, that request is turned, at Purser's door, into one
// tool-free "summarise what is done and what remains, then stop" request
// (WireGrant.WrapUp), once per task. Its reply is kept and written into
// STATUS.md when the task stops: a soft landing before the spec's HARD
// stop, never instead of it — the wrap-up is admitted like any request
// (a HARD cap refuses it too), and nothing else changes.

// WrapUpInstruction is what the wrap-up turn asks the model.
const WrapUpInstruction = "Purser: the budget for this task is nearly spent. Do not call any tool. " +
	"Summarise, briefly, what is done and what remains to be done (files, failing checks, next steps), then stop."

// wrapUpOutputTokens bounds the wrap-up reply.
const wrapUpOutputTokens = 2048

// maxWrapUpBytes bounds what STATUS.md keeps of the wrap-up reply.
const maxWrapUpBytes = 16 << 10

// wrapUpDue says whether this request should be the task's wrap-up turn,
// and why; next is the request's worst case, the size of the request after
// it.
func (w *wireAdmitter) wrapUpDue(next budget.Amount) (string, bool) {
	t := w.t
	if !t.task.Degrade.WrapUp {
		return "", false
	}
	t.mu.Lock()
	asked := t.wrapUpAsked
	t.mu.Unlock()
	if asked {
		return "", false
	}
	for c := t.budget; c != nil; c = c.Parent() {
		st := c.Status()
		if st.PastWarningLine || st.Tier >= budget.Warning && !warningLineSet(c.Config()) {
			return fmt.Sprintf("the %s budget passed its WARNING line (%s)", c.Scope(), st.Cause), true
		}
	}
	// This request is held already: what is left is what the next one
	// would get.
	if !next.FitsIn(t.budget.Available()) {
		return "the next request of this size would not fit under the hard cap", true
	}
	return "", false
}

// warningLineSet reports whether a budget sets any warning threshold.
func warningLineSet(c budget.Config) bool {
	return c.Warning.USD != nil || c.Warning.Tokens != nil || c.Warning.TimeMinutes != nil
}

// askWrapUp turns the grant, of a request admitted for maxOut tokens of
// output, into the wrap-up turn.
func (w *wireAdmitter) askWrapUp(grant *purser.WireGrant, why string, maxOut int64) {
	t := w.t
	t.mu.Lock()
	asked := t.wrapUpAsked
	t.wrapUpAsked = true
	t.mu.Unlock()
	if asked {
		return // another request of the call took it
	}
	grant.WrapUp = WrapUpInstruction
	if maxOut > wrapUpOutputTokens {
		grant.MaxOutputTokens = wrapUpOutputTokens
	}
	grant.Actions = append(grant.Actions, "wrap-up turn: "+why+"; a tool-free summary of what is done and what remains, for STATUS.md")
	grant.WrapUpDone = func(text string) {
		text = redact.String(strings.TrimSpace(text))
		if len(text) > maxWrapUpBytes {
			text = strings.ToValidUTF8(text[:maxWrapUpBytes], "") + " …"
		}
		t.mu.Lock()
		t.wrapUpText = text
		t.mu.Unlock()
	}
	t.log.Info("wrap-up turn asked", "call", w.pc.kind, "why", why)
	t.e.emit(t, purser.Event{Type: purser.EventWarning, Call: w.pc.kind, Message: "wrap-up turn: " + why})
}

// withWrapUp adds the agent's wrap-up reply, if one came, to STATUS.md as
// rendered: quoted, since it is the model's words, not Purser's.
func (t *taskRun) withWrapUp(statusMD []byte) []byte {
	t.mu.Lock()
	text := t.wrapUpText
	t.mu.Unlock()
	if text == "" {
		return statusMD
	}
	var b strings.Builder
	b.Write(statusMD)
	if len(statusMD) > 0 && statusMD[len(statusMD)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("\n## The agent's wrap-up\n\nAsked for by the wrap-up turn (wrapUp:) before the hard stop; the model's own words:\n\n")
	for _, line := range strings.Split(text, "\n") {
		b.WriteString("> " + line + "\n")
	}
	return []byte(b.String())
}
