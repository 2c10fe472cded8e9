package report_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/report"
)

// Issue 23 #11: terminal escapes an agent (or a validator it broke) prints
// never reach STATUS.md or BUDGET.md, which users cat in a terminal: no
// screen clear, no OSC 52 clipboard write, no 8-bit CSI, whichever field
// carries them; the text around them is kept.
func TestArtifactsCarryNoTerminalEscapes(t *testing.T) {
	const (
		clear     = "\x1b[2J\x1b[H"
		clipboard = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
	)
	r := blockedReport(t)
	r.Task.Goal = "Fix it" + clear + " now"
	r.Iterations[1].Validators[0].Output = "--- FAIL" + clear + "\nvisible" + clipboard + " line\x9b31m"
	r.Calls[5].Error = "agent said" + clipboard + " bye"
	r.Calls[4].Note = "note" + clear
	r.Calls[4].Model = "local" + clear + "-llm"
	r.Cause = errors.New("backend said" + clipboard)
	r.Degrades[0].Detail = "tier" + clear
	r.Usage = append(r.Usage, purser.CallUsage{CallID: "c6", Iteration: 3, Kind: purser.CallMain, Model: "m", Agent: "sub" + clipboard})
	for name, out := range map[string][]byte{"STATUS.md": report.StatusMD(r), "BUDGET.md": report.BudgetMD(r)} {
		s := string(out)
		for _, bad := range []string{"\x1b", "\x07", "\x9b", "\u009b", "]52;"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s carries %q:\n%q", name, bad, s)
			}
		}
	}
	status := string(report.StatusMD(r))
	for _, kept := range []string{"Fix it now", "visible line", "agent said bye"} {
		if !strings.Contains(status, kept) {
			t.Errorf("STATUS.md lost %q:\n%s", kept, status)
		}
	}
}
