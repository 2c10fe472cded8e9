package report

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/workspace"
)

// Explanation is what purser explain says of a task, in plain words: why it
// is in its tier, what was degraded, and what to do next.
type Explanation struct {
	rec         purser.TaskRecord
	status      budget.Status
	degrades    []purser.DegradeRecord
	last        *purser.IterationRecord // the last iteration whose validators ran (lastValidated)
	unvalidated int                     // the last iteration, when it ended before its validators ran
	interrupted bool
	changes     []purser.BudgetChange // the task's budget changes, oldest first
	agents      []*group              // spend per agent, when a sub-agent spent any (explainagents.go)
}

// ExplainStore is what an explanation reads of a store.
type ExplainStore interface {
	TaskUsage
	Degrades(ctx context.Context, taskID string) ([]purser.DegradeRecord, error)
	Iterations(ctx context.Context, taskID string) ([]purser.IterationRecord, error)
}

// ReadExplanation reads what explains task id; gone says whether the
// process that owns a RUNNING task is gone (it was interrupted).
func ReadExplanation(ctx context.Context, store ExplainStore, id string, gone func(owner string) bool) (Explanation, error) {
	rec, err := store.Task(ctx, id)
	if err != nil {
		return Explanation{}, err
	}
	st, err := RecordStatus(ctx, store, rec)
	if err != nil {
		return Explanation{}, err
	}
	degrades, err := store.Degrades(ctx, id)
	if err != nil {
		return Explanation{}, err
	}
	its, err := store.Iterations(ctx, id)
	if err != nil {
		return Explanation{}, err
	}
	e := Explanation{rec: rec, status: st, degrades: degrades,
		interrupted: rec.State == purser.StateRunning && gone(rec.Owner)}
	if bc, ok := store.(interface {
		BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error)
	}); ok {
		if e.changes, err = bc.BudgetChanges(ctx, id); err != nil {
			return Explanation{}, err
		}
	}
	if e.agents, err = readAgentSpend(ctx, store, id); err != nil {
		return Explanation{}, err
	}
	e.last = lastValidated(its)
	if n := len(its); n > 0 && its[n-1].EndedAt.After(its[n-1].StartedAt) && len(its[n-1].Validators) == 0 {
		e.unvalidated = its[n-1].N
	}
	return e, nil
}

// configKey is a metric's key in a budget.
func configKey(m budget.Metric) string {
	switch m {
	case budget.Money:
		return "usd"
	case budget.Tokens:
		return "tokens"
	case budget.Time:
		return "timeMinutes"
	}
	return "maxIterations"
}

// usedMetric is a metric's use, in its unit, for people.
func usedMetric(st budget.Status, m budget.Metric) string {
	if m == budget.Money {
		return budget.FormatUSD(st.UsedUSD, st.USDSource)
	}
	return m.Format(st.Used(m))
}

// Write says the explanation on w.
func (e Explanation) Write(w io.Writer) error {
	rec, st := e.rec, e.status
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }

	// The state, in a sentence.
	state := string(rec.State)
	if e.interrupted {
		state = "RUNNING (interrupted: the process running it is gone)"
	}
	p("Task %s is %s; its budget is in tier %s.\n", rec.ID, state, strings.ToUpper(st.Tier.String()))
	if rec.Reason != "" {
		p("Why it stopped: %s.\n", strings.TrimSuffix(redact.Display(rec.Reason), "."))
	}
	e.writeTier(p)
	if err := e.writeMetrics(w); err != nil {
		return err
	}
	if err := e.writeAgents(w); err != nil {
		return err
	}
	e.writeDegrades(p)
	e.writeChanges(p)
	e.writeValidators(p)
	p("\nWhat to do next:\n")
	for _, step := range e.nextSteps() {
		p("  - %s\n", step)
	}
	return nil
}

// writeChanges says each change of the task's budget: who made it, when,
// from where, and its hard caps before and after.
func (e Explanation) writeChanges(p printf) {
	if len(e.changes) == 0 {
		return
	}
	p("\nIts budget was changed:\n")
	for _, c := range e.changes {
		by := c.By
		if by == "" {
			by = "its task file"
		}
		p("  - %s by %s (%s): %s → %s\n", c.At.UTC().Format(time.RFC3339), by, c.Source,
			CapsText(budget.CapsOf(c.From)), CapsText(budget.CapsOf(c.To)))
	}
}

// printf is how the parts of an explanation write.
type printf func(format string, args ...any)

// writeTier says the tier, and the metric that set it.
func (e Explanation) writeTier(p printf) {
	st, cfg := e.status, e.rec.Budget
	switch st.Tier {
	case budget.Optimal:
		p("\nEvery metric is below its optimal line: nothing has been degraded on its account.\n")
	case budget.Warning:
		line, _ := cfg.WarningStart(st.Cause)
		p("\nIt is in WARNING because of %s: %s used, past the line of %s where WARNING starts.\n", st.Cause, usedMetric(st, st.Cause), st.Cause.Format(line))
		if st.PastWarningLine {
			p("It has also passed its warning line, so degrade actions staged \"at: warning\" apply.\n")
		}
	case budget.Hard:
		hard, _ := cfg.Threshold(budget.Hard, st.Cause)
		p("\nIt is at HARD because of %s: %s used, at or past the hard cap of %s. No further call starts.\n", st.Cause, usedMetric(st, st.Cause), st.Cause.Format(hard))
	}
	if st.USDSource == budget.SourcePartial {
		p("Some of its dollar figures are unknown (a backend reported none and the model has no price): the money used is a lower bound.\n")
	}
	if st.USDSource == budget.SourceUnknown && st.UsedTokens > 0 {
		p("None of its dollar figures is known: money is not enforced; tokens, time and iterations are.\n")
	}
}

// writeMetrics says each metric against its lines.
func (e Explanation) writeMetrics(w io.Writer) error {
	st, cfg := e.status, e.rec.Budget
	fmt.Fprintf(w, "\nEach metric against its lines:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range budget.Metrics {
		var lines []string
		for _, t := range []budget.Tier{budget.Optimal, budget.Warning, budget.Hard} {
			if v, ok := cfg.Threshold(t, m); ok {
				lines = append(lines, t.String()+" "+m.Format(v))
			}
		}
		if len(lines) == 0 {
			fmt.Fprintf(tw, "  %s\t%s\tnot enforced (no line configured)\t\n", m, usedMetric(st, m))
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m, usedMetric(st, m), strings.Join(lines, ", "), strings.ToUpper(cfg.MetricTier(m, st.Used(m)).String()))
	}
	return tw.Flush()
}

// writeDegrades says what was degraded.
func (e Explanation) writeDegrades(p printf) {
	if len(e.degrades) == 0 {
		p("\nNothing was degraded.\n")
	} else {
		p("\nWhat was degraded, to spend less (%d action(s)):\n", len(e.degrades))
		for _, d := range e.degrades {
			p("  - iteration %d, %s call: %s — %s, because the %s budget's %s was in %s", d.Iteration, d.Call, d.Action, actionMeaning(d.Action), d.Scope, d.Metric, strings.ToUpper(d.Tier.String()))
			if d.Detail != "" {
				p(" (%s)", redact.Display(d.Detail))
			}
			p("\n")
		}
	}
}

// writeValidators says the validators' last word.
func (e Explanation) writeValidators(p printf) {
	if e.last != nil {
		var failing []string
		for _, v := range e.last.Validators {
			if !v.Passed {
				failing = append(failing, v.Name)
			}
		}
		if len(failing) == 0 {
			p("\nAt iteration %d every validator passed.\n", e.last.N)
		} else {
			p("\nAt iteration %d these validators failed: %s.\n", e.last.N, strings.Join(failing, ", "))
		}
	}
	if e.unvalidated > 0 {
		p("Iteration %d was stopped before its validators ran.\n", e.unvalidated)
	}
}

// actionMeaning says what a degrade action does.
func actionMeaning(a purser.DegradeAction) string {
	switch a {
	case purser.ShrinkContext:
		return "a smaller context (the goal, the failing output and the files the issue names)"
	case purser.RepairOnlyMode:
		return "a prompt asking only to fix the failing validators"
	case purser.DisableSelfReview:
		return "no planning or self-review calls"
	case purser.SwitchTierCheap:
		return "the backend's cheap model"
	}
	return "a degrade action"
}

// nextSteps are what the user can do about the task, in its state.
func (e Explanation) nextSteps() []string {
	rec, st := e.rec, e.status
	// The task's own files: another task sharing the workspace may have
	// STATUS.md.
	own := workspace.ArtifactsOf(rec.Workspace, rec.ID)
	statusMD := filepath.Join(rec.Workspace, own.Status)
	switch {
	case e.interrupted:
		return []string{"Continue it where it was cut: purser resume " + rec.ID + " (nothing of the dead call is left running)."}
	case rec.State == purser.StateDone && st.Tier == budget.Optimal:
		return []string{"Nothing: its validators pass, within its optimal budget."}
	case rec.State == purser.StateDone:
		return []string{
			"Nothing is needed: its validators pass.",
			fmt.Sprintf("It cost more than its optimal line on %s. If that is usual for such tasks, raise optimal.%s; `purser advise --from-db` proposes lines from your history.", st.Cause, configKey(st.Cause)),
		}
	case rec.State == purser.StateBlocked:
		steps := []string{fmt.Sprintf("Look at what the agent left, as it left it: %s has the manual steps (and the validators' state); %s beside it, the spend call by call.", statusMD, own.Budget)}
		if strings.HasPrefix(rec.Reason, purser.ErrStuck.Error()+":") {
			steps = append(steps, fmt.Sprintf("It was stuck, not out of money: the same validators kept failing and its calls changed nothing (stuckAfter). More budget would buy more of the same: change the goal, the issue text or the workspace, then: purser resume %s.", rec.ID))
		} else if st.Tier == budget.Hard {
			hard, _ := rec.Budget.Threshold(budget.Hard, st.Cause)
			steps = append(steps, fmt.Sprintf("To let it go on, raise budget.hard.%s (now %s) in a budget file outside the workspace, then: purser resume %s --budget FILE.", configKey(st.Cause), st.Cause.Format(hard), rec.ID))
			if st.Cause == budget.Money || st.Cause == budget.Tokens {
				steps = append(steps, fmt.Sprintf("Or raise its cap in the database, recorded, from outside the workspace: purser raise %s --%s N (a BLOCKED job on the queue is queued again for a worker).", rec.ID, configKey(st.Cause)))
			}
		} else if namedRefusal(rec.Reason) {
			steps = append(steps, fmt.Sprintf("A named budget its run draws from stopped it (the reason above names it): raise it with purser budgets raise NAME --file FILE, or wait for its window to reset, then: purser resume %s.", rec.ID))
		} else {
			steps = append(steps, fmt.Sprintf("Its own budget is not at HARD: the run's budget (or the next call's worst case not fitting) stopped it. Raise the run's budget (--run-budget) or the task's hard caps, then: purser resume %s --budget FILE.", rec.ID))
		}
		steps = append(steps, "Or finish it by hand from where it stopped, or make the goal smaller.")
		return steps
	case rec.State == purser.StateFailed:
		return []string{"It failed for a reason that is not the budget (above). Fix that cause (the backend, the validators, the workspace), then: purser resume " + rec.ID + ".", statusMD + " has the details."}
	case rec.State == purser.StatePending:
		return []string{"It has not finished: purser resume " + rec.ID + " continues it (or purser run " + rec.File + ")."}
	}
	return []string{"It is running in another process: watch it with purser status " + rec.ID + " or purser serve."}
}

// ExplanationJSON is an explanation as `purser explain --json` prints it:
// the figures the text puts in words, for scripts.
type ExplanationJSON struct {
	ID          string        `json:"id"`
	State       string        `json:"state"`
	Interrupted bool          `json:"interrupted"`
	Reason      string        `json:"reason"`
	RunID       string        `json:"runId"`
	Workspace   string        `json:"workspace"`
	Budget      budget.Status `json:"budget"`
	Degrades    []DegradeJSON `json:"degrades"`
	// Validators are the results of the last iteration that ran them
	// (Iteration; 0 and none when no iteration did).
	Iteration  int             `json:"iteration"`
	Validators []ValidatorJSON `json:"validators"`
	// BudgetChanges are the task's budget changes, oldest first: by whom,
	// when, from where, from and to.
	BudgetChanges []BudgetChangeJSON `json:"budgetChanges"`
	// Agents is the spend per agent when a sub-agent spent any: the main
	// agent's and each sub-agent's (empty when only the main agent spent).
	Agents []AgentSpendJSON `json:"agents"`
}

// BudgetChangeJSON is one change of a task's budget.
type BudgetChangeJSON struct {
	At     time.Time     `json:"at"`
	By     string        `json:"by"`
	Source string        `json:"source"`
	From   budget.Config `json:"from"`
	To     budget.Config `json:"to"`
}

// DegradeJSON is one degrade action taken, and why.
type DegradeJSON struct {
	Iteration int    `json:"iteration"`
	Call      string `json:"call"`
	Action    string `json:"action"`
	Tier      string `json:"tier"`
	Metric    string `json:"metric"`
	Scope     string `json:"scope"`
	Detail    string `json:"detail"`
}

// ValidatorJSON is one validator's result; Output is its tail, as stored
// (redacted), with terminal escapes removed.
type ValidatorJSON struct {
	Name     string `json:"name"`
	Passed   bool   `json:"passed"`
	ExitCode int    `json:"exitCode"`
	TimedOut bool   `json:"timedOut"`
	Output   string `json:"output"`
}

// JSON is the explanation's figures.
func (e Explanation) JSON() ExplanationJSON {
	j := ExplanationJSON{ID: e.rec.ID, State: string(e.rec.State), Interrupted: e.interrupted, Reason: redact.Display(e.rec.Reason),
		RunID: e.rec.RunID, Workspace: e.rec.Workspace, Budget: e.status, Degrades: []DegradeJSON{}, Validators: []ValidatorJSON{}, BudgetChanges: []BudgetChangeJSON{}, Agents: e.agentsJSON()}
	for _, c := range e.changes {
		j.BudgetChanges = append(j.BudgetChanges, BudgetChangeJSON{At: c.At, By: c.By, Source: c.Source, From: c.From, To: c.To})
	}
	for _, d := range e.degrades {
		j.Degrades = append(j.Degrades, DegradeJSON{Iteration: d.Iteration, Call: string(d.Call), Action: string(d.Action), Tier: d.Tier.String(),
			Metric: d.Metric.String(), Scope: d.Scope.String(), Detail: redact.Display(d.Detail)})
	}
	if e.last != nil {
		j.Iteration = e.last.N
		for _, v := range e.last.Validators {
			j.Validators = append(j.Validators, ValidatorJSON{Name: v.Name, Passed: v.Passed, ExitCode: v.ExitCode, TimedOut: v.TimedOut, Output: redact.Display(v.Output)})
		}
	}
	return j
}

// namedRefusal reports whether a BLOCKED reason is a named budget's
// refusal: `named "team" …`, or `day budget "team" …` (and week, month).
func namedRefusal(reason string) bool {
	for _, w := range []string{`named "`, `day budget "`, `week budget "`, `month budget "`} {
		if strings.Contains(reason, w) {
			return true
		}
	}
	return false
}
