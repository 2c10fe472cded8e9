// Command purser runs autonomous AI coding agents on tasks under a
// three-tier budget. See README.md.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
