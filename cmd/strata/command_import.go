package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// errImportNoSession is the cause of a conversation without a name (one
// read from stdin, in a format without ids) imported into a database
// without --session.
var errImportNoSession = errors.New("strata: import: no session for a conversation without an id")

// maxImportTries bounds how often import decodes a file again when
// another importer stored records of its sessions meanwhile.
const maxImportTries = 8

// importOptions are the flags and arguments of `strata import`.
type importOptions struct {
	format     string
	session    string
	db         string
	dir        string
	sidechains bool
	policyFlags
	policySet  bool // a policy flag was given
	timeoutSet bool // --timeout was given
	json       bool
	timeout    time.Duration
	files      []string

	compactHint string // what to run when events were stored, not compacted

	f transcript.Format // set by validate
}

// newImportCommand returns `strata import`.
func newImportCommand() *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import --format openai|anthropic|claude-code|codex|gemini [--session ID] [--db DB [policy flags]] [--json] FILE...",
		Short: "Convert agent transcripts into events, or store and compact them in a database",
		Long: `Convert transcripts into raw events (docs/events.md): OpenAI chat messages,
Anthropic Messages, Claude Code session files (~/.claude/projects/*/*.jsonl),
Codex rollouts (~/.codex/sessions/Y/M/D/rollout-*.jsonl) or Gemini CLI chats
(~/.gemini/tmp/<project>/chats/session-*.jsonl or .json). "-" reads stdin.

A file holds one conversation or several: a JSON array or JSONL of messages,
an object holding them under "messages" (or "input", "chat_messages",
"history", "conversation", "conversations", "turns", "steps", "trajectory"),
or a list of such objects (a JSON array, or one per JSONL line). Each
conversation is the session of its own id: a Claude Code record's sessionId
(a sub-agent's file: <sessionId>/agent-<agentId>), a conversation object's
id, conversation_id, session_id or uuid. One without an id is named after
the file (its name without extension), or <name>-<n> for the n-th of a file
that holds a list of them; alone on stdin it has no name (its events carry
no session; --db needs --session). --session puts every conversation in one
session.

Without --db the events go to stdout as JSONL, without seq or turn, each
with its session and the ref of the record it came from, so that
  strata import --format claude-code S.jsonl | strata replay DB -
stores and compacts them. The quirks met (renamed call ids, results for no
open call, skipped records …) are counted on stderr, one line per session.

With --db the events of each session of a file are appended to the database
(created if missing, in a directory that exists) in batches of 10,000
once the whole file has decoded, and compacted as replay compacts
them (the extractive summarizer; --window, --share, --every-tokens, --every,
--every-events, --fold, --max-roots and --budget as replay's). A line per session says
  imported file=F session=S events=N seq=A..B [known=K] [counts]
then one per compaction, as replay prints them, and a closing line sums up.
Importing is idempotent: a record whose events the session holds already
(known by its ref: a Claude Code record's uuid, else its position in its
conversation and a hash of its bytes) is left out and counted as known, so
a file imported again adds nothing (events=0 known=K: K records, not
events, left out) and a file that grew
adds only its new records. Calls the session has open are passed on, so a
later file can resolve them.

Invalid JSON stops the import with exit status 1, naming file and line; so
does a file in which no record is of a kind the format knows, naming what
it holds. Nothing of that file is written or stored (earlier files are); a
database the command created and stored nothing in is removed (the file, or
the tables it made in a PostgreSQL schema).

--json prints JSON lines instead: with --db, one object per session stored
({"type":"imported", "file", "session", "events", "first_seq", "last_seq",
"report":{"records", "events", "known", ... the counts}}), one per
compaction as replay --json prints them, and a closing {"type":"summary",
"files", "sessions", "events", "known", "compacted", "refused"}; without
--db, the events stay JSONL on stdout and each session's counts go to
stderr as such objects.

The database is given as --db, not as the first argument as elsewhere:
import has a use without one (converting, to stdout), and every argument is
a FILE.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("import needs at least one FILE (\"-\" for stdin)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			o.timeoutSet = cmd.Flags().Changed("timeout")
			for _, name := range policyFlagNames {
				o.policySet = o.policySet || cmd.Flags().Changed(name)
			}
			if err := o.validate(); err != nil {
				return err
			}
			o.compactHint = compactHint(cmd, o.db)
			return o.run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "the transcript format: openai, anthropic, claude-code, codex or gemini (required)")
	f.StringVar(&o.session, "session", "", "the session of every conversation (default: each conversation's id, else the file's name)")
	f.StringVar(&o.db, "db", "", "store and compact in this database, a file (created if missing; its directory must exist) or a postgres:// URL, instead of writing JSONL to stdout")
	f.StringVar(&o.dir, "dir", "", "the agent's working directory: files under it are named relative to it in keys (Claude Code: each record's cwd)")
	f.BoolVar(&o.sidechains, "sidechains", false, "claude-code: keep the sub-agent (sidechain) records of a main session")
	o.policyFlags.add(f)
	addJSONFlag(cmd, &o.json, "JSON lines: with --db one object per session stored and per compaction, and the closing one, on stdout; without, each session's counts on stderr")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags; its errors are bad usage.
func (o *importOptions) validate() error {
	if o.format == "" {
		return usagef("--format is required (openai, anthropic, claude-code, codex or gemini)")
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
	if o.db == "" && o.policySet {
		return usagef("--window, --share, --every-tokens, --every, --every-events, --fold, --max-roots and --budget apply only with --db")
	}
	if o.db == "" && o.timeoutSet {
		return usagef("--timeout applies only with --db: without a database there is no lock to wait for")
	}
	if o.sidechains && f != transcript.ClaudeCode {
		return usagef("--sidechains applies only to --format claude-code")
	}
	if err := o.policyFlags.validate(); err != nil {
		return err
	}
	return checkTimeout(o.timeout)
}

// sessionOf returns the session of the conversation conv of the file
// called label: --session, else conv, which must be a session id. A
// conversation without a name has no session ("" on stdout; with --db an
// error).
func (o *importOptions) sessionOf(conv, label string) (string, error) {
	switch {
	case o.session != "":
		return o.session, nil
	case conv == "" && o.db != "":
		return "", &usageError{err: errors.WithHint(errors.Wrapf(errImportNoSession, "%s", label), "pass --session")}
	case conv == "":
		return "", nil
	}
	if err := store.CheckSession(conv); err != nil {
		return "", errors.WithHint(errors.Wrapf(err, "import: %s: conversation %q is no session id", label, conv), "pass --session")
	}
	return conv, nil
}

// run imports the files in order.
func (o *importOptions) run(ctx context.Context, stdin io.Reader, out, errOut io.Writer) (err error) {
	prog := newProgress(errOut, "import", "bytes", inputSize(o.files, stdin))
	stdin = newContextReader(ctx, stdin) // Ctrl-C ends a read blocked on a pipe
	defer prog.finish()
	if o.db == "" {
		return o.toStdout(ctx, stdin, out, errOut, prog)
	}
	db, err := openToWrite(o.db, store.Options{LockTimeout: o.timeout})
	if err != nil {
		return err
	}
	defer closeWritten(db, &err) // a failed import leaves no new empty database
	imp, err := newImporter(db, o, out, prog)
	if err != nil {
		return err
	}
	defer func() {
		prog.clear()
		if o.json {
			io.WriteString(out, jsonLine(importSummaryJSON{Type: "summary", Files: imp.files, Sessions: len(imp.r.sessions),
				Events: imp.r.events, Known: imp.known, Compacted: imp.r.compacted, Refused: imp.r.refused}))
			return
		}
		fmt.Fprintf(out, "imported files=%d sessions=%d events=%d known=%d compacted=%d refused=%d\n",
			imp.files, len(imp.r.sessions), imp.r.events, imp.known, imp.r.compacted, imp.r.refused)
	}()
	for _, name := range o.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := imp.file(ctx, name, stdin); err != nil {
			return err
		}
	}
	return nil
}

// input returns the file called name ("-": stdin, read whole so that it can
// be read again) and its label, counted by prog the first time.
func input(name string, stdin io.Reader, prog *progress) (open func() (io.ReadCloser, error), label string, err error) {
	if name == "-" {
		b, err := io.ReadAll(prog.reader(stdin))
		if err != nil {
			return nil, "", errors.Wrap(err, "import: reading stdin")
		}
		return func() (io.ReadCloser, error) {
			return struct {
				*bytes.Reader // an io.ReaderAt: a large conversation object is read again
				io.Closer
			}{bytes.NewReader(b), io.NopCloser(nil)}, nil
		}, "stdin", nil
	}
	first := true
	return func() (io.ReadCloser, error) {
		f, err := os.Open(name)
		if err != nil {
			return nil, errors.Wrap(err, "import")
		}
		if !first {
			return f, nil
		}
		first = false
		return struct {
			io.Reader
			io.ReaderAt // a large conversation object is read again (transcript.NewDecoder)
			io.Closer
		}{prog.reader(f), f, f}, nil
	}, name, nil
}

// read decodes the file called name ("-": stdin) whole in o's format, each
// conversation into the session target says.
func (o *importOptions) read(in io.Reader, name string, target func(string) (transcript.Target, error)) ([]transcript.Session, error) {
	ss, _, err := transcript.Read(o.f, in, o.decodeOptions(name, target))
	return ss, o.readErr(err)
}

// decoder returns a Decoder of the file called name ("-": stdin) in o's
// format, each conversation into the session target says.
func (o *importOptions) decoder(in io.Reader, name string, target func(string) (transcript.Target, error)) (*transcript.Decoder, error) {
	return transcript.NewDecoder(o.f, in, o.decodeOptions(name, target))
}

// decodeOptions are the transcript options of the file called name.
func (o *importOptions) decodeOptions(name string, target func(string) (transcript.Target, error)) transcript.Options {
	file := name
	if name == "-" {
		file = "" // stdin: no name to give a conversation
	}
	return transcript.Options{File: file, Target: target, Sidechains: o.sidechains, Dir: o.dir}
}

// readErr hints at the format when a file holds nothing of it.
func (o *importOptions) readErr(err error) error {
	if errors.Is(err, transcript.ErrNothingRecognized) {
		err = errors.WithHintf(err, "is --format %s right? the formats are openai, anthropic, claude-code, codex and gemini (strata import --help)", o.f)
	}
	return err
}

// toStdout writes the events of each file as JSONL, and each session's
// counts to errOut.
func (o *importOptions) toStdout(ctx context.Context, stdin io.Reader, out, errOut io.Writer, prog *progress) error {
	open := map[string][]tier.Event{} // the calls each session has open so far
	for _, name := range o.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		opener, label, err := input(name, stdin, prog)
		if err != nil {
			return err
		}
		in, err := opener()
		if err != nil {
			return err
		}
		ss, err := o.read(in, name, func(conv string) (transcript.Target, error) {
			session, err := o.sessionOf(conv, label)
			return transcript.Target{Session: session, Open: open[session]}, err
		})
		in.Close()
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for _, s := range ss {
			for i := range s.Events {
				j := s.Events[i].ToJSON(s.ID)
				j.Seq, j.Turn = nil, nil // the session's own: replay assigns them
				if err := enc.Encode(j); err != nil {
					return errors.Wrapf(err, "import: %s:%d: encoding an event", label, s.Lines[i])
				}
			}
			prog.addEvents(int64(len(s.Events)))
			open[s.ID] = s.Open
		}
		prog.clear() // before stdout too: on a terminal both are one screen
		if _, err := out.Write(buf.Bytes()); err != nil {
			return errors.Wrap(err, "import: writing events")
		}
		for _, s := range ss {
			session := ""
			if s.ID != "" {
				session = "session=" + fieldValue(s.ID) + " "
			}
			if o.json {
				io.WriteString(errOut, jsonLine(importJSON{Type: "imported", File: label, Session: s.ID, Events: len(s.Events), Report: s.Report}))
				continue
			}
			fmt.Fprintf(errOut, "import: %s: %s%s\n", label, session, s.Report)
		}
	}
	return nil
}

// importer stores the files of an import --db and compacts what it
// stores, counting it.
type importer struct {
	o     *importOptions
	db    *store.DB
	comp  *compaction.Compactor
	out   io.Writer
	prog  *progress
	r     *replayer // replay's reports of the compactions, and its counts
	files int       // files read whole and stored
	known int
	// The compactions made after the file's appends, by session, and the
	// error that stopped a session's: reported after its line.
	runs    map[string][]compaction.Result
	runErrs map[string]error
}

func newImporter(db *store.DB, o *importOptions, out io.Writer, prog *progress) (*importer, error) {
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: o.policy()})
	if err != nil {
		return nil, err
	}
	return &importer{o: o, db: db, comp: comp, out: out, prog: prog,
		runs: map[string][]compaction.Result{}, runErrs: map[string]error{},
		r: &replayer{ctx: context.Background(), db: db, out: out, json: o.json, prog: prog, sessions: map[string]bool{}}}, nil
}

// importBatch caps the events of one Append of import: a session's events
// go to the store in batches as the file is decoded, each compacted as far
// as is due once appended, so that import's memory is bounded by a batch,
// not by the size of a conversation.
const importBatch = 10_000

// file stores the sessions of the file called name, leaving out the
// records they hold already, and compacts each. The file is decoded twice:
// first whole without storing anything, so that bad input stores nothing
// of it, then again, appending each session's events in batches as they
// are decoded and compacting after each. When an append is refused because another importer stored
// records of the session meanwhile, the file is decoded again against
// what is stored now (the records stored are left out by their refs).
func (imp *importer) file(ctx context.Context, name string, stdin io.Reader) error {
	opener, label, err := input(name, stdin, imp.prog)
	if err != nil {
		return err
	}
	if err := imp.check(opener, name, label); err != nil {
		return err
	}
	for try := 1; ; try++ {
		again, err := imp.stream(ctx, opener, name, label, try < maxImportTries)
		if err != nil {
			return err
		}
		if !again {
			imp.files++ // read whole, its sessions stored
			return nil
		}
	}
}

// check decodes the file whole against what the database holds, keeping
// no event: its error is the file's bad input.
func (imp *importer) check(opener func() (io.ReadCloser, error), name, label string) error {
	in, err := opener()
	if err != nil {
		return err
	}
	defer in.Close()
	return imp.db.View(func(s *store.Snapshot) error {
		d, err := imp.o.decoder(in, name, func(conv string) (transcript.Target, error) {
			return imp.target(s, conv, label, map[string]uint64{})
		})
		if err != nil {
			return err
		}
		for {
			_, err := d.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return imp.o.readErr(err)
			}
		}
	})
}

// batch is the events of one session decoded and not yet appended, and
// what was appended of the file to the session so far.
type batch struct {
	events      []tier.Event
	lines       []int
	n           int    // events appended
	first, last uint64 // their seqs
}

// stream decodes the file and appends each session's events in batches.
// again says that an append was refused after the session's head moved
// (another importer stored to it): the file is to be decoded again.
func (imp *importer) stream(ctx context.Context, opener func() (io.ReadCloser, error), name, label string, retry bool) (again bool, err error) {
	in, err := opener()
	if err != nil {
		return false, err
	}
	defer in.Close()
	heads := map[string]uint64{} // each session's head as this import last knows it
	d, err := imp.o.decoder(in, name, func(conv string) (t transcript.Target, err error) {
		err = imp.db.View(func(s *store.Snapshot) error {
			t, err = imp.target(s, conv, label, heads)
			return err
		})
		if t.Stored != nil {
			session := t.Session
			t.Stored = func(ref string) (ok bool, err error) {
				err = imp.db.View(func(s *store.Snapshot) error {
					_, ok, err = s.Ref(session, ref)
					return err
				})
				return ok, err
			}
		}
		return t, err
	})
	if err != nil {
		return false, err
	}
	batches := map[string]*batch{}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, imp.o.readErr(err)
		}
		session := d.Session()
		b := batches[session]
		if b == nil {
			b = &batch{}
			batches[session] = b
		}
		// A batch ends only between two source records: the events of
		// one record are appended together (store.Append's refs).
		if len(b.events) >= importBatch && e.Ref != b.events[len(b.events)-1].Ref {
			if again, err := imp.flush(ctx, session, label, b, heads, retry); again || err != nil {
				return again, err
			}
		}
		b.events = append(b.events, e)
		b.lines = append(b.lines, d.Line())
	}
	ss := d.Sessions()
	for _, s := range ss {
		if again, err := imp.flush(ctx, s.ID, label, batches[s.ID], heads, retry); again || err != nil {
			return again, err
		}
	}
	for _, s := range ss {
		if err := imp.report(ctx, label, s, batches[s.ID]); err != nil {
			return false, err
		}
	}
	return false, nil
}

// flush appends b's pending events to session, and compacts it.
func (imp *importer) flush(ctx context.Context, session, label string, b *batch, heads map[string]uint64, retry bool) (again bool, err error) {
	if b == nil || len(b.events) == 0 {
		return false, nil
	}
	res, err := imp.db.Append(session, b.events...)
	if err != nil {
		if retry && imp.moved(session, heads[session]) {
			return true, nil
		}
		var ee *tier.EventError
		if errors.As(err, &ee) && ee.Index >= 0 && ee.Index < len(b.lines) {
			return false, &transcript.LineError{File: label, Line: b.lines[ee.Index], Err: err}
		}
		return false, errors.Wrapf(err, "import: %s", label)
	}
	if b.n == 0 {
		b.first = res.First
	}
	b.n += len(b.events)
	b.last, heads[session] = res.Last, res.Last
	imp.r.session = session
	imp.r.stored(len(b.events))
	clear(b.events) // the batch's strings go with the events appended
	b.events, b.lines = b.events[:0], b.lines[:0]
	imp.compact(ctx, session)
	return false, nil
}

// compact compacts session as far as is due, unless an earlier run of
// this file failed, keeping the results for report. Then the pages of the
// database file that the appends and the compaction read are handed back
// (Snapshot.ReleaseMapped): what the import holds of the file is what one
// batch reads, not the whole session.
func (imp *importer) compact(ctx context.Context, session string) {
	if imp.runErrs[session] != nil {
		return
	}
	rs, err := imp.comp.Run(ctx, session)
	imp.runs[session] = append(imp.runs[session], rs...)
	imp.runErrs[session] = err
	imp.db.View(func(s *store.Snapshot) error {
		s.ReleaseMapped()
		return nil
	})
}

// report prints what the file stored in session s, b its appends, and the
// compactions after them.
func (imp *importer) report(ctx context.Context, label string, s transcript.Session, b *batch) error {
	n := 0
	if b != nil {
		n = b.n
	}
	imp.known += s.Report.Known
	imp.r.sessions[s.ID] = true
	line := fmt.Sprintf("imported file=%s session=%s events=%d", fieldValue(label), fieldValue(s.ID), n)
	if n > 0 {
		line += fmt.Sprintf(" seq=%d..%d", b.first, b.last)
	}
	if fields := s.Report.Fields(); len(fields) > 2 {
		line += " " + strings.Join(fields[2:], " ")
	}
	if imp.o.json {
		j := importJSON{Type: "imported", File: label, Session: s.ID, Events: n, Report: s.Report}
		if n > 0 {
			j.FirstSeq, j.LastSeq = b.first, b.last
		}
		line = strings.TrimSuffix(jsonLine(j), "\n")
	}
	imp.prog.above(func() { fmt.Fprintln(imp.out, line) })
	rs, err := imp.runs[s.ID], imp.runErrs[s.ID]
	delete(imp.runs, s.ID)
	delete(imp.runErrs, s.ID)
	imp.r.reportRun(s.ID, rs)
	if err != nil && ctx.Err() == nil {
		err = errors.WithHint(err, imp.o.compactHint)
	}
	return err
}

// target is where conversation conv of the file goes: its session, the
// calls open there and the records it holds, as of snapshot s.
func (imp *importer) target(s *store.Snapshot, conv, label string, heads map[string]uint64) (transcript.Target, error) {
	session, err := imp.o.sessionOf(conv, label)
	if err != nil {
		return transcript.Target{}, err
	}
	t := transcript.Target{Session: session, Stored: func(ref string) (bool, error) {
		_, ok, err := s.Ref(session, ref)
		return ok, err
	}}
	info, err := s.Info(session)
	if errors.Is(err, store.ErrSessionNotFound) {
		heads[session] = 0
		return t, nil
	}
	if err != nil {
		return t, err
	}
	heads[session] = info.Head
	l, err := s.Ledger(session)
	if err != nil {
		return t, err
	}
	for _, o := range l.OpenList() {
		err := s.Events(session, o.Seq, o.Seq, func(e tier.Event) error {
			t.Open = append(t.Open, e)
			return nil
		})
		if err != nil {
			return t, err
		}
	}
	return t, nil
}

// moved reports whether session's head is no longer head: records were
// stored to it since the file was decoded.
func (imp *importer) moved(session string, head uint64) bool {
	info, err := imp.db.Info(session)
	return err == nil && info.Head != head
}

// importJSON is a session's line of `import --json`.
type importJSON struct {
	Type     string            `json:"type"` // "imported"
	File     string            `json:"file"`
	Session  string            `json:"session,omitempty"`
	Events   int               `json:"events"`
	FirstSeq uint64            `json:"first_seq,omitempty"`
	LastSeq  uint64            `json:"last_seq,omitempty"`
	Report   transcript.Report `json:"report"`
}

// importSummaryJSON is the closing line of `import --db --json`.
type importSummaryJSON struct {
	Type      string `json:"type"` // "summary"
	Files     int    `json:"files"`
	Sessions  int    `json:"sessions"`
	Events    int    `json:"events"`
	Known     int    `json:"known"`
	Compacted int    `json:"compacted"`
	Refused   int    `json:"refused"`
}
