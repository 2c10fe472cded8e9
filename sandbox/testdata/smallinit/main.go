// Command smallinit is a box init and nothing else, for measuring what a
// box costs with an init that does no package initialisation of its own.
package main

import (
	"fmt"
	"os"

	"github.com/purser-dev/purser/sandbox"
)

func main() {
	if sandbox.IsInit() {
		sandbox.InitMain()
	}
	fmt.Fprintln(os.Stderr, "smallinit: run only as a box's init")
	os.Exit(2)
}
