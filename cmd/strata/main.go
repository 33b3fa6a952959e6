package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	// store.Open opens bbolt files and PostgreSQL URLs: both backends are linked in.
	_ "github.com/strata-go/strata"
)

// main runs the command line and exits with its status.
func main() {
	os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// runMain is run with SIGINT and SIGTERM ending the command's context: the
// first one stops the command cleanly (runContext), a second one ends the
// process at once.
func runMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		sig, ok := (<-sigs).(syscall.Signal)
		if !ok {
			sig = syscall.SIGINT
		}
		cancel(&interruptError{sig: sig})
		if again, ok := (<-sigs).(syscall.Signal); ok {
			os.Exit(128 + int(again))
		}
	}()
	return runContext(ctx, args, stdin, stdout, stderr)
}

// interruptError is the cause of a command context ended by a signal.
type interruptError struct{ sig syscall.Signal }

// Error implements error.
func (e *interruptError) Error() string { return fmt.Sprintf("interrupted by %s", e.sig) }
