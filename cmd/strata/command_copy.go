package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/store"
)

// copyOptions are the flags and arguments of `strata copy`.
type copyOptions struct {
	src, dst string
	sessions []string
	skip     bool // --skip-damaged
	json     bool
	timeout  time.Duration
	errOut   io.Writer // progress, on a terminal
}

// newCopyCommand returns `strata copy`.
func newCopyCommand() *cobra.Command {
	o := &copyOptions{}
	cmd := &cobra.Command{
		Use:   "copy [--session ID]... [--skip-damaged] [--json] SRC DST",
		Short: "Copy sessions from one database into another, a file or PostgreSQL",
		Long: `Copy sessions from SRC into DST, each a database file or a postgres:// URL:
a file into PostgreSQL to move an agent into a fleet, PostgreSQL into a file to
take a session home, or a file into a file. Every session of SRC, or those
--session names (repeat it); each is copied byte for byte — its state, its
events, its nodes, markers, checkpoints, ledger and audit — from one read
transaction of SRC, so that DST resumes and dumps it as SRC does. A fork
(strata fork) reads its parent's raw log up to its fork point: its parent,
and the parent's parent, come along, a line each "ancestor session=P"
after the closing line. A line says "copied DST sessions=S present=P
events=E bytes=B"; --json prints {"src", "dst", "sessions", "ids",
"present", "completed", "ancestors", "events", "bytes"} instead ("ids"
copied, "present" found in DST as they are in SRC, "ancestors" the parents
taken along).
A URL is shown without its password.

A DST file that does not exist is created: built beside it, fsynced, and
given its name only once whole — a failure, damage in SRC or Ctrl-C leaves
no file. An existing DST file is opened for writing (no other process may
hold it), and a DST URL's schema gets strata's tables if it has none.

copy refuses, before it writes anything, a DST that holds another session of
an id it is to copy, naming every such id (exit 1); --session picks the
others. A session DST holds as it is in SRC, every value the same — copied
before — is left as it is ("present"). Into an existing DST, sessions are
written in transactions of at most 1,024 values, a session's state last: a
copy stopped midway (Ctrl-C, an error) leaves the session it was writing
without its state — verify reports it, reads refuse it — and the same copy
run again completes it ("completed") and copies the rest. A DST session
without its state is taken for such a copy only when its events are SRC's
first, byte for byte, and it holds no others: else it is another session,
refused.

Damage in SRC stops the copy. --skip-damaged reads each session of SRC
whole before anything is written, copies those that read intact, and lists
the others, one line each after the closing line:
  damaged session=S error=…
(--json: "damaged": [{"id", "error"}]); the exit status is then 1, as for
any damage read, after the intact sessions are copied.`,
		Args: exactArgs("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.src, o.dst = args[0], args[1]
			if err := o.validate(); err != nil {
				return err
			}
			o.errOut = cmd.ErrOrStderr()
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringArrayVar(&o.sessions, "session", nil, "copy the session with this id (repeat it for more); without it, every session")
	cmd.Flags().BoolVar(&o.skip, "skip-damaged", false, "copy every session of SRC that reads intact, and list those that do not (exit 1)")
	addJSONFlag(cmd, &o.json, `{"src", "dst", "sessions", "ids", "present", "completed", "events", "bytes"} instead of the line`)
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd) // SRC's
	return cmd
}

// validate checks the arguments; its errors are bad usage.
func (o *copyOptions) validate() error {
	for _, id := range o.sessions {
		if err := store.CheckSession(id); err != nil {
			return &usageError{err: errors.Wrap(err, "--session")}
		}
	}
	for _, db := range []string{o.src, o.dst} {
		switch {
		case db == "" || db == "-":
			return usagef("copy: %q is no database: SRC and DST are database files or postgres:// URLs", db)
		case isURL(db):
			return &usageError{err: errors.WithHintf(errors.Newf("copy: %s is a debug handler's URL: copy reads and writes databases", db),
				"write a backup of it first (strata backup %s agent.db), then copy that", shellQuote(db))}
		}
	}
	if o.src == o.dst || sameFile(o.src, o.dst) {
		return usagef("copy: SRC and DST are the same database")
	}
	return checkTimeout(o.timeout)
}

// sameFile reports whether a and b name one existing file.
func sameFile(a, b string) bool {
	fa, aerr := os.Stat(a)
	fb, berr := os.Stat(b)
	return aerr == nil && berr == nil && os.SameFile(fa, fb)
}

// run copies the sessions.
func (o *copyOptions) run(ctx context.Context, out io.Writer) (err error) {
	src, err := openReadOnly(o.src, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(src, &err)
	var dst *store.DB
	if _, serr := os.Stat(o.dst); postgres.IsURL(o.dst) || serr == nil {
		if dst, err = store.Open(o.dst, store.Options{Create: postgres.IsURL(o.dst), LockTimeout: o.timeout}); err != nil {
			return aboutDB(o.dst, errors.Wrap(explainOpen(err), "copy: DST"))
		}
		defer closeDB(dst, &err)
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return aboutDB(o.dst, errors.Wrap(serr, "copy: DST"))
	} else if err := checkParentDir(o.dst); err != nil {
		return aboutDB(o.dst, errors.Wrap(err, "copy: DST"))
	}
	var res store.CopyResult
	err = src.View(func(s *store.Snapshot) error {
		prog := copyProgress(o.errOut, "copy")
		defer prog.finish()
		opts := store.CopyOptions{Sessions: o.sessions, Progress: prog.copied, SkipDamaged: o.skip}
		var err error
		if dst != nil {
			res, err = s.Copy(ctx, dst, opts)
		} else {
			res, err = s.CopyFile(ctx, o.dst, false, opts)
		}
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted: the error goes unprinted; say what was stored.
			switch {
			case dst == nil:
				fmt.Fprintf(o.errOut, "copy: stopped; DST was not made\n")
			case res.Unfinished != "":
				fmt.Fprintf(o.errOut, "copy: stopped after %s copied whole; %s\n", plural(len(res.Sessions), "session"), unfinishedHint(res.Unfinished))
			default:
				fmt.Fprintf(o.errOut, "copy: stopped after %s copied whole\n", plural(len(res.Sessions), "session"))
			}
		}
		if errors.Is(err, store.ErrDestination) {
			err = aboutDB(o.dst, err)
		}
		return o.explain(err, res)
	}
	if err := o.report(out, res); err != nil {
		return err
	}
	return damagedError(res.Damaged)
}

// errCopyDamaged is the cause of a copy --skip-damaged that left sessions
// out for damage.
var errCopyDamaged = errors.New("copy: sessions of SRC are damaged, not copied")

// damagedError is the error of a copy that left the damaged sessions out:
// nil for none. It is damage (store.ErrCorrupt), and says what to run.
func damagedError(damaged []store.DamagedSession) error {
	if len(damaged) == 0 {
		return nil
	}
	ids := make([]string, len(damaged))
	for i, d := range damaged {
		ids[i] = fieldValue(d.ID)
	}
	return errors.Mark(errors.Newf("%w: %s", errCopyDamaged, strings.Join(ids, ", ")), store.ErrCorrupt)
}

// unfinishedHint says what a copy stopped midway left in DST.
func unfinishedHint(id string) string {
	return fmt.Sprintf("session %s is in DST without its state (verify reports it): the same strata copy run again completes it", fieldValue(id))
}

// explain adds to an error of the copy what to do next, and what was
// copied before it.
func (o *copyOptions) explain(err error, res store.CopyResult) error {
	var se *store.SessionExistsError
	if errors.As(err, &se) {
		return errors.WithHint(err, "nothing was copied: copy into another database, or name the other sessions with --session ID")
	}
	if len(res.Sessions) > 0 {
		err = errors.WithHintf(err, "%s copied whole before it", plural(len(res.Sessions), "session"))
	}
	if res.Unfinished != "" {
		err = errors.WithHint(err, unfinishedHint(res.Unfinished))
	}
	return err
}

// copyJSON is what `copy --json` prints.
type copyJSON struct {
	Src       string        `json:"src"`
	Dst       string        `json:"dst"`
	Sessions  int           `json:"sessions"`
	IDs       []string      `json:"ids"`
	Present   []string      `json:"present"`
	Completed []string      `json:"completed"`
	Ancestors []string      `json:"ancestors"` // taken along for the forks named
	Events    uint64        `json:"events"`
	Bytes     int64         `json:"bytes"`
	Damaged   []damagedJSON `json:"damaged"` // left out (--skip-damaged)
}

// damagedJSON is a session copy --skip-damaged left out.
type damagedJSON struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// report says what was copied.
func (o *copyOptions) report(out io.Writer, res store.CopyResult) error {
	damaged := make([]damagedJSON, len(res.Damaged))
	for i, d := range res.Damaged {
		damaged[i] = damagedJSON{ID: d.ID, Error: d.Err.Error()}
	}
	if o.json {
		return writeJSON(out, copyJSON{Src: shownDB(o.src), Dst: shownDB(o.dst), Sessions: len(res.Sessions),
			IDs: nonNil(res.Sessions), Present: nonNil(res.Present), Completed: nonNil(res.Completed), Ancestors: nonNil(res.Ancestors),
			Events: res.Events, Bytes: res.Bytes, Damaged: damaged})
	}
	_, err := fmt.Fprintf(out, "copied %s sessions=%d present=%d events=%d bytes=%d\n", shownDB(o.dst),
		len(res.Sessions), len(res.Present), res.Events, res.Bytes)
	for _, a := range res.Ancestors {
		if err == nil {
			_, err = fmt.Fprintf(out, "ancestor session=%s\n", fieldValue(a))
		}
	}
	for _, d := range damaged {
		if err == nil {
			_, err = fmt.Fprintf(out, "damaged session=%s error=%s\n", fieldValue(d.ID), strconv.Quote(d.Error))
		}
	}
	return err
}

// shownDB returns a database argument as output shows it: a URL without
// its password, in its user part or its password parameter (pgx takes
// either).
func shownDB(db string) string {
	u, err := url.Parse(db)
	if err != nil || !postgres.IsURL(db) {
		return db
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// pgURLs finds the postgres:// and postgresql:// URLs of a command line.
var pgURLs = regexp.MustCompile(`postgres(ql)?://[^\s'"]+`)

// shownCommand returns a command line (a hook's, in Claude Code's
// settings) as output shows it: every PostgreSQL URL in it as shownDB
// shows it. A word holding a password is found as the shell reads the
// line, and replaced where it stands quoted as install quotes it
// (shellQuote), so that a password with a quote in it does not show past
// the quote; every other URL is found in the text.
func shownCommand(command string) string {
	if words, ok := companion.ShellWords(command, nil); ok {
		for _, w := range words {
			if holdsPassword(w) {
				command = strings.ReplaceAll(command, shellQuote(w), shellQuote(shownDB(w)))
			}
		}
	}
	return pgURLs.ReplaceAllStringFunc(command, shownDB)
}

// holdsPassword reports whether db is a URL that holds a password.
func holdsPassword(db string) bool {
	u, err := url.Parse(db)
	if err != nil || !postgres.IsURL(db) {
		return false
	}
	_, has := u.User.Password()
	return has || u.Query().Has("password")
}

// copyProgress returns the progress line of a copy between databases,
// counting events, or nil when progress is off for w.
func copyProgress(w io.Writer, label string) *progress {
	if w == nil {
		return nil
	}
	return newProgress(w, label, "events", 0)
}

// copied is store.CopyOptions.Progress: done of total events written.
func (p *progress) copied(done, total uint64) { p.set(int64(done), int64(total)) }
