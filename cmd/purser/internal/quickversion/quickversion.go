// Package quickversion answers `purser --version` and `purser version`
// from its init, before the rest of the program is initialised. Go
// initialises packages in the order of their import paths, each once its
// imports are; this one imports only packages the runtime initialises
// first (not strings, not runtime/debug: both sort late and would hold it
// back), so the answer no longer waits for every package's init —
// Prometheus' collectors, the price tables, the TUI's terminal set-up —
// which cost more than twice the answer (issue 24).
package quickversion

import (
	"bytes"
	"os"
	"runtime"
	_ "unsafe" // go:linkname
)

// revision is main.revision, which `go build -ldflags "-X
// main.revision=…"` sets (the documented way; README.md). The linker sets
// it, so it holds its value before main's package is initialised.
//
//go:linkname revision main.revision
var revision string

// modinfo is the build's module information, as runtime/debug reads it
// (the runtime provides it under this name).
//
//go:linkname modinfo runtime/debug.modinfo
func modinfo() string

func init() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		if _, err := os.Stdout.WriteString(Version() + "\n"); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// Build is what a version line says of a build.
type Build struct {
	Version   string // the main module's version; "" for a local build
	Revision  string // vcs.revision, when the build recorded it
	Modified  bool   // vcs.modified: the tree had changes
	GoVersion string
}

// Version describes this build: the module version, the VCS revision it
// was built from (marked "+dirty" when the tree had changes), and the Go
// version.
func Version() string {
	b, ok := ReadBuild()
	if !ok {
		return "purser (unknown version: built without module information)"
	}
	return Describe(b, revision)
}

// ReadBuild reads this build's module information, as
// runtime/debug.ReadBuildInfo does (its "mod" and "build" lines).
func ReadBuild() (Build, bool) {
	data := []byte(modinfo())
	if len(data) < 32 {
		return Build{}, false
	}
	b := Build{GoVersion: runtime.Version()}
	for _, line := range bytes.Split(data[16:len(data)-16], []byte("\n")) {
		key, rest, _ := bytes.Cut(line, []byte("\t"))
		switch string(key) {
		case "mod":
			if f := bytes.Split(rest, []byte("\t")); len(f) >= 2 {
				b.Version = string(f[1])
			}
		case "build":
			k, v, _ := bytes.Cut(rest, []byte("="))
			switch string(k) {
			case "vcs.revision":
				b.Revision = string(v)
			case "vcs.modified":
				b.Modified = string(v) == "true"
			}
		}
	}
	return b, true
}

// Describe is Version for a build and the revision set at link time ("":
// none). No revision is said to be unknown, and why, rather than left out:
// a newcomer cannot tell which build they run otherwise.
func Describe(b Build, linked string) string {
	v := b.Version
	if v == "" {
		v = "(devel)"
	}
	s := "purser " + v + ", "
	switch {
	case b.Revision != "":
		s += "revision " + b.Revision
		if b.Modified {
			s += "+dirty"
		}
	case linked != "":
		s += "revision " + linked
	default:
		s += `revision unknown (built with -buildvcs=false or outside a git clone; -ldflags "-X main.revision=..." sets it)`
	}
	return s + ", " + b.GoVersion
}
