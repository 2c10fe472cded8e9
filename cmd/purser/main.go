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
)

// errSignal is the cause of a context cancelled by SIGINT or SIGTERM.
var errSignal = errors.New("stopped by a signal")

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "purser: %s: stopping; calls in flight are cancelled and tasks left resumable (again to quit at once)\n", s)
		cancel(fmt.Errorf("%w (%s)", errSignal, s))
		<-sigs
		os.Exit(exitInterrupted)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
