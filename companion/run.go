package companion

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/store"
)

// HookOptions configure RunHookCommand: the flags of `strata AGENT hook`
// and what the CLI adds to a failure.
type HookOptions struct {
	DB      string        // the store: a file (created if missing) or a postgres:// URL; "" for DefaultStore
	Log     string        // the log file; "" for DefaultLog
	Budget  int           // the token budget of the injected state, at least MinBudget
	Timeout time.Duration // how long to wait for the store's lock
	// Getenv reads the environment (the agent's project variable); nil
	// for os.Getenv.
	Getenv func(string) string
	// Redact returns a store as the log and the context name it: a URL
	// without its password. nil leaves it as it is.
	Redact func(db string) string
	// Explain adds to a failure on the store db the hints the CLI's other
	// commands give (run verify on a damaged store, which process holds a
	// locked one). nil adds none.
	Explain func(err error, db string) error
}

// RunHookCommand runs one hook of agent a as the agent runs a command
// hook: it reads the input from stdin (ReadInput), runs it against the
// store (Hook.RunTranscript), writes the agent's output to stdout, and
// one line to the log (AppendLog; to stderr when there is no project to
// put it in). Nothing it meets makes it fail — a bad input, a damaged or
// locked store, an unreadable transcript print nothing on stdout and log
// a line naming what failed — so as never to break the agent's session;
// usage is a problem of the command line, logged as a failure before
// anything is done.
func RunHookCommand(ctx context.Context, a Agent, o HookOptions, usage error, stdin io.Reader, stdout, stderr io.Writer) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Redact == nil {
		o.Redact = func(db string) string { return db }
	}
	if o.Explain == nil {
		o.Explain = func(err error, _ string) error { return err }
	}
	in, inErr := ReadInput(a, stdin)
	projectDir := ""
	if env := a.Settings().ProjectEnv; env != "" {
		projectDir = o.Getenv(env)
	}
	db := o.DB
	if db == "" {
		db = DefaultStore(a, projectDir, in.Cwd)
	}
	logPath := o.Log
	if logPath == "" {
		logPath = DefaultLog(a, db, projectDir, in.Cwd)
	}
	line, output := o.hook(ctx, a, in, inErr, usage, db)
	var err error
	switch _, serr := os.Stat(filepath.Dir(logPath)); {
	case (logPath == "" || serr != nil) && inErr == nil && usage == nil && !in.Handled():
		// An event the hook leaves alone makes no directory for its line.
	case logPath == "":
		// No --db, no project variable, no absolute cwd: no project to log
		// in, nor to make a directory in.
		fmt.Fprintf(stderr, "strata %s hook: %s\n", a.Name(), line)
	default:
		if err = os.MkdirAll(filepath.Dir(logPath), 0o700); err == nil {
			err = AppendLog(logPath, time.Now(), line)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata %s hook: %s (the line: %s)\n", a.Name(), err, line)
	}
	if output != nil {
		if _, err := stdout.Write(output); err != nil {
			_ = AppendLog(logPath, time.Now(), in.HookEventName+" FAILED writing the output: "+err.Error())
		}
	}
}

// hook does the work and returns the log line and the output to print
// (nil for none).
func (o *HookOptions) hook(ctx context.Context, a Agent, in Input, inErr, usage error, db string) (line string, output []byte) {
	failed := func(what string, err error) (string, []byte) {
		name := in.HookEventName
		if name == "" {
			name = "hook"
		}
		return fmt.Sprintf("%s FAILED %s: %s", name, what, oneLineError(err)), nil
	}
	defer func() {
		if p := recover(); p != nil {
			line, output = failed("(a bug)", errors.Newf("panic: %v", p))
		}
	}()
	switch {
	case usage != nil:
		return failed("(the command line)", usage)
	case inErr != nil:
		return failed("reading the hook input", inErr)
	case o.Budget < MinBudget:
		return failed("(the command line)", errors.Newf("--budget must be at least %d, got %d", MinBudget, o.Budget))
	case o.Timeout <= 0:
		return failed("(the command line)", errors.Newf("--timeout must be positive, got %s", o.Timeout))
	case !in.Handled():
		r := Result{Input: in, Agent: a, Ignored: true}
		return r.Line(), nil
	}
	t, err := in.OpenTranscript()
	if err != nil {
		return failed("reading the transcript", err) // before the store is made
	}
	defer t.Close()
	if !strings.Contains(db, "://") {
		// The resume command the injected state gives names the store
		// wherever the agent runs it.
		abs, err := filepath.Abs(db)
		if err != nil {
			return failed("finding the store "+db, err)
		}
		db = abs
		if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
			return failed("creating the store's directory", err)
		}
	}
	st, err := store.Open(db, store.Options{Create: true, LockTimeout: o.Timeout})
	shown := o.Redact(db) // a URL's password goes nowhere: not the log, not the context
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			err = errors.Wrap(err, "another process holds the database")
		}
		return failed("opening the store "+shown, o.Explain(err, shown))
	}
	h, err := New(st, a, Options{Budget: o.Budget, DB: shown})
	if err != nil {
		st.Close()
		return failed("(setting up)", err)
	}
	r, err := h.RunTranscript(ctx, t)
	// A store this hook made and stored nothing in (the import failed, or
	// the transcript held nothing to store) goes again: the store exists
	// once a hook has stored something, so that status's "none yet" means
	// no hook has.
	if _, derr := st.DropEmpty(); derr != nil && err == nil {
		err = errors.Wrap(derr, "removing the empty store")
	}
	if cerr := st.Close(); err == nil && cerr != nil {
		err = errors.Wrap(cerr, "closing the store")
	}
	if err != nil {
		return failed("on "+shown, o.Explain(err, shown))
	}
	return r.Line(), r.Output
}

// oneLineError is err's message and hints on one line.
func oneLineError(err error) string {
	s := err.Error()
	for _, h := range errors.GetAllHints(err) {
		s += " (hint: " + h + ")"
	}
	return strings.Join(strings.Fields(s), " ")
}
