package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// revision is the VCS revision this build was made from, set at link time
// for builds that record none (go build -buildvcs=false, a source tarball):
// go build -ldflags "-X main.revision=$(git rev-parse HEAD)" ./cmd/purser.
// The build's own record, when there is one, wins.
var revision string

// version describes this build: the module version, the VCS revision it was
// built from (marked "+dirty" when the tree had changes), and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "purser (unknown version: built without module information)"
	}
	return versionOf(info, revision)
}

// versionOf is version for a build's info and the revision set at link
// time ("": none). No revision is said to be unknown, and why, rather than
// left out: a newcomer cannot tell which build they run otherwise.
func versionOf(info *debug.BuildInfo, linked string) string {
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
	switch {
	case rev != "":
		parts = append(parts, "revision "+rev+modified)
	case linked != "":
		parts = append(parts, "revision "+linked)
	default:
		parts = append(parts, `revision unknown (built with -buildvcs=false or outside a git clone; -ldflags "-X main.revision=..." sets it)`)
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
