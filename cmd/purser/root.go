package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// Exit codes. They are part of Purser's interface: scripts branch on them.
const (
	exitOK         = 0
	exitFailure    = 1 // something went wrong that is not the input's fault
	exitBadInput   = 2 // a file, flag or argument is wrong
	exitBudgetStop = 3 // a task was stopped, or refused, by its budget
)

// exitError carries the exit code an error should end the process with.
type exitError struct {
	code     int
	err      error
	reported bool // already told to the user; print nothing more
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the input's fault (exit 2).
func badInput(err error) error { return app.BadInput(err) }

// run executes the command line and returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if cause := context.Cause(ctx); errors.Is(cause, errSignal) && !errors.As(err, &ee) {
		// Stopped by a signal before the command could say how it ended
		// (while the database opened, a lock waited on, a check): the
		// signal is why, whatever error its cancellation raised, and
		// nothing was left half-done that a resume would not take up.
		fmt.Fprintf(stderr, "purser: %s before the command finished: %s\n", cause, redact.Display(err.Error()))
		return exitInterrupted
	}
	if !errors.As(err, &ee) || !ee.reported {
		fmt.Fprintln(stderr, "purser:", redact.Display(err.Error()))
	}
	var be *budget.BudgetExhaustedError
	var re runError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case app.IsBadInput(err):
		return exitBadInput
	case errors.As(err, &be):
		return exitBudgetStop
	case !errors.As(err, &re):
		// Cobra refused the command line before any command ran: unknown
		// command or flag, missing required flag, wrong arguments.
		return exitBadInput
	}
	return exitFailure
}

// runError marks an error returned by a command's own work, as opposed to
// one cobra raised while reading the command line.
type runError struct{ error }

func (e runError) Unwrap() error { return e.error }

// markRunErrors wraps the RunE of every command in the tree so that its
// errors are runErrors.
func markRunErrors(cmd *cobra.Command) {
	if runE := cmd.RunE; runE != nil {
		cmd.RunE = func(c *cobra.Command, a []string) error {
			if err := runE(c, a); err != nil {
				return runError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markRunErrors(sub)
	}
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "purser",
		Short:         "Run AI coding agents on tasks under a three-tier budget",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newVersionCmd(), newBudgetCmd(), newBudgetsCmd(), newRunCmd(), newResumeCmd(), newRaiseCmd(), newStatusCmd(), newCheckCmd(), newServeCmd(), newReplayCmd(), newAdviseCmd(), newPricesCmd(), newCISummaryCmd(), newInitCmd(), newExplainCmd(), newSubmitCmd(), newWorkerCmd(), newShellCmd(), newGatewayCmd())
	wireCompletions(root)
	markRunErrors(root)
	return root
}
