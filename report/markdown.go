package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/workspace"
)

// Report is everything STATUS.md and BUDGET.md say about a task.
type Report struct {
	Task       purser.Task
	State      purser.TaskState
	Cause      error // why it stopped; nil when DONE
	Status     budget.Status
	RunStatus  *budget.Status
	RunBudget  budget.Config
	Iterations []purser.IterationRecord
	Calls      []purser.CallRecord
	Usage      []purser.CallUsage // per call and model
	// Prices says which price table and rates priced the estimates (and why
	// a model had none), summed per source.
	Prices   []purser.PriceSourceUsage
	Degrades []purser.DegradeRecord
	// InGitRepo says the workspace lies in a git repository, so the manual
	// steps can point at git status and git diff.
	InGitRepo bool
	// DoneNote says how a DONE task got there when it is not the plain
	// case (its validators passed once more after a hard cap stopped the
	// call that fixed it).
	DoneNote string
	// Forecast is the task's last spend forecast, nil when it had none.
	Forecast *purser.SpendForecast
	// Sandbox is the one line saying whether the agent and the validators
	// ran in a box ("": sandbox: off, as for every task before boxes).
	Sandbox string
	// BudgetFile is the name of the task's BUDGET.md in its workspace
	// (workspace.ArtifactsOf; "": BUDGET.md), which STATUS.md points at.
	BudgetFile string
}

// budgetFile is the name STATUS.md gives the task's BUDGET.md.
func (r Report) budgetFile() string {
	if r.BudgetFile == "" {
		return workspace.BudgetFile
	}
	return r.BudgetFile
}

// sandboxLine is the files' line on the box.
func (r Report) sandboxLine() string {
	if r.Sandbox == "" {
		return SandboxOff
	}
	return r.Sandbox
}

// SandboxOff is the line of a task whose agent and validators ran unboxed.
const SandboxOff = "sandbox: off (the agent and the validators ran as you, with your environment, files, processes and network)"

// Load reads a task's history from the store.
func Load(ctx context.Context, s interface {
	purser.JournalReader
	purser.LedgerReader
}, taskID string) (Report, error) {
	var r Report
	var err error
	if r.Iterations, err = s.Iterations(ctx, taskID); err != nil {
		return r, err
	}
	if r.Calls, err = s.Calls(ctx, taskID); err != nil {
		return r, err
	}
	if r.Usage, err = s.CallUsage(ctx, taskID); err != nil {
		return r, err
	}
	if r.Prices, err = s.PriceSources(ctx, taskID); err != nil {
		return r, err
	}
	if r.Degrades, err = s.Degrades(ctx, taskID); err != nil {
		return r, err
	}
	return r, nil
}

type group struct {
	key    string
	calls  map[string]bool
	totals budget.Totals
	cached int64 // cache-read tokens, part of totals.Tokens
}

// groupUsage sums the calls' usage by a key, in first-seen order.
func groupUsage(usage []purser.CallUsage, key func(purser.CallUsage) string) []*group {
	var order []*group
	byKey := map[string]*group{}
	for _, u := range usage {
		k := key(u)
		g := byKey[k]
		if g == nil {
			g = &group{key: k, calls: map[string]bool{}}
			byKey[k] = g
			order = append(order, g)
		}
		g.calls[u.CallID] = true
		g.totals.Merge(u.Totals)
		g.cached += u.CachedTokens
	}
	return order
}

// MainAgent names the main agent where usage is broken down by agent (its
// sub-agents go by the names their CLI gave them).
const MainAgent = "(main agent)"

// agentName is who spent a call's usage, for the per-agent breakdown.
func agentName(u purser.CallUsage) string {
	if u.Agent == "" {
		return MainAgent
	}
	return oneLine(u.Agent)
}

// BudgetMD renders BUDGET.md: spend per metric, per iteration, per call
// kind, per model, per sub-agent (where one spent any) and per call, every dollar figure labelled reported,
// estimated or unknown; the degrade actions taken and when; the retries.
func BudgetMD(r Report) []byte {
	var b bytes.Buffer
	budgetHeader(&b, r)
	b.WriteString("\n## Per metric\n\n")
	metricTable(&b, r.Task.Budget, r.Status)
	if r.RunStatus != nil {
		b.WriteString("\nThe run's budget, shared by its tasks:\n\n")
		metricTable(&b, r.RunBudget, *r.RunStatus)
	}
	usageSections(&b, r.Usage)
	b.WriteString(subAgentCaps(r.Task.SubAgents))
	callsSection(&b, r.Calls, r.Usage)
	pricesSection(&b, r.Prices)
	retriesSection(&b, r.Calls)
	degradesSection(&b, r.Degrades)
	return []byte(redact.Display(b.String()))
}

// budgetHeader writes BUDGET.md's title and its first lines: the state,
// the tier and the money, and what the money figure cannot say.
func budgetHeader(b *bytes.Buffer, r Report) {
	fmt.Fprintf(b, "# Budget: task %s\n\n", r.Task.ID)
	fmt.Fprintf(b, "State: **%s**. Tier: **%s**", r.State, strings.ToUpper(r.Status.Tier.String()))
	if r.Status.Tier != budget.Optimal {
		fmt.Fprintf(b, " (by %s)", r.Status.Cause)
	}
	fmt.Fprintf(b, ". Money: %s.\n", budget.FormatUSD(r.Status.UsedUSD, r.Status.USDSource))
	fmt.Fprintf(b, "\n%s.\n", r.sandboxLine())
	if r.Status.ListUSD > 0 {
		fmt.Fprintf(b, "\nAt list prices: %s. %s\n", budget.FormatListUSD(r.Status.ListUSD), listNote)
	}
	if r.Status.USDSource == budget.SourceUnknown || r.Status.USDSource == budget.SourcePartial {
		b.WriteString("\nSome usage has no dollar figure: its backend reported none and its model has no known price. " +
			"Unknown is not $0; tokens, time and iterations were enforced regardless.\n")
	}
}

// usageSection is one of BUDGET.md's breakdowns of the usage.
type usageSection struct {
	title, col string
	groups     []*group
}

// usageSections writes the usage broken down per iteration, per call kind,
// per model and, where a sub-agent spent some of it, per agent.
func usageSections(b *bytes.Buffer, usage []purser.CallUsage) {
	byIteration := groupUsage(usage, func(u purser.CallUsage) string { return fmt.Sprint(u.Iteration) })
	byKind := groupUsage(usage, func(u purser.CallUsage) string { return string(u.Kind) })
	byModel := groupUsage(usage, func(u purser.CallUsage) string { return u.Model })
	sections := []usageSection{{"Per iteration", "iteration", byIteration}, {"Per call kind", "kind", byKind}, {"Per model", "model", byModel}}
	// Who spent it: only worth a table when a sub-agent spent some of it.
	if bySubAgent := groupUsage(usage, agentName); len(bySubAgent) > 1 || len(bySubAgent) == 1 && bySubAgent[0].key != MainAgent {
		sections = append(sections, usageSection{"Per sub-agent", "agent", bySubAgent})
	}
	for _, s := range sections {
		fmt.Fprintf(b, "\n## %s\n\n| %s | calls | tokens | of which cached | USD |\n|---|---:|---:|---:|---|\n", s.title, s.col)
		for _, g := range s.groups {
			fmt.Fprintf(b, "| %s | %d | %d | %d | %s |\n", g.key, len(g.calls), g.totals.Tokens, g.cached, USDCell(g.totals))
		}
		if len(s.groups) == 0 {
			b.WriteString("| (no calls) | 0 | 0 | 0 | $0.00 |\n")
		}
	}
}

// callsSection writes the table of calls, one row each with its usage.
func callsSection(b *bytes.Buffer, calls []purser.CallRecord, usage []purser.CallUsage) {
	byCall := map[string]*budget.Totals{}
	for _, u := range usage {
		if byCall[u.CallID] == nil {
			byCall[u.CallID] = &budget.Totals{}
		}
		byCall[u.CallID].Merge(u.Totals)
	}
	b.WriteString("\n## Calls\n\n| # | iteration | kind | attempt | model | outcome | tokens | USD | reserved | note |\n|---:|---:|---|---:|---|---|---:|---|---|---|\n")
	for i, c := range calls {
		t := byCall[c.ID]
		if t == nil {
			t = &budget.Totals{}
		}
		fmt.Fprintf(b, "| %d | %d | %s | %d | %s | %s | %d | %s | %s | %s |\n", i+1, c.Iteration, c.Kind, c.Attempt, c.Model, c.Outcome,
			t.Tokens, USDCell(*t), reservedCell(c), oneLine(callNote(c)))
	}
	if len(calls) == 0 {
		b.WriteString("| - | - | - | - | - | - | 0 | $0.00 | - | no call was made |\n")
	}
}

// callNote is a call's note cell: its error, its note, and the requests
// its agent retried itself.
func callNote(c purser.CallRecord) string {
	var notes []string
	for _, n := range []string{c.Error, c.Note} {
		if n = strings.Trim(n, "; "); n != "" {
			notes = append(notes, n)
		}
	}
	if c.InnerRetries > 0 {
		notes = append(notes, fmt.Sprintf("%d request(s) retried by the agent itself", c.InnerRetries))
	}
	return strings.Join(notes, "; ")
}

// reservedCell is what admission reserved for a call: tokens, and dollars
// when it reserved any.
func reservedCell(c purser.CallRecord) string {
	reserved := fmt.Sprintf("%d tokens", c.Reserved.Tokens)
	if c.Reserved.USD > 0 {
		reserved += ", " + c.Reserved.USD.String()
	}
	return reserved
}

// retriesSection writes how many calls were retries, how many requests the
// agents retried inside their calls, and how many calls stalled.
func retriesSection(b *bytes.Buffer, calls []purser.CallRecord) {
	retries, inner, stalled := 0, 0, 0
	for _, c := range calls {
		if c.Attempt > 1 {
			retries++
		}
		inner += c.InnerRetries
		if c.Outcome == purser.CallStalled {
			stalled++
		}
	}
	fmt.Fprintf(b, "\n## Retries\n\n%d retried call(s). Each retry is a call of its own above, admitted by the budget and counted.", retries)
	b.WriteString(" Nothing is retried after the hard cap.")
	// The agent's own retries are Purser's to show even where its CLI would
	// not let them be switched off: each was a request sent, inside a call.
	fmt.Fprintf(b, " %d request(s) retried by the agents themselves, inside their calls (their usage is in the calls').", inner)
	if stalled > 0 {
		fmt.Fprintf(b, " %d call(s) stalled: nothing came from the agent or the provider for the stall window, so they were ended and retried.", stalled)
	}
	b.WriteString("\n")
}

// degradesSection writes the degrade actions taken, and when.
func degradesSection(b *bytes.Buffer, degrades []purser.DegradeRecord) {
	b.WriteString("\n## Degrade actions\n\n")
	if len(degrades) == 0 {
		b.WriteString("None: the budget never reached WARNING during a call.\n")
		return
	}
	b.WriteString("| when | iteration | call | action | budget | tier | metric | detail |\n|---|---:|---|---|---|---|---|---|\n")
	for _, d := range degrades {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", d.At.UTC().Format(time.RFC3339), d.Iteration, d.Call, d.Action,
			d.Scope, d.Tier, d.Metric, d.Detail)
	}
}

// listNote says what list dollars are, wherever they are shown.
const listNote = "The backend bills by subscription (a flat-rate plan): these dollars are what the usage would cost on an API key, " +
	"recorded as list and never counted as money spent nor checked against a money cap; tokens, time and iterations steer the task."

// USDCell is a dollar figure for a table cell: money spent, labelled by
// where it came from, and list-price dollars apart ("$0.35 (list)").
func USDCell(t budget.Totals) string {
	if t.ListEvents == 0 {
		return budget.FormatUSD(t.USD, t.USDSource())
	}
	if t.ReportedEvents+t.EstimatedEvents+t.UnknownEvents == 0 {
		return budget.FormatListUSD(t.ListUSD)
	}
	return budget.FormatUSD(t.USD, t.USDSource()) + " + " + budget.FormatListUSD(t.ListUSD)
}

// pricesSection says which price tables and rates priced the estimates, per
// source: the provenance of every estimated (or list, or unknown) figure.
func pricesSection(b *bytes.Buffer, prices []purser.PriceSourceUsage) {
	b.WriteString("\n## Prices\n\n")
	if len(prices) == 0 {
		b.WriteString("Nothing was priced by Purser: every dollar figure above was reported by a backend.\n")
		return
	}
	b.WriteString("Which price table and rates priced each estimate (or why a model had no price). A backend that reports a call's total at its end " +
		"(Claude Code) settles that call's estimates to it; the figures here are the estimates as priced.\n\n")
	b.WriteString("| price table and rates | cost | events | tokens | USD |\n|---|---|---:|---:|---|\n")
	for _, p := range prices {
		usd := budget.FormatUSD(p.USD, budget.SourceEstimated)
		switch p.CostSource {
		case budget.CostUnknown:
			usd = "unknown"
		case budget.CostList:
			usd = budget.FormatListUSD(p.USD)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s |\n", oneLine(p.Source), p.CostSource, p.Events, p.Tokens, usd)
	}
}

func metricTable(b *bytes.Buffer, cfg budget.Config, st budget.Status) {
	b.WriteString("| metric | used | optimal | warning | hard | |\n|---|---|---|---|---|---|\n")
	for _, m := range budget.Metrics {
		thresholds, bar := metricRow(cfg, st, m)
		row := append(append([]string{m.String(), usedText(st, m)}, thresholds...), "`"+bar+"`")
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// StatusMD renders STATUS.md: the state, why the task stopped and which
// metric, the validators' state, the last error, and what to do next.
func StatusMD(r Report) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s%s\n\n**%s**", workspace.StatusHeader, r.Task.ID, r.State)
	var be *budget.BudgetExhaustedError
	var ie *budget.InsufficientBudgetError
	switch {
	case r.State == purser.StateDone && r.DoneNote != "":
		fmt.Fprintf(&b, ": all validators passed (%s).\n", r.DoneNote)
	case r.State == purser.StateDone:
		b.WriteString(": all validators passed.\n")
	case errors.As(r.Cause, &be):
		fmt.Fprintf(&b, ": stopped by the %s budget's hard cap on **%s**.\n", be.Scope, be.Metric)
	case errors.As(r.Cause, &ie) && ie.Scope == budget.ScopeNamed:
		fmt.Fprintf(&b, ": the named budget **%s** its run draws from has too little %s left for the next call.\n", ie.Name, ie.Metric)
	case errors.As(r.Cause, &ie):
		fmt.Fprintf(&b, ": the %s budget has too little %s left for the next call.\n", ie.Scope, ie.Metric)
	case errors.Is(r.Cause, purser.ErrStuck):
		b.WriteString(": stuck — the same validators kept failing with no change to the workspace.\n")
	case r.State == purser.StatePending:
		b.WriteString(": interrupted; resumable.\n")
	default:
		b.WriteString(": failed.\n")
	}
	if r.Cause != nil {
		fmt.Fprintf(&b, "\nWhy: %s\n", r.Cause)
	}
	money := budget.FormatUSD(r.Status.UsedUSD, r.Status.USDSource)
	if r.Status.ListUSD > 0 {
		money += " spent, " + budget.FormatListUSD(r.Status.ListUSD) + " at list prices (a flat-rate plan: not money spent)"
	}
	fmt.Fprintf(&b, "\nGoal: %s\n\nBudget: tier %s; money %s; %d tokens; %s; %d iteration(s). Details in %s.\n",
		strings.TrimSpace(r.Task.Goal), strings.ToUpper(r.Status.Tier.String()), money, r.Status.UsedTokens,
		r.Status.UsedTime.Round(time.Millisecond), r.Status.UsedIterations, r.budgetFile())
	if r.Forecast != nil {
		line := r.Forecast.String() // "forecast to finish …" or "no forecast: …"
		fmt.Fprintf(&b, "\n%s%s.\n", strings.ToUpper(line[:1]), line[1:])
	}
	fmt.Fprintf(&b, "\n%s.\n", r.sandboxLine())

	b.WriteString("\n## Validators\n\n")
	last := lastValidated(r.Iterations)
	if last == nil {
		b.WriteString("Not run yet.\n")
	} else {
		fmt.Fprintf(&b, "As of iteration %d:\n\n", last.N)
		for _, v := range last.Validators {
			state := "passed"
			switch {
			case v.TimedOut:
				state = "timed out"
			case !v.Passed:
				state = fmt.Sprintf("failed (exit %d)", v.ExitCode)
			}
			fmt.Fprintf(&b, "- **%s**: %s\n", v.Name, state)
			if !v.Passed && strings.TrimSpace(v.Output) != "" {
				fmt.Fprintf(&b, "\n```\n%s\n```\n\n", strings.TrimRight(tail(v.Output, 40), "\n"))
			}
		}
		if r.State == purser.StateBlocked && last.N < r.Status.UsedIterations {
			fmt.Fprintf(&b, "\nIteration %d was stopped before its validators ran.\n", r.Status.UsedIterations)
		}
	}

	b.WriteString("\n## Last error\n\n")
	if e := lastError(r.Calls); e != "" {
		fmt.Fprintf(&b, "%s\n", e)
	} else {
		b.WriteString("None.\n")
	}

	if r.State != purser.StateDone {
		b.WriteString("\n## Suggested manual steps\n\n")
		for i, s := range suggestions(r, be, ie) {
			fmt.Fprintf(&b, "%d. %s\n", i+1, s)
		}
	}
	return []byte(redact.Display(b.String()))
}

// lastValidated is the last iteration whose validators ran, nil when none
// did: STATUS.md and explain both name it, so they name the same one. The
// engine stores an iteration cut before its validators ran without results,
// and one stopped after them (re-checked at a hard cap) with theirs.
func lastValidated(its []purser.IterationRecord) *purser.IterationRecord {
	for i := len(its) - 1; i >= 0; i-- {
		if len(its[i].Validators) > 0 {
			return &its[i]
		}
	}
	return nil
}

func lastError(calls []purser.CallRecord) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Error != "" {
			c := calls[i]
			return fmt.Sprintf("%s call of iteration %d (attempt %d, %s): %s", c.Kind, c.Iteration, c.Attempt, c.Outcome, c.Error)
		}
	}
	return ""
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = append([]string{"[…]"}, parts[len(parts)-lines:]...)
	}
	return strings.Join(parts, "\n")
}

func suggestions(r Report, be *budget.BudgetExhaustedError, ie *budget.InsufficientBudgetError) []string {
	ws := r.Task.Workspace
	var out []string
	if r.InGitRepo {
		out = append(out, fmt.Sprintf("Look at the workspace as the agent left it; nothing was reverted: `cd %s && git status && git diff`.", shellQuote(ws)))
	} else {
		out = append(out, fmt.Sprintf("Look at the workspace as the agent left it; nothing was reverted. It is not a git repository, so compare it with your own copy: `ls -la %s`.", shellQuote(ws)))
	}
	if len(r.Task.Validators) > 0 {
		var cmds []string
		for _, v := range r.Task.Validators {
			cmds = append(cmds, "`"+v.Run+"`")
		}
		out = append(out, "Run the validators yourself to see where the work stands: "+strings.Join(cmds, ", ")+".")
	}
	out = append(out, "Read "+r.budgetFile()+" for where the money and tokens went, and which degrade actions were taken.")
	file := r.Task.File
	if file == "" {
		file = "the task file"
	}
	switch {
	case be != nil && be.Scope == budget.ScopeRun:
		out = append(out, fmt.Sprintf("The run's shared budget is spent (%s). Raise it in the run budget file, then `purser resume %s`.", be.Metric, r.Task.ID))
	case be != nil:
		key := map[budget.Metric]string{budget.Money: "hard.usd", budget.Tokens: "hard.tokens", budget.Time: "hard.timeMinutes", budget.Iterations: "hard.maxIterations"}[be.Metric]
		out = append(out, fmt.Sprintf("To continue, raise `budget.%s` (now %s, used %s) in %s, or give a budget file outside the workspace: `purser resume %s --budget FILE`; what was spent carries over.",
			key, be.Metric.Format(be.Limit), be.Metric.Format(be.Status.Used(be.Metric)), file, r.Task.ID))
	case ie != nil && ie.Scope == budget.ScopeNamed:
		out = append(out, fmt.Sprintf("The named budget %s is spent for its window: raise it (`purser budgets raise %s --file FILE`) or wait for the window to reset, then `purser resume %s`.", ie.Name, ie.Name, r.Task.ID))
	case ie != nil:
		out = append(out, fmt.Sprintf("To continue, raise the hard cap on %s in %s, or give a budget file outside the workspace: `purser resume %s --budget FILE`.", ie.Metric, file, r.Task.ID))
	case r.State == purser.StatePending:
		out = append(out, fmt.Sprintf("Continue where it stopped: `purser resume %s`.", r.Task.ID))
	default:
		out = append(out, fmt.Sprintf("Fix the cause above, then `purser resume %s`.", r.Task.ID))
	}
	return out
}

func shellQuote(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_./-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
