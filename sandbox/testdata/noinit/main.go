// Command noinit imports package sandbox and never calls IsInit or
// InitMain: a box with no relay must still run with it as its init, run
// from package initialisation before main (sandbox/internal/boxinit).
package main

import (
	"fmt"
	"os"

	_ "github.com/purser-dev/purser/sandbox"
)

func main() {
	fmt.Println("noinit: main ran")
	os.Exit(3)
}
