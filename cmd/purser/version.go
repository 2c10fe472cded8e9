package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version describes this build: the module version, the VCS revision it was
// built from (marked "+dirty" when the tree had changes), and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "purser (unknown version: built without module information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	parts := []string{"purser " + v}
	if rev != "" {
		parts = append(parts, "revision "+rev+modified)
	}
	parts = append(parts, info.GoVersion)
	return strings.Join(parts, ", ")
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Purser's version, the revision it was built from, and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version())
			return err
		},
	}
}
