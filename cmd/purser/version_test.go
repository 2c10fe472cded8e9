package main

import (
	"runtime/debug"
	"testing"
)

// purser version always says which revision it was built from, or that it
// is unknown and why: a build without VCS stamping (-buildvcs=false) takes
// it from -ldflags -X, and never asks git at run time (issue 23 #9).
func TestVersionSaysTheRevisionOrWhyItIsUnknown(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	bare := &debug.BuildInfo{GoVersion: "go1.26"}
	for _, tc := range []struct {
		info   *debug.BuildInfo
		linked string
		want   string
	}{
		{stamped, "", "purser v1.2.3, revision abc123+dirty, go1.26"},
		{stamped, "fff", "purser v1.2.3, revision abc123+dirty, go1.26"},
		{bare, "def456", "purser (devel), revision def456, go1.26"},
		{bare, "", `purser (devel), revision unknown (built with -buildvcs=false or outside a git clone; -ldflags "-X main.revision=..." sets it), go1.26`},
	} {
		if got := versionOf(tc.info, tc.linked); got != tc.want {
			t.Errorf("versionOf(%v, %q) = %q, want %q", tc.info.Settings, tc.linked, got, tc.want)
		}
	}
}
