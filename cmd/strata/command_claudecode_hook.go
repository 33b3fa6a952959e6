package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/store"
)

// defaultHookTimeout is the hook's wait for the store's lock: long enough
// for another session's hook on the same store to finish, short beside
// the time Claude Code gives a hook.
const defaultHookTimeout = 10 * time.Second

// claudeCodeHookOptions are the flags of `strata claude-code hook`.
type claudeCodeHookOptions struct {
	db      string
	log     string
	budget  int
	timeout time.Duration
}

// newClaudeCodeHookCommand returns `strata claude-code hook`.
func newClaudeCodeHookCommand() *cobra.Command {
	o := &claudeCodeHookOptions{}
	var flagErr error
	cmd := &cobra.Command{
		Use:   "hook [--db DB] [--log FILE] [--budget N] [--timeout D]",
		Short: "Run as a Claude Code hook: read the hook's JSON on stdin, import, compact, inject the state",
		Long: `Run as a Claude Code command hook (docs/claude-code.md): read the JSON
Claude Code writes to the hook's stdin (session_id, transcript_path, cwd,
hook_event_name, trigger or source) and act on it.

PreCompact (any trigger): import the transcript into the session of its
session_id — only the records the store does not hold, read from the line
after the last one it holds — and compact the session's head into one L1
node with the extractive summarizer, so that a marker stands where Claude
Code is about to cut — unless the session's last event is strata's own
check of Claude Code's summary: nothing new since SessionStart, nothing
compacted. Nothing is printed.

SessionStart with source "compact": import what Claude Code wrote since
(its compact_boundary record and its summary), make sure a marker stands
at the boundary, and print on stdout
  {"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"…"}}
whose context is the state the raw transcript implies at the boundary:
the task and the user's newest request, every failure still standing by
what failed, every call still open (UNRESOLVED), the plan's open items,
every rejected, failed or superseded item with its reason, every active
constraint, the earlier requests, every artifact, the failures since
fixed — within --budget tokens, in that order, each class newest first,
what does not fit counted — with the marker's id, the sha256 of
its context and the strata resume command that prints it (the whole
context: every raw event after the boundary too; its size is given), the
store named by its absolute path. With no compact_boundary record and no
compaction before, what was read stays stored and nothing is printed (a
log line, no failure). Which of these facts Claude Code's own summary
does not mention (by id, key, file or command) is logged, and stored once
as a system event after what the hook imported.

Every other event and source: nothing (a log line, when the log's
directory exists). The hook exits 0 whatever happens,
so as never to break the session: a failure (bad input, a cwd missing
or not absolute among it, a damaged or locked store, an unreadable
transcript) prints nothing on stdout and writes one line naming it to
the log, with the hint the other commands give (strata verify, which
process holds the store); every run writes one line.

The store is --db, a file (created if missing) or a postgres:// URL;
without it, .claude/strata.db in $CLAUDE_PROJECT_DIR, else in the cwd of
the hook's input, each only when absolute. The log is --log, else
strata.log beside a file store, or in the project's .claude directory
for a URL; past 1 MiB it is moved to strata.log.1. With no project to
put them in, nothing is made and the line goes to stderr.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				flagErr = errors.Newf("hook takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.run(cmd, flagErr)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.db, "db", "", "the store: a file (created if missing) or a postgres:// URL (default .claude/strata.db of the project)")
	f.StringVar(&o.log, "log", "", "the log file (default strata.log beside the store)")
	f.IntVar(&o.budget, "budget", companion.DefaultBudget, fmt.Sprintf("the token budget of the injected state (at least %d)", companion.MinBudget))
	f.DurationVar(&o.timeout, "timeout", defaultHookTimeout, "how long to wait for the store's lock, held by another hook")
	// A hook never exits 2, which PreCompact reads as "do not compact": a
	// bad flag is logged like any failure, and the hook does nothing.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		o.run(c, err)
		return nil
	})
	return cmd
}

// run runs the hook: nothing it meets makes it fail. usage is a problem
// of the command line, logged as a failure before anything is done.
func (o *claudeCodeHookOptions) run(cmd *cobra.Command, usage error) {
	in, inErr := companion.ReadInput(claudecode.Agent{}, cmd.InOrStdin())
	projectDir := os.Getenv("CLAUDE_PROJECT_DIR")
	db := o.db
	if db == "" {
		db = companion.DefaultStore(claudecode.Agent{}, projectDir, in.Cwd)
	}
	logPath := o.log
	if logPath == "" {
		logPath = companion.DefaultLog(claudecode.Agent{}, db, projectDir, in.Cwd)
	}
	line, output := o.hook(cmd, in, inErr, usage, db)
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var err error
	switch _, serr := os.Stat(filepath.Dir(logPath)); {
	case (logPath == "" || serr != nil) && inErr == nil && usage == nil && !in.Handled():
		// An event the hook leaves alone makes no directory for its line.
	case logPath == "":
		// No --db, no $CLAUDE_PROJECT_DIR, no absolute cwd: no project to
		// log in, nor to make a directory in.
		fmt.Fprintf(errOut, "strata claude-code hook: %s\n", line)
	default:
		if err = os.MkdirAll(filepath.Dir(logPath), 0o700); err == nil {
			err = companion.AppendLog(logPath, time.Now(), line)
		}
	}
	if err != nil {
		fmt.Fprintf(errOut, "strata claude-code hook: %s (the line: %s)\n", err, line)
	}
	if output != nil {
		if _, err := out.Write(output); err != nil {
			_ = companion.AppendLog(logPath, time.Now(), in.HookEventName+" FAILED writing the output: "+err.Error())
		}
	}
}

// hook does the work and returns the log line and the output to print
// (nil for none). A failure on the store carries the hints the other
// commands give (explain): run verify on a damaged store, which process
// holds a locked one, what a file that is not a store is.
func (o *claudeCodeHookOptions) hook(cmd *cobra.Command, in companion.Input, inErr, usage error, db string) (line string, output []byte) {
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
	case o.budget < companion.MinBudget:
		return failed("(the command line)", errors.Newf("--budget must be at least %d, got %d", companion.MinBudget, o.budget))
	case o.timeout <= 0:
		return failed("(the command line)", errors.Newf("--timeout must be positive, got %s", o.timeout))
	case !in.Handled():
		r := companion.Result{Input: in, Ignored: true}
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
	st, err := store.Open(db, store.Options{Create: true, LockTimeout: o.timeout})
	shown := shownDB(db) // a URL's password goes nowhere: not the log, not the context
	if err != nil {
		return failed("opening the store "+shown, explain(cmd, explainOpen(err), shown))
	}
	h, err := companion.New(st, claudecode.Agent{}, companion.Options{Budget: o.budget, DB: shown})
	if err != nil {
		st.Close()
		return failed("(setting up)", err)
	}
	r, err := h.RunTranscript(cmd.Context(), t)
	if cerr := st.Close(); err == nil && cerr != nil {
		err = errors.Wrap(cerr, "closing the store")
	}
	if err != nil {
		return failed("on "+shown, explain(cmd, err, shown))
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
