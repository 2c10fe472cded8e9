// Command purser runs autonomous AI coding agents on tasks under a
// three-tier budget. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/validate"
)

// errSignal is the cause of a context cancelled by SIGINT or SIGTERM.
var errSignal = errors.New("stopped by a signal")

func main() {
	// First of all: run as a box's init (pid 1 of an agent's or a
	// validator's box, docs/sandbox.md) if started as one.
	if sandbox.IsInit() {
		sandbox.InitMain()
	}
	// Then: run as an agent's supervisor if asked to, else have every
	// agent and validator started under one (docs/reliability.md).
	procgroup.Supervise()
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	// SIGHUP too: a closed terminal or a lost SSH session stops the run the
	// same graceful way, rather than killing Purser with its agents left.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "purser: %s: stopping; calls in flight are cancelled and tasks left resumable (again to quit at once)\n", s)
		cancel(fmt.Errorf("%w (%s)", errSignal, s))
		<-sigs
		quitNow()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	validate.Close() // the validators' resident boxes
	sandbox.CloseEgress()
	os.Exit(code)
}

// quitNow ends Purser at once (a second signal, a second Ctrl+C): every
// agent it runs is killed with its process group first, so none outlives it.
// The tasks stay resumable: their usage so far is in the ledger.
func quitNow() {
	proc.KillAll()
	sandbox.CloseEgress()
	os.Exit(exitInterrupted)
}
