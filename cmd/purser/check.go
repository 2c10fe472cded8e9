package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/report"
)

func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check TASKFILE...",
		Short: "Check task files as run would, and say what would run, spending nothing",
		Long: `Loads each task file and its purser.yaml exactly as run does before it starts,
with every check made before a cent is spent: the task's fields and budget,
its workspace, and its backend's options (decoded strictly; the sim script
loaded, the agent CLI or exec program found, the API-key variable set). The
database is not opened. For each task it prints what would run: the backend,
the model of each tier and the one it starts on, the budget, the validators
and the workspace.

Exit codes: 0 every task would run; 2 a problem was found (each on stderr,
with its file, line and field).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			ids := map[string]string{}
			for _, path := range args {
				t, proj, err := loadTask(path)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if other, ok := ids[t.ID]; ok {
					errs = append(errs, fmt.Errorf("%s: task id %q is also the id of %s", path, t.ID, other))
					continue
				}
				ids[t.ID] = path
				report.DescribeTask(cmd.OutOrStdout(), path, t)
				if b, err := backends()(t.Backend); err == nil {
					if m, ok := b.(purser.Metered); ok {
						fmt.Fprintf(cmd.OutOrStdout(), "  metering    %s\n", m.Metering())
					}
				}
				describeSandbox(cmd.OutOrStdout(), t, proj)
				if err := app.RefuseUnboxed(proj, []purser.Task{t}); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", path, err))
				}
				if err := app.CheckUnpriced(cmd.ErrOrStderr(), backends(), []purser.Task{t}, nil, proj.Prices); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", path, err))
				}
			}
			if len(errs) > 0 {
				return badInput(errors.Join(errs...))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d %s would run\n", len(args), plural(len(args), "task", "tasks"))
			return nil
		},
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
