package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/store"

	"github.com/strata-go/strata/tier"
)

// verifyOptions are the flags and arguments of `strata verify`.
type verifyOptions struct {
	json      bool
	inProcess bool
	progress  bool // the child: send progress lines
	timeout   time.Duration
	db        string
}

// newVerifyCommand returns `strata verify`.
func newVerifyCommand() *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [--json] DB|URL",
		Short: "Check a database deeply: bbolt's structure and every strata invariant",
		Long: `Check the database: bbolt's own consistency check plus every store invariant
(gapless seqs, the ledger equal to a replay of the raw log, roots covering
exactly the compacted prefix, every valid marker and checkpoint consistent
with the frame, every record decodes, the format version known).

Prints "ok", or one line per problem and exits with status 3; then
'strata copy --skip-damaged DB NEW' copies every session that reads intact
into a new database and lists the others (a backup copies the file as it
is, damage and all). The check runs
in a child process, so that a file damaged enough to make bbolt fault is
reported ("verify crashed: ...", status 3) instead of taking the check down.
A database that cannot be opened at all (missing, empty, not strata, newer
format, held by another process) is an error: status 1.

--json prints one document instead, {"ok", "sessions", "events", "nodes",
"problems":[{"session", "what"}]} ("session" absent for a problem of the
file as a whole), with the same exit status.

DB is a file or a postgres:// URL, or the URL of a running agent's debug
handler: a handler's hot backup is fetched into a temporary file, checked,
and removed.

On a terminal, progress (sessions and raw events checked) is shown on
stderr, on one line that is cleared at the end; piped, verify is quiet.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			if o.inProcess {
				return o.runChild(cmd.OutOrStdout())
			}
			if isURL(o.db) {
				return o.runRemote(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return o.runParent(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addJSONFlag(cmd, &o.json, "one JSON document")
	cmd.Flags().BoolVar(&o.inProcess, "in-process", false, "run the check in this process, speaking the parent's line protocol")
	_ = cmd.Flags().MarkHidden("in-process")
	cmd.Flags().BoolVar(&o.progress, "progress", false, "with --in-process: send progress lines")
	_ = cmd.Flags().MarkHidden("progress")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags; its errors are bad usage.
func (o *verifyOptions) validate() error { return checkTimeout(o.timeout) }

// verifyMsg is one line of the protocol the child speaks on its stdout: a
// problem, an error that kept the check from running, or the end.
type verifyMsg struct {
	Problem  *store.Problem  `json:"problem,omitempty"`
	Error    *string         `json:"error,omitempty"`
	Hints    []string        `json:"hints,omitempty"`
	Progress *verifyProgress `json:"progress,omitempty"`
	Done     bool            `json:"done,omitempty"`
	Problems int             `json:"problems,omitempty"`
	Counts   *verifyCounts   `json:"counts,omitempty"` // with Done
}

// verifyCounts is what the check went through.
type verifyCounts struct {
	Sessions int    `json:"sessions"`
	Events   uint64 `json:"events"`
	Nodes    int    `json:"nodes"`
}

// verifyJSON is what `verify --json` prints.
type verifyJSON struct {
	OK bool `json:"ok"`
	verifyCounts
	Problems []store.Problem `json:"problems"`
}

// verifyProgress is how far the check has got.
type verifyProgress struct {
	Sessions      int    `json:"sessions"`
	TotalSessions int    `json:"total_sessions"`
	Events        uint64 `json:"events"`
	TotalEvents   uint64 `json:"total_events"`
}

// progressInterval spaces progress lines: often enough to look alive.
const progressInterval = 200 * time.Millisecond

// runChild runs the check in this process and reports it in the protocol.
func (o *verifyOptions) runChild(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	send := func(m verifyMsg) error { return enc.Encode(m) }
	problem := func(p store.Problem) verifyMsg { return verifyMsg{Problem: &p} }

	var problems []store.Problem
	var counts verifyCounts
	db, err := openReadOnly(o.db, o.timeout)
	switch {
	case errors.Is(err, store.ErrCorrupt):
		problems = append(problems, store.Problem{What: err.Error()}) // found damaged: a problem, not a failure to check
	case err != nil:
		// The hints run would add, had the error not crossed a process.
		switch {
		case errors.Is(err, store.ErrNotStrata):
			err = explainForeign(err, o.db, "verify")
		case errors.Is(err, store.ErrLocked):
			err = explainLocked(err, o.db, "verify", false)
		}
		msg := err.Error()
		if serr := send(verifyMsg{Error: &msg, Hints: errors.GetAllHints(err)}); serr != nil {
			return serr
		}
		return &exitCodeError{code: exitError}
	default:
		var vo store.VerifyOptions
		if o.progress {
			var p verifyProgress
			last := time.Now()
			report := func(force bool) {
				if force || time.Since(last) >= progressInterval {
					last = time.Now()
					q := p
					_ = send(verifyMsg{Progress: &q}) // a lost progress line is no failure
				}
			}
			vo.Progress = func(done, total int) { p.Sessions, p.TotalSessions = done, total; report(done == total) }
			vo.Events = func(done, total uint64) { p.Events, p.TotalEvents = done, total; report(false) }
		}
		rep, verr := db.Verify(vo)
		cerr := db.Close()
		if verr != nil {
			msg := verr.Error()
			if serr := send(verifyMsg{Error: &msg, Hints: errors.GetAllHints(verr)}); serr != nil {
				return serr
			}
			return &exitCodeError{code: exitError}
		}
		problems = append(problems, rep.Problems...)
		counts = verifyCounts{Sessions: rep.Sessions, Events: rep.Events, Nodes: rep.Nodes}
		if cerr != nil {
			problems = append(problems, store.Problem{What: "closing the database: " + cerr.Error()})
		}
	}
	for _, p := range problems {
		if err := send(problem(p)); err != nil {
			return err
		}
	}
	if err := send(verifyMsg{Done: true, Problems: len(problems), Counts: &counts}); err != nil {
		return err
	}
	if len(problems) > 0 {
		return &exitCodeError{code: exitProblems}
	}
	return nil
}

// maxChildStderr bounds what is kept of the child's stderr (a Go panic's
// traceback) to relay when it crashes.
const maxChildStderr = 64 << 10

// runParent runs this executable again as `verify --in-process DB`, relays
// its problems, and reports a child that dies or speaks anything but the
// protocol as a problem: the file damaged it.
func (o *verifyOptions) runParent(ctx context.Context, out, errOut io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return errors.Wrap(err, "verify: finding this executable to run the check in a child process")
	}
	args := []string{"verify", "--in-process", "--timeout", o.timeout.String()}
	prog := newProgress(errOut, "verify", "events", 0)
	defer prog.finish()
	if prog != nil {
		args = append(args, "--progress")
	}
	child := exec.CommandContext(ctx, exe, append(args, "--", o.db)...)
	stderr := &capBuffer{max: maxChildStderr}
	child.Stderr = stderr
	pipe, err := child.StdoutPipe()
	if err != nil {
		return errors.Wrap(err, "verify")
	}
	if err := child.Start(); err != nil {
		return errors.Wrap(err, "verify: starting the check in a child process")
	}

	var (
		problems int
		found    []store.Problem // with --json: printed at the end
		done     *verifyMsg
		failed   *verifyMsg
		bad      string // how the child broke the protocol
	)
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m verifyMsg
		line := sc.Bytes()
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil || done != nil || failed != nil {
			bad = fmt.Sprintf("unexpected output %q", truncate(string(line), 200))
			break
		}
		switch {
		case m.Progress != nil && m.Problem == nil && m.Error == nil && !m.Done:
			if p := m.Progress; prog != nil {
				if p.TotalSessions > 0 {
					prog.setNote(fmt.Sprintf("%d/%d sessions", p.Sessions, p.TotalSessions))
				}
				prog.set(int64(p.Events), int64(p.TotalEvents))
			}
		case m.Problem != nil && m.Error == nil && !m.Done:
			prog.clear()
			problems++
			if o.json {
				found = append(found, *m.Problem)
			} else {
				fmt.Fprintln(out, oneLine(m.Problem.String()))
			}
		case m.Error != nil && m.Problem == nil && !m.Done:
			failed = &m
		case m.Done && m.Problem == nil && m.Error == nil:
			done = &m
		default:
			bad = fmt.Sprintf("unexpected output %q", truncate(string(line), 200))
		}
		if bad != "" {
			break
		}
	}
	if err := sc.Err(); err != nil && bad == "" {
		bad = "unreadable output: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, pipe) // let the child finish writing
	waitErr := child.Wait()
	prog.finish()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	code := child.ProcessState.ExitCode()

	switch {
	case bad == "" && failed != nil && code == exitError:
		err := errors.New(*failed.Error)
		for _, h := range failed.Hints {
			err = errors.WithHint(err, h)
		}
		return err
	case bad == "" && done != nil && done.Problems == problems && code == exitOK && problems == 0:
		if o.json {
			return o.printJSON(out, done.Counts, nil)
		}
		_, err := fmt.Fprintln(out, "ok")
		return err
	case bad == "" && done != nil && done.Problems == problems && code == exitProblems && problems > 0:
		if o.json {
			if err := o.printJSON(out, done.Counts, found); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(errOut, "Hint: to copy every session that reads intact into a new database, run: strata copy --skip-damaged %s NEW.db\n", shellQuote(shownDB(o.db)))
		}
		return &exitCodeError{code: exitProblems}
	}

	// The child crashed (a signal, a Go panic's exit status 2) or broke the
	// protocol: the damage is the problem.
	why := "no result"
	switch {
	case waitErr != nil && bad != "":
		why = waitErr.Error() + ", " + bad
	case waitErr != nil:
		why = waitErr.Error()
	case bad != "":
		why = bad
	}
	crash := store.Problem{What: "verify crashed: " + why}
	if o.json {
		if err := o.printJSON(out, nil, append(found, crash)); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, crash.What)
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		fmt.Fprintf(errOut, "verify: the check's output on stderr:\n%s\n", s)
	}
	return &exitCodeError{code: exitProblems}
}

// printJSON prints the --json document: the counts the check reached
// (nil: none, it crashed) and the problems found.
func (o *verifyOptions) printJSON(out io.Writer, counts *verifyCounts, problems []store.Problem) error {
	doc := verifyJSON{OK: len(problems) == 0, Problems: nonNil(problems)}
	if counts != nil {
		doc.verifyCounts = *counts
	}
	return writeJSON(out, doc)
}

// capBuffer keeps the first max bytes written to it and discards the rest.
type capBuffer struct {
	buf bytes.Buffer
	max int
}

// Write implements io.Writer; it never fails.
func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// String returns what was kept.
func (b *capBuffer) String() string { return b.buf.String() }

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return tier.TruncateUTF8(s, n) + "…"
}
