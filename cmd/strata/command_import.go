package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// errImportNoSession is the cause of stdin imported into a database without
// --session: it has no file name to name a session after.
var errImportNoSession = errors.New("strata: import: no session for stdin")

// importOptions are the flags and arguments of `strata import`.
type importOptions struct {
	format     string
	session    string
	db         string
	dir        string
	sidechains bool
	json       bool
	timeout    time.Duration
	files      []string

	f transcript.Format // set by validate
}

// newImportCommand returns `strata import`.
func newImportCommand() *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import --format openai|anthropic|claude-code [--session ID] [--db DB] [--json] FILE...",
		Short: "Convert agent transcripts into events, or append them to a database",
		Long: `Convert transcripts into raw events (docs/events.md): OpenAI chat
messages (a JSON array, JSONL, or an object with "messages"), Anthropic
Messages (likewise, with "system"), or Claude Code session files
(~/.claude/projects/*/*.jsonl). "-" reads stdin.

Without --db the events go to stdout as JSONL, without seq or turn, so that
  strata import --format claude-code S.jsonl | strata replay --db DB -
stores and compacts them. The quirks met (renamed call ids, results for no
open call, skipped records …) are counted on stderr, one line per file.

With --db the events of each file are appended to the database (created if
missing) in one atomic append: all of a file or nothing of it. A line says
  imported file=F session=S events=N seq=A..B [counts]
The session is --session, else the file's name without its extension (a
Claude Code file is named after its session id); stdin needs --session.
Calls the session has open are passed on, so a later file can resolve them.

--json prints each file's line as a JSON object instead (on stdout with
--db, on stderr without): {"file", "session", "events", "first_seq",
"last_seq" (with --db), "report":{"records", "events", ... the counts}}.

The database is given as --db, not as the first argument as elsewhere:
import has a use without one — converting, to stdout — and every argument
is a FILE.

Invalid JSON stops the import with exit status 1, naming file and line;
nothing of that file is written or stored (earlier files are).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("import needs at least one FILE (\"-\" for stdin)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "the transcript format: openai, anthropic or claude-code (required)")
	f.StringVar(&o.session, "session", "", "the session of every file (default: each file's name without extension)")
	f.StringVar(&o.db, "db", "", "append to this database (created if missing) instead of writing JSONL to stdout")
	f.StringVar(&o.dir, "dir", "", "the agent's working directory: files under it are named relative to it in keys (Claude Code: each record's cwd)")
	f.BoolVar(&o.sidechains, "sidechains", false, "claude-code: keep the sub-agent (sidechain) records of a main session")
	addJSONFlag(cmd, &o.json, "each file's report as a JSON object")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags; its errors are bad usage.
func (o *importOptions) validate() error {
	if o.format == "" {
		return usagef("--format is required (openai, anthropic or claude-code)")
	}
	f, err := transcript.ParseFormat(o.format)
	if err != nil {
		return &usageError{err: errors.Wrap(err, "--format")}
	}
	o.f = f
	if o.session != "" {
		if err := store.CheckSession(o.session); err != nil {
			return &usageError{err: errors.Wrap(err, "--session")}
		}
	}
	if o.db != "" && o.session == "" {
		for _, name := range o.files {
			if name == "-" {
				return &usageError{err: errors.WithHint(errImportNoSession, "pass --session")}
			}
		}
	}
	return checkTimeout(o.timeout)
}

// sessionOf returns the session of the file called name: --session, else
// the file's base name without its extension ("" for stdin).
func (o *importOptions) sessionOf(name string) (string, error) {
	if o.session != "" {
		return o.session, nil
	}
	if name == "-" {
		return "", nil
	}
	base := filepath.Base(name)
	s := strings.TrimSuffix(base, filepath.Ext(base))
	if err := store.CheckSession(s); err != nil {
		return "", errors.WithHint(errors.Wrapf(err, "import: %s: the file name is no session id", name), "pass --session")
	}
	return s, nil
}

// run imports the files in order.
func (o *importOptions) run(ctx context.Context, stdin io.Reader, out, errOut io.Writer) (err error) {
	prog := newProgress(errOut, "import", "bytes", inputSize(o.files, stdin))
	defer prog.finish()
	var db *store.DB
	if o.db != "" {
		if db, err = store.Open(o.db, store.Options{Create: true, LockTimeout: o.timeout}); err != nil {
			return explainOpen(err)
		}
		defer closeDB(db, &err)
	}
	open := map[string][]tier.Open{} // without --db: the calls each session has open so far
	for _, name := range o.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		session, err := o.sessionOf(name)
		if err != nil {
			return err
		}
		seed := open[session]
		if db != nil {
			if seed, err = openCalls(db, session); err != nil {
				return err
			}
		}
		imp, err := o.readFile(name, stdin, session, seed, prog)
		if err != nil {
			return err
		}
		if db == nil {
			open[session] = imp.open
			prog.clear() // before stdout too: on a terminal both are one screen
			if _, err := out.Write(imp.jsonl); err != nil {
				return errors.Wrap(err, "import: writing events")
			}
			if o.json {
				if err := writeJSONLine(errOut, importJSON{File: imp.label, Session: session, Events: len(imp.events), Report: imp.report}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(errOut, "import: %s: %s\n", imp.label, imp.report)
			continue
		}
		if err := o.store(db, session, imp, out, prog); err != nil {
			return err
		}
	}
	return nil
}

// imported is one file, decoded whole.
type imported struct {
	label  string
	events []tier.Event
	lines  []int // the line of each event's record
	jsonl  []byte
	open   []tier.Open
	report transcript.Report
}

// readFile decodes the file called name ("-": stdin) whole.
func (o *importOptions) readFile(name string, stdin io.Reader, session string, seed []tier.Open, prog *progress) (*imported, error) {
	var in io.Reader = stdin
	label := "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, errors.Wrap(err, "import")
		}
		defer f.Close()
		in, label = f, name
	}
	d, err := transcript.NewDecoder(o.f, prog.reader(in), transcript.Options{
		File: label, Open: seed, Sidechains: o.sidechains, Dir: o.dir,
	})
	if err != nil {
		return nil, err
	}
	imp := &imported{label: label}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for {
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		imp.events = append(imp.events, e)
		imp.lines = append(imp.lines, d.Line())
		if o.db == "" {
			j := e.ToJSON(session)
			j.Seq, j.Turn = nil, nil // the session's own: replay assigns them
			if err := enc.Encode(j); err != nil {
				return nil, errors.Wrapf(err, "import: %s:%d: encoding an event", label, d.Line())
			}
		}
		prog.addEvents(1)
	}
	imp.jsonl, imp.open, imp.report = buf.Bytes(), d.Open(), d.Report()
	return imp, nil
}

// openCalls returns the calls session has open in db (none for a new
// session).
func openCalls(db *store.DB, session string) ([]tier.Open, error) {
	var open []tier.Open
	err := db.View(func(s *store.Snapshot) error {
		l, err := s.Ledger(session)
		if err != nil {
			return err
		}
		open = l.OpenList()
		return nil
	})
	if errors.Is(err, store.ErrSessionNotFound) {
		return nil, nil
	}
	return open, err
}

// store appends a decoded file to session in one append and reports it.
func (o *importOptions) store(db *store.DB, session string, imp *imported, out io.Writer, prog *progress) error {
	var res store.AppendResult
	if len(imp.events) > 0 {
		var err error
		res, err = db.Append(session, imp.events...)
		var ee *tier.EventError
		if errors.As(err, &ee) && ee.Index >= 0 && ee.Index < len(imp.lines) {
			return &transcript.LineError{File: imp.label, Line: imp.lines[ee.Index], Err: err}
		}
		if err != nil {
			return errors.Wrapf(err, "import: %s", imp.label)
		}
	}
	prog.clear()
	if o.json {
		return writeJSONLine(out, importJSON{File: imp.label, Session: session, Events: len(imp.events),
			FirstSeq: res.First, LastSeq: res.Last, Report: imp.report})
	}
	fields := imp.report.Fields()
	line := fmt.Sprintf("imported file=%s session=%s events=%d seq=%d..%d", fieldValue(imp.label), fieldValue(session), len(imp.events), res.First, res.Last)
	if len(fields) > 2 {
		line += " " + strings.Join(fields[2:], " ")
	}
	_, err := fmt.Fprintln(out, line)
	return err
}

// importJSON is a file's line of `import --json`.
type importJSON struct {
	File     string            `json:"file"`
	Session  string            `json:"session,omitempty"`
	Events   int               `json:"events"`
	FirstSeq uint64            `json:"first_seq,omitempty"`
	LastSeq  uint64            `json:"last_seq,omitempty"`
	Report   transcript.Report `json:"report"`
}
