package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
)

// statsOptions are the flags and arguments of `strata stats`.
type statsOptions struct {
	json    bool
	session string
	timeout time.Duration
	db      string
}

// newStatsCommand returns `strata stats`.
func newStatsCommand() *cobra.Command {
	o := &statsOptions{}
	cmd := &cobra.Command{
		Use:   "stats [--json] [--session ID] DB|URL",
		Short: "Count what a database holds, per session and in total",
		Long: `Count, per session and in total: events and turns, nodes per depth, roots,
markers valid/invalid, checkpoints valid/invalid, refusals per reason class
(a refusal counts once in each class it failed), the ledger's entries, the
raw events' stored bytes and bytes per raw event; per session also its
frame version and the time of its newest event. Then the file's size and
its bytes per raw event (summaries, indexes and free pages included) — of a
PostgreSQL database instead, on a line "tables", the size of strata's
tables in its schema with their indexes and TOAST (pg_total_relation_size).
--session ID counts that session alone: the total is then its own, and the
file's (or the tables') size is still the whole database's, given without
bytes per event, which only every session's events account for.

--json prints one document: {"sessions":[{"id", "events", "turns",
"nodes_by_depth", "roots", "markers_valid", "markers_invalid",
"checkpoints_valid", "checkpoints_invalid", "refusals",
"refusals_by_class", "open", "dispositions", "constraints", "artifacts",
"raw_bytes", "bytes_per_event", "frame_version", "last_time"}],
"total":{the same counts, without id, frame_version and last_time},
"file_bytes", "file_bytes_per_event", "bytes_per_event"}; the last is the
total's: raw event bytes per event. "file_bytes_per_event" is left out with
--session, "last_time" when the session's events carry no time. Of a
PostgreSQL database, "table_bytes" and "table_bytes_per_event" take the
place of the file's two.

DB is a file or a postgres:// URL, or the URL of a running agent's debug
handler (http://127.0.0.1:6060/debug/strata).`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	addJSONFlag(cmd, &o.json, "one JSON document")
	cmd.Flags().StringVar(&o.session, "session", "", "count only the session with this id")
	addTimeoutFlag(cmd, &o.timeout)
	completeSessions(cmd)
	return cmd
}

// validate checks the flags; its errors are bad usage.
func (o *statsOptions) validate() error {
	if o.session != "" {
		if err := store.CheckSession(o.session); err != nil {
			return &usageError{err: errors.Wrap(err, "--session")}
		}
	}
	return checkTimeout(o.timeout)
}

// sessions returns the sessions to count: --session, or all (nil).
func (o *statsOptions) sessions() []string {
	if o.session == "" {
		return nil
	}
	return []string{o.session}
}

// run prints the counts, as text or JSON.
func (o *statsOptions) run(out io.Writer) (err error) {
	if isURL(o.db) {
		return o.runRemote(out)
	}
	db, err := openReadOnly(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	st, err := db.Stats(o.sessions()...)
	if err != nil {
		return err
	}
	return o.print(out, st)
}

// print writes st as text or JSON.
func (o *statsOptions) print(out io.Writer, st store.Stats) error {
	if st.Sessions == nil {
		st.Sessions = []store.SessionStats{}
	}
	if o.json {
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(b, '\n'))
		return err
	}
	var b strings.Builder
	for i := range st.Sessions {
		ss := &st.Sessions[i]
		writeCounts(&b, "session "+fieldValue(ss.ID), &ss.Counts, ss)
	}
	writeCounts(&b, fmt.Sprintf("total sessions=%d", len(st.Sessions)), &st.Total, nil)
	writeBytes(&b, "file", st.FileBytes, st.FileBytesPerEvent)
	writeBytes(&b, "tables", st.TableBytes, st.TableBytesPerEvent)
	_, err := io.WriteString(out, b.String())
	return err
}

// writeBytes writes the line of the database's size, when it has one, with
// its bytes per event when they are given (every session counted).
func writeBytes(b *strings.Builder, what string, n int64, perEvent float64) {
	if n <= 0 {
		return
	}
	fmt.Fprintf(b, "%s bytes=%d", what, n)
	if perEvent > 0 {
		fmt.Fprintf(b, " per_event=%.1f", perEvent)
	}
	b.WriteString("\n")
}

// writeCounts writes counts s as key=value lines: a session's, with what
// only a session has (ss: its frame version, its newest event's time), or
// the total's (ss nil).
func writeCounts(b *strings.Builder, head string, s *store.Counts, ss *store.SessionStats) {
	depths := make([]int, 0, len(s.NodesByDepth))
	nodes := 0
	for d, n := range s.NodesByDepth {
		depths = append(depths, d)
		nodes += n
	}
	slices.Sort(depths)
	nodeLine := []string{fmt.Sprintf("nodes=%d", nodes)}
	for _, d := range depths {
		nodeLine = append(nodeLine, fmt.Sprintf("L%d=%d", d, s.NodesByDepth[d]))
	}
	nodeLine = append(nodeLine, fmt.Sprintf("roots=%d", s.Roots))
	if ss != nil {
		nodeLine = append(nodeLine, fmt.Sprintf("frame_version=%d", ss.FrameVersion))
	}
	byClass := make([]string, len(marker.Classes))
	for i, c := range marker.Classes {
		byClass[i] = fmt.Sprintf("%s=%d", c, s.RefusalsByClass[c])
	}
	fmt.Fprintf(b, "%s: events=%d turns=%d\n", head, s.Events, s.Turns)
	fmt.Fprintf(b, "  %s\n", strings.Join(nodeLine, " "))
	fmt.Fprintf(b, "  markers valid=%d invalid=%d\n", s.MarkersValid, s.MarkersInvalid)
	fmt.Fprintf(b, "  checkpoints valid=%d invalid=%d\n", s.CheckpointsValid, s.CheckpointsInvalid)
	fmt.Fprintf(b, "  refusals=%d %s\n", s.Refusals, strings.Join(byClass, " "))
	fmt.Fprintf(b, "  ledger open=%d dispositions=%d constraints=%d artifacts=%d\n", s.Open, s.Dispositions, s.Constraints, s.Artifacts)
	fmt.Fprintf(b, "  raw bytes=%d per_event=%.1f", s.RawBytes, s.BytesPerEvent)
	if ss != nil && !ss.LastTime.IsZero() {
		fmt.Fprintf(b, " last_event=%s", ss.LastTime.Format(time.RFC3339))
	}
	b.WriteString("\n")
}
