package main

import (
	"io"
	"strconv"
	"time"

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
		Use:   "resume --db DB --session ID [--marker ID|latest] [--json]",
		Short: "Print the context a resuming agent gets",
		Long: `Print the context a resuming agent gets for a session: from a valid marker,
the roots up to its node and the raw events after its boundary; otherwise,
wholesale, the nearest usable raw checkpoint (its prefix roots and the raw
events after it), saying why. The same database always gives the same bytes.

Text by default. --json prints {"session", "source": "marker"|"checkpoint",
"marker", "checkpoint", "reason", "sha256", "context", ...} where sha256 is
that of the text rendering, held in "context".`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.db, "db", "", "the database file, a postgres:// URL, or a debug handler's URL (required)")
	f.StringVar(&o.session, "session", "", "the session to resume (required)")
	f.StringVar(&o.marker, "marker", "latest", `the marker to resume from: an id, or "latest" for the newest valid one`)
	f.BoolVar(&o.json, "json", false, "print JSON instead of the text context")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags and parses --marker; its errors are bad usage.
func (o *resumeOptions) validate() error {
	if o.db == "" {
		return usagef("--db is required")
	}
	if o.session == "" {
		return usagef("--session is required")
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
func (o *resumeOptions) run(out io.Writer) (err error) {
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
	_, err = out.Write(append(b, '\n'))
	return err
}
