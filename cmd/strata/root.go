package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/internal/shell"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Exit codes of the strata command: the contract of every command.
const (
	exitOK       = 0 // success
	exitError    = 1 // the command failed
	exitUsage    = 2 // bad usage: unknown flag or command, wrong argument count, bad flag value
	exitProblems = 3 // verify found problems
)

// usageError marks an error as bad usage (exit 2).
type usageError struct{ err error }

// Error implements error.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the error marked as bad usage.
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{err: errors.Newf(format, args...)}
}

// exitCodeError is returned by a command that has already reported what went
// wrong and only needs the process to exit with code.
type exitCodeError struct{ code int }

// Error implements error.
func (e *exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the strata command line args with the given standard streams
// and returns the process exit code. It is main without signals and
// os.Exit, so that tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run under ctx. When ctx ends with an *interruptError as its
// cause — SIGINT or SIGTERM, see runMain — the command stops where it is,
// says what it stored (each command's closing lines), and the process exits
// 128 plus the signal's number: 130 after Ctrl-C, as shells report it.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.InitDefaultCompletionCmd() // after SetOut: it keeps the writer its scripts go to
	requireSubcommands(root)
	cmd, err := root.ExecuteContextC(ctx)
	asJSON := wantsJSON(cmd, args)
	var ie *interruptError
	if errors.As(context.Cause(ctx), &ie) {
		code := 128 + int(ie.sig)
		interrupted := fmt.Sprintf("interrupted by %s", signalName(ie.sig))
		if err == nil || errors.Is(err, context.Canceled) || errors.As(err, new(*exitCodeError)) {
			err = nil
		}
		if asJSON {
			if err == nil {
				err = errors.New(interrupted)
			}
			printJSONError(stderr, err, code)
			return code
		}
		fmt.Fprintf(stderr, "strata: %s\n", interrupted)
		if err != nil {
			printError(stderr, err)
		}
		return code
	}
	if err == nil {
		return exitOK
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	code := exitError
	err = explainKind(err)
	if db, ok := databaseOf(cmd, err); ok {
		err = explain(cmd, err, db)
	}
	if isUsage(err) {
		code = exitUsage
		if cmd == nil {
			cmd = root
		}
		err = errors.WithHintf(err, "run '%s --help' for usage", cmd.CommandPath())
	}
	if asJSON {
		printJSONError(stderr, err, code)
		return code
	}
	printError(stderr, err)
	return code
}

// wantsJSON reports whether the command line asked cmd for --json: the
// flag parsed, or, where parsing stopped at a bad flag, given among args
// before "--" to a command that takes it.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	if f == nil {
		return false
	}
	if f.Changed {
		return f.Value.String() == "true"
	}
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true":
			return true
		}
	}
	return false
}

// errorJSON is an error as a command given --json writes it to stderr: the
// message and hints of the text form (Error: …, Hint: …) and the exit code.
type errorJSON struct {
	Error    string   `json:"error"`
	Hints    []string `json:"hints"`
	ExitCode int      `json:"exit_code"`
}

// printJSONError writes err to w as one errorJSON line.
func printJSONError(w io.Writer, err error, code int) {
	_ = writeJSONLine(w, errorJSON{Error: err.Error(), Hints: nonNil(errors.GetAllHints(err)), ExitCode: code})
}

// isUsage reports whether err is bad usage: ours, or one of cobra's that
// do not pass through the flag error function.
func isUsage(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command ") || strings.HasPrefix(msg, "required flag")
}

// explain adds to an error of cmd on database db the hints that say what
// to do next: damage (run verify), a lock another process holds (which
// one; --timeout), a file that is not strata's (what it is), a session
// that does not exist (how to list them). A hint names a URL without its
// password (shownDB).
func explain(cmd *cobra.Command, err error, db string) error {
	if cmd.Name() != "verify" { // verify reports damage itself
		err = explainDamage(err, db)
	}
	switch {
	case errors.Is(err, store.ErrLocked):
		err = explainLocked(err, db, cmd.Name(), writers[cmd.Name()] && cmd.Flags().Lookup("timeout") != nil)
	case errors.Is(err, store.ErrNotStrata):
		err = explainForeign(err, db, cmd.Name())
	case isSessionNotFound(err):
		err = errors.WithHintf(err, "to list the sessions, run: strata sessions %s", shellQuote(shownDB(db)))
	}
	return err
}

// explainKind adds to an error that says an input event's kind is
// unknown the kinds there are. (A damaged record of a kind is the
// database's damage: explainDamage says what to run.)
func explainKind(err error) error {
	if !errors.Is(err, tier.ErrUnknownKind) || errors.Is(err, store.ErrCorrupt) {
		return err
	}
	kinds := tier.Kinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	return errors.WithHintf(err, "an event's kind is one of: %s", strings.Join(names, ", "))
}

// explainDamage adds to an error that says the database is damaged — read
// here, or by the debug handler of a live one — the hint to run verify: a
// reading command stops at the first damaged record it meets and exits 1,
// verify lists every problem.
func explainDamage(err error, db string) error {
	var he *HTTPError
	damaged := errors.Is(err, store.ErrCorrupt) ||
		errors.As(err, &he) && (he.Damaged || strings.Contains(he.Message, store.ErrCorrupt.Error()))
	if !damaged {
		return err
	}
	return errors.WithHintf(err, "the database is damaged; to list every problem it holds, run: strata verify %s", shellQuote(shownDB(db)))
}

// isSessionNotFound reports whether err says a session does not exist,
// read here or by a debug handler.
func isSessionNotFound(err error) bool {
	var he *HTTPError
	return errors.Is(err, store.ErrSessionNotFound) ||
		errors.As(err, &he) && strings.HasPrefix(he.Status, "404") && strings.Contains(he.Message, store.ErrSessionNotFound.Error())
}

// writers are the commands that open a database for writing: a lock
// another process holds is worth waiting for, and no URL serves them.
var writers = map[string]bool{"replay": true, "import": true, "demo": true, "copy": true, "compact": true,
	"fork": true, "prune": true, "vacuum": true}

// takesDB are the commands whose first argument is the database, unless
// --db gives it.
var takesDB = map[string]bool{"replay": true, "compact": true, "resume": true, "dump": true, "verify": true,
	"backup": true, "stats": true, "sessions": true, "demo": true, "copy": true, "serve": true,
	"fork": true, "prune": true, "vacuum": true}

// takesURL are the commands that take a running agent's debug handler's
// URL instead of a database: a lock another process holds is read
// through that process instead.
var takesURL = map[string]bool{"dump": true, "stats": true, "sessions": true, "resume": true,
	"backup": true, "verify": true}

// dbError marks an error as about the database db, where a command has two
// (copy's DST): run explains it for db, not the command's database.
type dbError struct {
	db  string
	err error
}

// Error implements error.
func (e *dbError) Error() string { return e.err.Error() }

// Unwrap returns the error marked.
func (e *dbError) Unwrap() error { return e.err }

// aboutDB marks err, when not nil, as about the database db.
func aboutDB(db string, err error) error {
	if err == nil {
		return nil
	}
	return &dbError{db: db, err: err}
}

// databaseOf returns the database that err of cmd is about, as given: the
// one aboutDB marked it with, else the command's own — its --db flag, or
// its first argument. ok is false for a command without one.
func databaseOf(cmd *cobra.Command, err error) (db string, ok bool) {
	var de *dbError
	if errors.As(err, &de) {
		return de.db, true
	}
	if cmd == nil {
		return "", false
	}
	if f := cmd.Flags().Lookup("db"); f != nil && f.Value.String() != "" {
		return f.Value.String(), true
	}
	if takesDB[cmd.Name()] {
		if args := cmd.Flags().Args(); len(args) > 0 {
			return args[0], true
		}
	}
	return "", false
}

// dbArg resolves the database of a command that takes it as its first
// argument and also as --db (flagDB): with --db, every argument is the
// command's own (rest); without, the first is the database. Neither is bad
// usage, naming the forms.
func dbArg(cmd *cobra.Command, flagDB string, args []string) (db string, rest []string, err error) {
	if flagDB != "" {
		return flagDB, args, nil
	}
	if len(args) == 0 {
		return "", nil, usagef("%s needs a database: give it as the first argument (strata %s) or as --db DB", cmd.Name(), cmd.Use)
	}
	return args[0], args[1:], nil
}

// shellQuote returns s as a shell word: as it is when it holds only
// characters a shell leaves alone, else in single quotes.
func shellQuote(s string) string {
	return shell.Quote(s)
}

// printError writes err as "Error: <message>", then one "Hint: <hint>" line
// per hint it carries.
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "Error: %s\n", err.Error())
	for _, h := range errors.GetAllHints(err) {
		fmt.Fprintf(w, "Hint: %s\n", h)
	}
}

// newRootCommand returns the strata command with every subcommand.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "strata",
		Short: "strata: a persistent hierarchical summary store for AI agents",
		Long: `strata stores an agent's raw log, compacts it into summary tiers, and refuses
to commit a recovery marker whose promise is false.

Every command that takes a database takes it as its first argument, DB, a
file or a postgres:// URL; replay, resume and demo also take it as --db DB,
and import only so (without --db it writes events to stdout), as do the
agents' commands (claude-code, codex, gemini); copy takes two, SRC and
DST. The commands that only read a database (dump, stats, sessions,
resume, backup, verify) also take the URL of a running agent's debug
handler instead, e.g.
http://127.0.0.1:6060/debug/strata.

--json prints a command's result as JSON: one document, or for replay,
compact and import one object per line (JSONL); an error then goes to
stderr as one JSON line, {"error", "hints", "exit_code"}, with the same exit
code. It is the one JSON flag:
replay, compact, import, sessions, dump, resume, verify, backup, copy, stats, eval, version
and claude-code status take it.

Exit codes: 0 success, 1 error, 2 bad usage, 3 verify found problems,
130 interrupted by Ctrl-C (143 by SIGTERM).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("a command is required")
		},
	}
	root.Version = versionText(readBuildInfo())
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().BoolP("version", "v", false, "print strata's version, as 'strata version' does")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.AddCommand(
		newReplayCommand(),
		newCompactCommand(),
		newDumpCommand(),
		newResumeCommand(),
		newVerifyCommand(),
		newBackupCommand(),
		newCopyCommand(),
		newForkCommand(),
		newPruneCommand(),
		newVacuumCommand(),
		newStatsCommand(),
		newDemoCommand(),
		newEvalCommand(),
		newImportCommand(),
		newServeCommand(),
		newSessionsCommand(),
		newVersionCommand(),
	)
	root.AddCommand(newAgentCommands()...)
	return root
}

// requireSubcommands makes every command below cmd that only groups
// others (cobra's completion, for one) a usage error when run without
// one of them or with an unknown one, as the root is: cobra would print
// its help and exit 0.
func requireSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		requireSubcommands(c)
		if !c.HasSubCommands() || c.Runnable() {
			continue
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			names := make([]string, 0, len(cmd.Commands()))
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			if len(args) > 0 {
				return usagef("%s: unknown command %q (want one of %s)", cmd.CommandPath(), args[0], strings.Join(names, ", "))
			}
			return usagef("%s needs a command: one of %s", cmd.CommandPath(), strings.Join(names, ", "))
		}
	}
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments
// taken and those given: "install takes no arguments, got 1 (extra)",
// "serve takes 1 argument (DB), got 0".
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		takes := "no arguments"
		switch len(names) {
		case 0:
		case 1:
			takes = "1 argument (" + names[0] + ")"
		default:
			takes = fmt.Sprintf("%d arguments (%s)", len(names), strings.Join(names, " "))
		}
		got := fmt.Sprint(len(args))
		if len(args) > 0 {
			got += " (" + strings.Join(args, " ") + ")"
		}
		return usagef("%s takes %s, got %s", cmd.Name(), takes, got)
	}
}

// addTimeoutFlag adds --timeout, the wait for the database's file lock.
func addTimeoutFlag(cmd *cobra.Command, p *time.Duration) {
	cmd.Flags().DurationVar(p, "timeout", store.DefaultLockTimeout,
		"how long to wait for the database's file lock before saying another process holds it")
}

// checkTimeout validates a --timeout value.
func checkTimeout(d time.Duration) error {
	if d <= 0 {
		return usagef("--timeout must be positive, got %s", d)
	}
	return nil
}

// openReadOnly opens the database at path for reading: a shared lock,
// waited for at most timeout, and never a byte written.
func openReadOnly(path string, timeout time.Duration) (*store.DB, error) {
	db, err := store.Open(path, store.Options{ReadOnly: true, LockTimeout: timeout})
	if err != nil {
		return nil, explainOpen(err)
	}
	return db, nil
}

// hintURL is the hint, when another process holds the database, of a
// command that takes a debug handler's URL (takesURL): it can ask that
// process instead.
const hintURL = "if it serves strata's debug handler (package debughttp), give its URL instead: http://127.0.0.1:6060/debug/strata"

// hintBackupURL is backup's hint when another process holds the database,
// in place of the store's "stop it, or read a backup".
const hintBackupURL = "another process has it open; if it serves strata's debug handler (package debughttp), back up through its URL: strata backup http://127.0.0.1:6060/debug/strata DEST; or wait longer with --timeout, e.g. --timeout 30s"

// explainOpen makes ErrLocked say plainly that another process holds the
// file; run adds which one (explainLocked).
func explainOpen(err error) error {
	if errors.Is(err, store.ErrLocked) {
		return errors.Wrap(err, "another process holds the database")
	}
	return err
}

// explainLocked adds to ErrLocked of the command name on db which
// processes hold it, where the system says (Linux: /proc/locks); for a
// command that takes a debug handler's URL, that it can read through the
// holder's (backup's hint replaces the store's, which points at a
// backup); and for a writing command with a --timeout, that --timeout
// waits longer.
func explainLocked(err error, db, name string, wait bool) error {
	if name == "backup" {
		err = errors.Mark(errors.Handled(err), store.ErrLocked) // drops the hints
		err = errors.WithHint(err, hintBackupURL)
	} else if takesURL[name] {
		err = errors.WithHint(err, hintURL)
	}
	if holders := lockHolders(db); len(holders) > 0 {
		err = errors.WithHintf(err, "held by %s", strings.Join(holders, ", "))
	}
	if wait {
		err = errors.WithHint(err, "--timeout waits longer for it, e.g. --timeout 30s")
	}
	return err
}

// writeJSON writes v as one indented JSON document, <, > and & left alone.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one JSON line, <, > and & left alone.
func writeJSONLine(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// addJSONFlag adds --json, the one flag by which every command prints its
// result as JSON.
func addJSONFlag(cmd *cobra.Command, p *bool, what string) {
	cmd.Flags().BoolVar(p, "json", false, "print "+what)
}

// closeDB closes db, keeping the first error.
func closeDB(db *store.DB, err *error) {
	if cerr := db.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}

// plural returns "1 session", "2 sessions".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
