package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/cmd/purser/internal/quickversion"
)

// revision is the VCS revision this build was made from, set at link time
// for builds that record none (go build -buildvcs=false, a source tarball):
// go build -ldflags "-X main.revision=$(git rev-parse HEAD)" ./cmd/purser.
// The build's own record, when there is one, wins.
var revision string

// version describes this build, as quickversion does when it answers
// `purser --version` before the rest of purser is initialised.
func version() string {
	b, ok := quickversion.ReadBuild()
	if !ok {
		return "purser (unknown version: built without module information)"
	}
	return quickversion.Describe(b, revision)
}

// versionOf is version for a build's info and the revision set at link
// time ("": none).
func versionOf(info *debug.BuildInfo, linked string) string {
	b := quickversion.Build{Version: info.Main.Version, GoVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return quickversion.Describe(b, linked)
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
