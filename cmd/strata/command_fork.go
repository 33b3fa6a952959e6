package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/store"
)

// forkOptions are the flags and arguments of `strata fork`.
type forkOptions struct {
	db, session, marker, to string
	markerID                uint64
	fallback                bool
	json                    bool
	timeout                 time.Duration
}

// newForkCommand returns `strata fork`.
func newForkCommand() *cobra.Command {
	o := &forkOptions{}
	cmd := &cobra.Command{
		Use:   "fork DB --session SRC [--marker ID|latest] [--fallback] --to DST [--json]",
		Short: "Start a new session from another's context at a valid marker",
		Long: `Make session DST a fork of session SRC at a valid marker (latest: the
marker of SRC's last root). DST resumes to SRC's context at that marker byte
for byte, but for the header's "session:" line, which names DST; from there
DST appends, compacts and resumes on its own, and SRC is not written. DST
stores its frame (the roots up to the marker, their nodes and markers), the
ledger at SRC's head and two checkpoints; SRC's raw log up to its head at
the fork stays SRC's and DST reads it from there, so that prune keeps SRC
while DST needs it. An invalid marker, or a session without one, is no point
to fork at (exit 1), unless --fallback asks to fork at what resume serves
then: the raw checkpoint it falls back to, whose prefix roots DST takes and
from which DST resumes, to SRC's fallback bytes but for the "session:" line,
until it commits a frame of its own. A line says "forked DST from SRC at
marker M (seq S, R roots)", or "at checkpoint C (marker M not valid) (seq S,
R roots): REASON"; --json prints {"session", "parent", "fork_seq",
"fork_marker", "fork_checkpoint", "boundary", "roots", "reason"}.`,
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
	f.StringVar(&o.session, "session", "", "the session to fork (required)")
	f.StringVar(&o.marker, "marker", "latest", `the marker to fork at: an id, or "latest" for the last root's`)
	f.StringVar(&o.to, "to", "", "the new session's id (required)")
	f.BoolVar(&o.fallback, "fallback", false, "when the marker is not valid, fork at the raw checkpoint resume falls back to")
	addJSONFlag(cmd, &o.json, "a JSON object instead of the line")
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd)
	return cmd
}

func (o *forkOptions) validate() error {
	if o.session == "" || o.to == "" {
		return usagef("fork: --session SRC and --to DST are required")
	}
	for _, id := range []string{o.session, o.to} {
		if err := store.CheckSession(id); err != nil {
			return &usageError{err: err}
		}
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

func (o *forkOptions) run(out io.Writer) (err error) {
	db, err := openWritable(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	fork := db.Fork
	if o.fallback {
		fork = db.ForkFallback
	}
	res, err := fork(o.session, o.markerID, o.to)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, struct {
			Session string `json:"session"`
			store.ForkInfo
			Boundary uint64 `json:"boundary"`
			Roots    int    `json:"roots"`
			Reason   string `json:"reason,omitempty"`
		}{res.Session, res.ForkInfo, res.Boundary, res.Roots, res.Reason})
	}
	_, err = fmt.Fprintf(out, "forked %s from %s at %s (seq %d, %s)", fieldValue(res.Session), fieldValue(res.Parent),
		res.Point(), res.At, plural(res.Roots, "root"))
	if err == nil && res.Reason != "" {
		_, err = fmt.Fprintf(out, ": %s", oneLine(res.Reason))
	}
	if err == nil {
		_, err = fmt.Fprintln(out)
	}
	return err
}

// openWritable opens the database at path for writing, waiting at most
// timeout for its lock.
func openWritable(path string, timeout time.Duration) (*store.DB, error) {
	db, err := store.Open(path, store.Options{LockTimeout: timeout})
	if err != nil {
		return nil, explainOpen(err)
	}
	return db, nil
}

// pruneOptions are the flags and arguments of `strata prune`.
type pruneOptions struct {
	db        string
	sessions  []string
	olderThan string
	keepLast  int
	archive   string
	dryRun    bool
	json      bool
	timeout   time.Duration
}

// newPruneCommand returns `strata prune`.
func newPruneCommand() *cobra.Command {
	o := &pruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune DB [--session ID]... [--older-than D] [--keep-last N] [--archive FILE] [--dry-run] [--json]",
		Short: "Remove whole sessions, never one a fork depends on",
		Long: `Remove whole sessions: those --session names (repeat it), whose newest
event is older than --older-than (a duration: 36h, 30d), or all but the
--keep-last N of the newest last events; given together, a session must
meet every one. A session a fork that stays depends on is kept and listed
with the forks that hold it ("held"); one named by --session is refused with
them (exit 1), and nothing is removed. Forks go before their parents, each
session in a transaction of its own: a crash leaves each whole or gone.

--archive FILE first copies what goes, with the parents its forks read, into
a new database file FILE (fsynced, renamed into place; FILE must not exist),
opens it, verifies it and checks that every session resumes there to the
same bytes; only then is anything removed. --dry-run lists what would go and
why, and removes nothing. A line per session says "removed ID: why" (or
"would remove"), "held ID by FORK,..."; --json prints {"removed": [{"session",
"why"}], "held": [{"session", "forks"}], "dry_run", "archive"}. A file keeps
its size: strata vacuum gives the space back.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.sessions, "session", nil, "remove the session with this id (repeat it for more)")
	f.StringVar(&o.olderThan, "older-than", "", "remove sessions whose newest event is older than this (36h, 30d)")
	f.IntVar(&o.keepLast, "keep-last", 0, "keep the N sessions of the newest last events, remove the rest")
	f.StringVar(&o.archive, "archive", "", "copy what goes into this new database file first")
	f.BoolVar(&o.dryRun, "dry-run", false, "list what would go and why; remove nothing")
	addJSONFlag(cmd, &o.json, "a JSON object instead of the lines")
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd)
	return cmd
}

// parseAge parses a duration of Go's form, or a whole number of days
// ("30d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(d, 10, 16)
		if err != nil || n == 0 {
			return 0, errors.Newf("%q is no number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.Newf("%q is no positive duration (36h, 30d)", s)
	}
	return d, nil
}

func (o *pruneOptions) run(ctx context.Context, out io.Writer) (err error) {
	opts := store.PruneOptions{Sessions: o.sessions, KeepLast: o.keepLast, DryRun: o.dryRun}
	if o.olderThan != "" {
		if opts.OlderThan, err = parseAge(o.olderThan); err != nil {
			return &usageError{err: errors.Wrap(err, "--older-than")}
		}
	}
	if o.keepLast < 0 {
		return usagef("--keep-last must not be negative, got %d", o.keepLast)
	}
	if len(o.sessions) == 0 && opts.OlderThan == 0 && o.keepLast == 0 {
		return usagef("prune: name what goes: --session ID, --older-than D or --keep-last N")
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	db, err := openWritable(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	if o.archive != "" && !o.dryRun {
		opts.Archive = db.ArchiveFile(ctx, o.archive)
	}
	res, err := db.Prune(opts)
	if err != nil {
		return err
	}
	if o.json {
		type removed struct {
			Session string `json:"session"`
			Why     string `json:"why"`
		}
		type held struct {
			Session string   `json:"session"`
			Forks   []string `json:"forks"`
		}
		doc := struct {
			Removed []removed `json:"removed"`
			Held    []held    `json:"held"`
			DryRun  bool      `json:"dry_run"`
			Archive string    `json:"archive,omitempty"`
		}{Removed: []removed{}, Held: []held{}, DryRun: o.dryRun, Archive: o.archive}
		for _, r := range res.Removed {
			doc.Removed = append(doc.Removed, removed{r.Session, r.Why})
		}
		for _, h := range res.Held {
			doc.Held = append(doc.Held, held{h.Session, h.Forks})
		}
		return writeJSON(out, doc)
	}
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	for _, r := range res.Removed {
		fmt.Fprintf(out, "%s %s: %s\n", verb, fieldValue(r.Session), r.Why)
	}
	for _, h := range res.Held {
		fmt.Fprintf(out, "held %s by %s\n", fieldValue(h.Session), strings.Join(h.Forks, ","))
	}
	if len(res.Removed) == 0 && len(res.Held) == 0 {
		fmt.Fprintln(out, "nothing to remove")
	}
	return nil
}

// newVacuumCommand returns `strata vacuum`.
func newVacuumCommand() *cobra.Command {
	var (
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "vacuum DB [--json]",
		Short: "Shrink a database file to what its sessions take",
		Long: `Shrink the database file DB, offline: with no other process holding it, copy
every session, byte for byte, into a new file built beside it, fsync it and
rename it over DB, as bbolt's own compaction does. A crash leaves DB the old
file or the whole new one. The pages of pruned sessions otherwise stay in
the file, reused by later writes but never given back. A line says
"vacuumed DB: B bytes before, A after, S sessions"; --json prints {"path",
"bytes_before", "bytes_after", "sessions"}. A postgres:// URL is refused:
PostgreSQL's own VACUUM gives its tables' space back.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			if isURL(args[0]) || strings.Contains(args[0], "://") {
				return usagef("vacuum: %s is no database file; PostgreSQL's tables are its own VACUUM's", args[0])
			}
			res, err := store.Vacuum(cmd.Context(), args[0], store.Options{LockTimeout: timeout})
			if err != nil {
				return explainOpen(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "vacuumed %s: %d bytes before, %d after, %s\n", args[0], res.Before, res.After, plural(res.Sessions, "session"))
			return err
		},
	}
	addJSONFlag(cmd, &asJSON, "a JSON object instead of the line")
	addTimeoutFlag(cmd, &timeout)
	return cmd
}
