package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/report"
)

func newCheckCmd() *cobra.Command {
	var asJSON bool
	var gw string
	cmd := &cobra.Command{
		Use:   "check TASKFILE... [--json]",
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
			out := cmd.OutOrStdout()
			var checked []checkedTaskJSON
			if asJSON {
				out = io.Discard
			}
			if err := useGatewayFirst(gw); err != nil {
				return err
			}
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
				report.DescribeTask(out, path, t)
				model, _ := t.Backend.Model(t.ModelTier)
				checked = append(checked, checkedTaskJSON{File: path, ID: t.ID, Workspace: t.Workspace, Backend: t.Backend.Name, Model: model, Budget: t.Budget})
				if b, err := backends()(t.Backend); err == nil {
					describeBackendDoor(out, b, gw, proj)
				}
				describeOnHard(out, t, proj.Prices)
				describeSandbox(out, t, proj)
				if err := app.RefuseUnboxed(proj, []purser.Task{t}); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", path, err))
				}
				if err := app.CheckUnpriced(cmd.ErrOrStderr(), backends(), []purser.Task{t}, nil, proj.Prices); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", path, err))
				}
			}
			if asJSON {
				j := checkJSON{OK: len(errs) == 0, Tasks: checked, Problems: []string{}}
				if j.Tasks == nil {
					j.Tasks = []checkedTaskJSON{}
				}
				for _, err := range errs {
					j.Problems = append(j.Problems, err.Error())
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(j); err != nil {
					return err
				}
			}
			if len(errs) > 0 {
				return badInput(errors.Join(errs...))
			}
			fmt.Fprintf(out, "ok: %d %s would run\n", len(args), plural(len(args), "task", "tasks"))
			return nil
		},
	}
	cmd.Flags().StringVar(&gw, "gateway", "", app.GatewayFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ok, tasks: [{file, id, workspace, backend, model, budget}], problems} as JSON (problems still on stderr, exit 2)")
	return cmd
}

// checkJSON is what check --json prints.
type checkJSON struct {
	OK       bool              `json:"ok"`
	Tasks    []checkedTaskJSON `json:"tasks"`
	Problems []string          `json:"problems"`
}

// checkedTaskJSON is a task that would run: model is the one it starts on.
type checkedTaskJSON struct {
	File      string        `json:"file"`
	ID        string        `json:"id"`
	Workspace string        `json:"workspace"`
	Backend   string        `json:"backend"`
	Model     string        `json:"model"`
	Budget    budget.Config `json:"budget"`
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// describeBackendDoor says how a backend's calls are metered, which
// provider key the door holds for it (by name only), which door, and the
// CLI's own retries where Purser cannot always switch them off (Gemini
// CLI).
func describeBackendDoor(out io.Writer, b purser.Backend, gw string, proj *config.Project) {
	var keyLine string
	if m, ok := b.(purser.Metered); ok {
		keyLine = m.Metering()
		fmt.Fprintf(out, "  metering    %s\n", keyLine)
	}
	if k, ok := b.(interface{ DoorKey() string }); ok {
		keyLine = k.DoorKey()
		fmt.Fprintf(out, "  key         %s\n", keyLine)
	}
	describeDoor(out, gw, proj, keyLine)
	if r, ok := b.(interface{ OwnRetries() string }); ok {
		fmt.Fprintf(out, "  retries     %s\n", r.OwnRetries())
	}
}
