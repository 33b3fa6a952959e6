package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/store"
)

// dumpOptions are the flags and arguments of `strata dump`.
type dumpOptions struct {
	json    bool
	dot     bool
	raw     bool
	session string
	from    uint64
	to      uint64
	timeout time.Duration
	db      string // a file, or the URL of a debughttp handler
}

// newDumpCommand returns `strata dump`.
func newDumpCommand() *cobra.Command {
	o := &dumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump [--json|--dot] [--raw] [--session ID [--from SEQ] [--to SEQ]] DB|URL",
		Short: "Print everything a database holds, per session",
		Long: `Print everything in the database, per session, from one read transaction:
the frame (version, depth, compacted_to), the roots, every node, the markers
and checkpoints with their status and reason, the ledger at head, the audit
of refused compactions and, with --raw, the raw events.

Without --json the output is a readable tree: each root with the nodes it
covers indented below it, tier by tier. With --raw the events follow as JSONL
lines, unindented, so that 'grep "^{"' gives a log that replay accepts.

With --json the output is one JSON document:
  {"format_version":…, "sessions":[{"id":…, "head_seq":…, "frame":{…},
   "roots":[…], "nodes":[…], "markers":[…], "checkpoints":[…], "ledger":{…},
   "audit":[…], "events":[…]}]}
where "events" (present with --raw) holds the events in the form of
docs/events.md: replaying them into a new database with the same
replay flags gives the same dump.

With --dot the output is a Graphviz picture: a cluster per session, the raw
log as one box per compacted span and one for the uncompacted tail, summary
nodes by depth with an edge from each child to its parent, markers beside
their node (red with the reason when invalid), checkpoints and refusals.
Render it with 'dot -Tsvg'.

--from SEQ and --to SEQ (with --session; either may be left out: the first
seq, the head) dump a seq range of the session: the nodes whose span
overlaps it and the raw events within it — and nothing else of the session.
In JSON, the session's object is then {"id", "head_seq", "turn", "from",
"to", "nodes", "events"}. A range that starts past the session's head is an
error (exit status 1), before any output; --to past the head means the head.

DB is a file or a postgres:// URL, or the URL of a running agent's debug
handler (http://127.0.0.1:6060/debug/strata): the same output, from one read
transaction of the live database.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	addJSONFlag(cmd, &o.json, "one JSON document")
	f.BoolVar(&o.dot, "dot", false, "print a Graphviz (DOT) picture")
	f.BoolVar(&o.raw, "raw", false, "include the raw events")
	f.StringVar(&o.session, "session", "", "dump only this session")
	f.Uint64Var(&o.from, "from", 0, "with --session: dump the nodes and events from this seq on")
	f.Uint64Var(&o.to, "to", 0, "with --session: dump the nodes and events up to this seq")
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd)
	return cmd
}

// validate checks the flags; its errors are bad usage.
func (o *dumpOptions) validate() error {
	if o.session != "" {
		if err := store.CheckSession(o.session); err != nil {
			return &usageError{err: err}
		}
	}
	if o.json && o.dot {
		return usagef("--json and --dot exclude each other")
	}
	if o.dot && o.raw {
		return usagef("--raw has no place in a --dot picture")
	}
	if o.from != 0 || o.to != 0 {
		switch {
		case o.session == "":
			return usagef("--from and --to need --session: a seq range is a session's")
		case o.dot:
			return usagef("--from and --to have no place in a --dot picture, which draws whole sessions")
		case o.to != 0 && o.from > o.to:
			return usagef("--from %d is after --to %d", o.from, o.to)
		}
	}
	return checkTimeout(o.timeout)
}

// format returns the form asked for: json, dot or text.
func (o *dumpOptions) format() string {
	switch {
	case o.json:
		return "json"
	case o.dot:
		return "dot"
	}
	return "text"
}

// run dumps the database from one read transaction.
func (o *dumpOptions) run(out io.Writer) (err error) {
	opts := dump.Options{Session: o.session, Raw: o.raw, From: o.from, To: o.to}
	if isURL(o.db) {
		q := url.Values{"format": {o.format()}}
		if o.raw {
			q.Set("raw", "1")
		}
		if o.session != "" {
			q.Set("session", o.session)
		}
		if o.from != 0 {
			q.Set("from", strconv.FormatUint(o.from, 10))
		}
		if o.to != 0 {
			q.Set("to", strconv.FormatUint(o.to, 10))
		}
		return newRemote(o.db, o.timeout).copy(out, "dump", q)
	}
	db, err := openReadOnly(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	render := dump.Text
	switch o.format() {
	case "json":
		render = dump.JSON
	case "dot":
		render = dump.Dot
	}
	w := &countingWriter{w: out}
	err = db.View(func(s *store.Snapshot) error { return render(w, s, opts) })
	if err != nil && w.n > 0 {
		err = errors.WithHint(err, "the dump stopped there: what it printed is incomplete")
	}
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

// Write implements io.Writer.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// oneLine keeps s on one line.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\n\r") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
