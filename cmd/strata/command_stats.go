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
raw events' stored bytes and bytes per raw event, the time of the newest
event; and the file's size and its bytes per raw event (summaries, indexes
and free pages included) — of a PostgreSQL database instead, on a line
"tables", the size of strata's tables in its schema with their indexes and
TOAST (pg_total_relation_size). --session ID counts that session alone (the
total is then its own).

--json prints one document: {"sessions":[{"id", "events", "turns",
"nodes_by_depth", "roots", "frame_version", "markers_valid",
"markers_invalid", "checkpoints_valid", "checkpoints_invalid", "refusals",
"refusals_by_class", "open", "dispositions", "constraints", "artifacts",
"raw_bytes", "bytes_per_event", "last_time"}], "total":{the same counts,
without id, frame_version and last_time}, "file_bytes",
"file_bytes_per_event", "bytes_per_event"}; the last is the total's: raw
event bytes per event. Of a PostgreSQL database, "table_bytes" and
"table_bytes_per_event" take the place of the file's two.

DB may be the URL of a running agent's debug handler
(http://127.0.0.1:6060/debug/strata).`,
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
		writeSessionStats(&b, "session "+fieldValue(st.Sessions[i].ID), &st.Sessions[i], true)
	}
	writeSessionStats(&b, fmt.Sprintf("total sessions=%d", len(st.Sessions)), &st.Total, false)
	if st.FileBytes > 0 {
		fmt.Fprintf(&b, "file bytes=%d per_event=%.1f\n", st.FileBytes, st.FileBytesPerEvent)
	}
	if st.TableBytes > 0 {
		fmt.Fprintf(&b, "tables bytes=%d per_event=%.1f\n", st.TableBytes, st.TableBytesPerEvent)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// writeSessionStats writes one session's counts (or the total's, without a
// frame version of its own) as key=value lines.
func writeSessionStats(b *strings.Builder, head string, s *store.SessionStats, frame bool) {
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
	if frame {
		nodeLine = append(nodeLine, fmt.Sprintf("frame_version=%d", s.FrameVersion))
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
	if !s.LastTime.IsZero() {
		fmt.Fprintf(b, " last_event=%s", s.LastTime.Format(time.RFC3339))
	}
	b.WriteString("\n")
}
