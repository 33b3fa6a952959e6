package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/store"
)

// resumeOptions are the flags of `strata resume`.
type resumeOptions struct {
	db      string
	session string
	marker  string
	json    bool
	budget  int
	timeout time.Duration

	markerID uint64 // parsed by validate; store.Latest for "latest"
}

// newResumeCommand returns `strata resume`.
func newResumeCommand() *cobra.Command {
	o := &resumeOptions{}
	cmd := &cobra.Command{
		Use:   "resume DB|URL --session ID [--marker ID|latest] [--budget N] [--json]",
		Short: "Print the context a resuming agent gets",
		Long: `Print the context a resuming agent gets for a session: from a valid marker,
the roots up to its node and the raw events after its boundary; otherwise,
wholesale, the nearest usable raw checkpoint (its prefix roots and the raw
events after it), saying why. The same database always gives the same bytes.

Text by default. --json prints {"session", "source": "marker"|"checkpoint",
"marker", "checkpoint", "reason", "sha256", "context", ...} where sha256 is
that of the text rendering, held in "context"; a fork's names where it came
from: "fork": {"parent", "fork_seq", "fork_marker" or "fork_checkpoint"}.

--budget N prints instead the state at the session's head within N tokens
(at 4 bytes a token; at least 640), computed from the raw log: the task and
the newest request always, then standing failures, open calls, open plan
items, rejections and constraints, earlier requests, artifacts and fixed
failures, each newest first, what does not fit counted. Its heading names the
whole context's size and sha256. With --json: {"session", "source", "marker",
"checkpoint", "sha256" (of the whole context), "budget", "tokens", "facts",
"shown", "left_out": [{"class", "count"}], "state"}.

The database is the first argument, or --db DB (not both): a file or a
postgres:// URL, or the URL of a running agent's debug handler
(http://127.0.0.1:6060/debug/strata).`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("resume takes one argument (DB), got %d", len(args))
			case len(args) == 1 && o.db != "":
				return usagef("resume: the database given twice (%s and --db %s): give it once", args[0], o.db)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			db, _, err := dbArg(cmd, o.db, args)
			if err != nil {
				return err
			}
			o.db = db
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.db, "db", "", "the database file, a postgres:// URL, or a debug handler's URL: the first argument's other form")
	f.StringVar(&o.session, "session", "", "the session to resume (required)")
	f.StringVar(&o.marker, "marker", "latest", `the marker to resume from: an id, or "latest" for the newest valid one`)
	f.IntVar(&o.budget, "budget", 0, fmt.Sprintf("print the state at the head within this many tokens (at least %d) instead of the whole context", checkpoint.MinStateBudget))
	addJSONFlag(cmd, &o.json, "JSON instead of the text context")
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd)
	return cmd
}

// validate checks the flags and parses --marker; its errors are bad usage.
func (o *resumeOptions) validate() error {
	if o.session == "" {
		return &usageError{err: errors.WithHintf(errors.New("--session is required"),
			"to list the sessions' ids, run: strata sessions %s", shellQuote(o.db))}
	}
	if o.marker == "latest" {
		o.markerID = store.Latest
	} else {
		id, err := strconv.ParseUint(o.marker, 10, 64)
		if err != nil || id == 0 {
			return usagef("--marker must be a marker id (1, 2, ...) or latest, got %q", o.marker)
		}
		o.markerID = id
	}
	switch {
	case o.budget < 0 || o.budget > 0 && o.budget < checkpoint.MinStateBudget:
		return usagef("--budget must be at least %d tokens, got %d", checkpoint.MinStateBudget, o.budget)
	case o.budget > 0 && isURL(o.db):
		return usagef("--budget reads the raw log of a database file or postgres:// URL, not a debug handler's (%s)", o.db)
	}
	return checkTimeout(o.timeout)
}

// run prints the resumed context, as text or JSON.
func (o *resumeOptions) run(out io.Writer) error {
	err := o.resume(out)
	var he *HTTPError
	if errors.Is(err, store.ErrNotFound) || errors.As(err, &he) && strings.HasPrefix(he.Status, "404") && strings.Contains(he.Message, store.ErrNotFound.Error()) {
		err = errors.WithHintf(err, "to list the session's markers, run: strata dump %s --session %s", shellQuote(o.db), shellQuote(o.session))
	}
	return err
}

// resume prints the resumed context, as text or JSON.
func (o *resumeOptions) resume(out io.Writer) (err error) {
	if isURL(o.db) {
		return o.runRemote(out)
	}
	db, err := openReadOnly(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	if o.budget > 0 {
		return o.fitted(out, db)
	}
	ctx, err := db.Resume(o.session, o.markerID)
	if err != nil {
		return err
	}
	if !o.json {
		_, err = out.Write(ctx.Text())
		return err
	}
	b, err := ctx.JSON()
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// fittedJSON is what `strata resume --budget N --json` prints.
type fittedJSON struct {
	Session    string               `json:"session"`
	Source     string               `json:"source"`
	Marker     *uint64              `json:"marker"`
	Checkpoint *uint64              `json:"checkpoint"`
	SHA256     string               `json:"sha256"`
	Budget     int                  `json:"budget"`
	Tokens     int                  `json:"tokens"`
	Facts      int                  `json:"facts"`
	Shown      int                  `json:"shown"`
	LeftOut    []checkpoint.LeftOut `json:"left_out"`
	State      string               `json:"state"`
}

// fitted prints the state at the head within --budget tokens.
func (o *resumeOptions) fitted(out io.Writer, db *store.DB) error {
	ctx, f, err := db.ResumeFitted(o.session, o.markerID, o.budget)
	if err != nil {
		return err
	}
	if !o.json {
		_, err = io.WriteString(out, f.Text)
		return err
	}
	j := fittedJSON{Session: ctx.Session, Source: ctx.Source, SHA256: ctx.SHA256(), Budget: o.budget,
		Tokens: f.Tokens, Facts: f.Facts, Shown: f.Shown, LeftOut: f.LeftOut, State: f.Text}
	if j.LeftOut == nil {
		j.LeftOut = []checkpoint.LeftOut{}
	}
	if ctx.Marker != 0 {
		j.Marker = &ctx.Marker
	}
	if ctx.Checkpoint != 0 {
		j.Checkpoint = &ctx.Checkpoint
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}
