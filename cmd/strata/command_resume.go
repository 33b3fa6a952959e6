package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/store"
)

// resumeOptions are the flags of `strata resume`.
type resumeOptions struct {
	db      string
	session string
	marker  string
	json    bool
	timeout time.Duration

	markerID uint64 // parsed by validate; store.Latest for "latest"
}

// newResumeCommand returns `strata resume`.
func newResumeCommand() *cobra.Command {
	o := &resumeOptions{}
	cmd := &cobra.Command{
		Use:   "resume DB|URL --session ID [--marker ID|latest] [--json]",
		Short: "Print the context a resuming agent gets",
		Long: `Print the context a resuming agent gets for a session: from a valid marker,
the roots up to its node and the raw events after its boundary; otherwise,
wholesale, the nearest usable raw checkpoint (its prefix roots and the raw
events after it), saying why. The same database always gives the same bytes.

Text by default. --json prints {"session", "source": "marker"|"checkpoint",
"marker", "checkpoint", "reason", "sha256", "context", ...} where sha256 is
that of the text rendering, held in "context".

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
	info, err := db.Info(o.session)
	if err != nil {
		return err
	}
	if b, err = withFork(b, info.Fork); err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// withFork adds to the JSON object b the key "fork": where a fork came
// from ({"parent", "fork_seq", "fork_marker"}), for a fork.
func withFork(b []byte, f *store.ForkInfo) ([]byte, error) {
	if f == nil {
		return b, nil
	}
	fj, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	end := bytes.LastIndexByte(b, '}')
	if end < 0 {
		return nil, errors.AssertionFailedf("resume: the context's JSON is no object")
	}
	out := append(bytes.TrimRight(b[:end:end], " \n"), []byte(",\n  \"fork\": ")...)
	out = append(append(out, fj...), '\n')
	return append(out, b[end:]...), nil
}
