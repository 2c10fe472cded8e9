package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/app"
)

// taskArgCommands are the commands whose arguments are task ids, completed
// from the database.
var taskArgCommands = map[string]bool{"status": true, "resume": true, "raise": true, "explain": true, "ci-summary": true}

// wireCompletions completes task ids for the commands that take them
// (cobra's own `purser completion bash|zsh|fish|powershell` writes the
// scripts that ask for them).
func wireCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		if taskArgCommands[c.Name()] && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeTaskIDs
		}
	}
}

// completeTaskIDs completes a task id from the database the command would
// use (its --db flag, PURSER_DB, purser.yaml, the project's default). It
// only reads: with no database, it completes nothing and creates none.
func completeTaskIDs(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if cmd.Name() != "ci-summary" && len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp // one task only
	}
	db, _ := cmd.Flags().GetString("db")
	a, err := app.Open(cmd.Context(), app.Options{DB: db})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer a.Close()
	recs, err := a.Store.Tasks(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	taken := map[string]bool{}
	for _, a := range args {
		taken[a] = true
	}
	var out []cobra.Completion
	for _, r := range recs {
		if strings.HasPrefix(r.ID, toComplete) && !taken[r.ID] {
			out = append(out, cobra.CompletionWithDesc(r.ID, string(r.State)))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
