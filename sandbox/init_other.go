//go:build !linux

package sandbox

import (
	"fmt"
	"os"
)

// IsInit reports whether this process was started as a box's init; there
// are no boxes off Linux, so a program run with the init's argument says so
// through InitMain rather than running as itself.
func IsInit() bool { return len(os.Args) > 1 && os.Args[1] == initArg }

// InitMain exits: no box runs here (see Available).
func InitMain() {
	fmt.Fprintln(os.Stderr, "purser box: no sandbox on this system")
	os.Exit(125)
}
