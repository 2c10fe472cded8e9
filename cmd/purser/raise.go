package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/workspace"
)

func newRaiseCmd() *cobra.Command {
	var db, usd string
	var tokens int64
	cmd := &cobra.Command{
		Use:   "raise TASK [--usd AMOUNT] [--tokens N] [--db PATH]",
		Short: "Move a stopped task's hard cap, recorded in its ledger, and put a BLOCKED task back to work",
		Long: `Sets the task's hard cap on money (--usd) or tokens (--tokens), or both, in
the database: the change is recorded among the task's budget changes — who,
when, from where (host and directory), the old and the new budget — and
purser explain and status show it.

A BLOCKED task a worker ran is queued again: a worker resumes it. Any other
stopped task is resumed by purser resume TASK, which keeps the raised cap as
long as the task's file still says what it said before the raise.

HARD still stops a task and BLOCKS it, as the spec says: a raise is asked for
and made after (or before) the stop, by a person, never by the agent — it is
refused inside the task's workspace, and a RUNNING task's budget is its
process's until it stops.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if usd == "" && !cmd.Flags().Changed("tokens") {
				return badInput(errors.New("purser raise: give the new hard cap, --usd AMOUNT or --tokens N (or both)"))
			}
			var newUSD *budget.USD
			if usd != "" {
				v, err := budget.ParseUSD(strings.TrimPrefix(usd, "$"))
				if err != nil || v <= 0 {
					return badInput(fmt.Errorf("--usd %q: want a positive amount of dollars, e.g. 2.00", usd))
				}
				newUSD = &v
			}
			if cmd.Flags().Changed("tokens") && tokens <= 0 {
				return badInput(fmt.Errorf("--tokens %d: want a positive number of tokens", tokens))
			}
			a, err := openHere(cmd, db)
			if err != nil {
				return err
			}
			defer a.Close()
			ctx := cmd.Context()
			rec, wd, err := raisable(cmd, a, args[0])
			if err != nil || rec.State == purser.StateDone {
				return err
			}
			to := raisedBudget(rec.Budget, newUSD, tokens, cmd.Flags().Changed("tokens"))
			if err := to.Validate(); err != nil {
				return badInput(fmt.Errorf("the raised budget of task %s: %w", rec.ID, err))
			}
			host, _ := os.Hostname()
			source := purser.TaskRaiseSource + " " + strings.Join(raiseFlags(usd, tokens, cmd.Flags().Changed("tokens")), " ") + " on " + host + " in " + wd
			raiser, ok := a.Store.(purser.TaskRaiser)
			if !ok {
				return fmt.Errorf("the database %s cannot record a raise", a.DB)
			}
			requeued, err := raiser.RaiseTask(ctx, purser.BudgetChange{TaskID: rec.ID, At: time.Now(), By: app.Whoami(), Source: source, From: rec.Budget, To: to})
			if errors.Is(err, purser.ErrBudgetMoved) {
				return badInput(fmt.Errorf("task %s: its budget changed while this raise was made; look again (purser explain %s) and raise again", rec.ID, rec.ID))
			}
			if err != nil {
				return err
			}
			sayRaised(cmd.OutOrStdout(), rec, to, source, requeued, db)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&usd, "usd", "", "the task's new hard cap on money, in dollars (e.g. 2.00)")
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "the task's new hard cap on tokens")
	return cmd
}

// raisable reads the task to raise and the directory the raise is made
// from: not inside the task's workspace, where its agent works, and not
// while its process runs. A task already DONE is said so, with no error.
func raisable(cmd *cobra.Command, a *app.App, id string) (purser.TaskRecord, string, error) {
	rec, err := a.Store.Task(cmd.Context(), id)
	if errors.Is(err, purser.ErrNotFound) {
		return rec, "", badInput(fmt.Errorf("no task %q in the database %s", id, a.DB))
	}
	if err != nil {
		return rec, "", err
	}
	wd, _ := os.Getwd()
	if wd != "" && rec.Workspace != "" && workspace.Contains(rec.Workspace, wd) {
		return rec, wd, badInput(fmt.Errorf("purser raise refuses to run inside task %s's workspace %s, where its agent works: raise it from outside", rec.ID, rec.Workspace))
	}
	switch rec.State {
	case purser.StateDone:
		fmt.Fprintf(cmd.OutOrStdout(), "task %s is already DONE; nothing to raise\n", rec.ID)
	case purser.StateRunning:
		// A task whose process is gone was interrupted: it may be raised.
		if !(proc.Owners{}).Gone(rec.Owner) {
			return rec, wd, badInput(fmt.Errorf("task %s is RUNNING (%s): its budget is that process's until it stops; raise it once it is BLOCKED or stopped", rec.ID, rec.Owner))
		}
	}
	return rec, wd, nil
}

// sayRaised says what the raise did, and what comes next for the task.
func sayRaised(out io.Writer, rec purser.TaskRecord, to budget.Config, source string, requeued bool, db string) {
	fmt.Fprintf(out, "raised task %s: %s → %s (recorded: by %s, %s)\n", rec.ID,
		report.CapsText(budget.CapsOf(rec.Budget)), report.CapsText(budget.CapsOf(to)), app.Whoami(), source)
	if requeued {
		fmt.Fprintf(out, "task %s was BLOCKED on the queue: queued again, a worker will resume it\n", rec.ID)
		return
	}
	dbFlag := ""
	if db != "" {
		dbFlag = " --db " + db
	}
	fmt.Fprintf(out, "task %s is %s: resume it with purser resume %s%s\n", rec.ID, rec.State, rec.ID, dbFlag)
}

// raisedBudget is cfg with its hard caps on money and tokens moved, each
// tier line left where it was: a line at or above the new cap is for the
// budget's validation to refuse, saying which.
func raisedBudget(cfg budget.Config, usd *budget.USD, tokens int64, setTokens bool) budget.Config {
	to := cfg
	if usd != nil {
		v := *usd
		to.Hard.USD = &v
	}
	if setTokens {
		t := tokens
		to.Hard.Tokens = &t
	}
	return to
}

// raiseFlags are the raise's flags as given, for its record.
func raiseFlags(usd string, tokens int64, setTokens bool) []string {
	var out []string
	if usd != "" {
		out = append(out, "--usd "+usd)
	}
	if setTokens {
		out = append(out, fmt.Sprintf("--tokens %d", tokens))
	}
	return out
}
