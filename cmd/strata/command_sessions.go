package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/store"
)

// sessionsOptions are the flags and arguments of `strata sessions`.
type sessionsOptions struct {
	json    bool
	timeout time.Duration
	db      string
}

// sessionLine is one session in `strata sessions --json`.
type sessionLine struct {
	ID             string      `json:"id"`
	Events         uint64      `json:"events"`
	HeadSeq        uint64      `json:"head_seq"` // equal to events: seqs are gapless from 1
	Turns          uint64      `json:"turns"`
	Nodes          int         `json:"nodes"`
	NodesByDepth   map[int]int `json:"nodes_by_depth"`
	Roots          int         `json:"roots"`
	MarkersValid   int         `json:"markers_valid"`
	MarkersInvalid int         `json:"markers_invalid"`
	Refusals       int         `json:"refusals"`
	LastTime       time.Time   `json:"last_time,omitzero"`
	// Fork is a fork's parent, the parent's head at the fork and the
	// marker it forked at.
	Fork *store.ForkInfo `json:"fork,omitempty"`
}

// newSessionsCommand returns `strata sessions`.
func newSessionsCommand() *cobra.Command {
	o := &sessionsOptions{}
	cmd := &cobra.Command{
		Use:   "sessions [--json] DB|URL",
		Short: "List the sessions of a database, one line each",
		Long: `List the sessions of the database, in id order, one line each: its id,
events (its head seq: seqs are gapless from 1), turns, summary nodes (with
their count per depth), refusals, and the time of its newest event (UTC).
It reads each session's state, summary and ledger tables and its newest
event, never its raw log, so a large database lists as fast as a small one
(strata stats reads the logs, for their size).

--json prints an array of {"id", "events", "head_seq", "turns", "nodes",
"nodes_by_depth", "roots", "markers_valid", "markers_invalid", "refusals",
"last_time"}; last_time (RFC 3339) is absent for events without a time.

DB is a file or a postgres:// URL, or the URL of a running agent's debug
handler (http://127.0.0.1:6060/debug/strata).`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			if err := checkTimeout(o.timeout); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	addJSONFlag(cmd, &o.json, "a JSON array, an object per session")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// run lists the sessions.
func (o *sessionsOptions) run(out io.Writer) (err error) {
	var st store.Stats
	if isURL(o.db) {
		c := newRemote(o.db, o.timeout)
		b, err := c.get("stats", nil)
		if err != nil {
			return err
		}
		defer b.Close()
		if err := json.NewDecoder(b).Decode(&st); err != nil {
			return errors.Wrapf(err, "%s: stats", c.base)
		}
	} else {
		db, err := openReadOnly(o.db, o.timeout)
		if err != nil {
			return err
		}
		defer closeDB(db, &err)
		if st, err = listSessions(db); err != nil {
			return err
		}
	}
	lines := make([]sessionLine, len(st.Sessions))
	for i, s := range st.Sessions {
		lines[i] = sessionLine{ID: s.ID, Events: s.Events, HeadSeq: s.Events, Turns: s.Turns, NodesByDepth: s.NodesByDepth,
			Roots: s.Roots, MarkersValid: s.MarkersValid, MarkersInvalid: s.MarkersInvalid, Refusals: s.Refusals, LastTime: s.LastTime, Fork: s.Fork}
		if lines[i].NodesByDepth == nil {
			lines[i].NodesByDepth = map[int]int{}
		}
		for _, n := range s.NodesByDepth {
			lines[i].Nodes += n
		}
	}
	if o.json {
		return writeJSON(out, lines)
	}
	forks := slices.ContainsFunc(lines, func(l sessionLine) bool { return l.Fork != nil })
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	header := "SESSION\tEVENTS\tTURNS\tNODES\tREFUSALS\tLAST EVENT"
	if forks {
		header += "\tFORK OF"
	}
	fmt.Fprintln(tw, header)
	for _, l := range lines {
		last := "-"
		if !l.LastTime.IsZero() {
			last = l.LastTime.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s", fieldValue(l.ID), l.Events, l.Turns, nodeCounts(l.Nodes, l.NodesByDepth), l.Refusals, last)
		if forks {
			fmt.Fprintf(tw, "\t%s", forkOf(l.Fork))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// listSessions counts every session's records as store.Stats does, without
// reading the raw logs (store.Snapshot.SessionSummary), in one snapshot.
func listSessions(db *store.DB) (st store.Stats, err error) {
	err = db.View(func(s *store.Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			ss, err := s.SessionSummary(id)
			if err != nil {
				return err
			}
			st.Sessions = append(st.Sessions, ss)
		}
		return nil
	})
	return st, err
}

// forkOf returns "-", or a fork's parent, fork seq and point:
// "PARENT@seq SEQ marker ID" (ForkInfo.Point).
func forkOf(f *store.ForkInfo) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%s@seq %d %s", fieldValue(f.Parent), f.At, f.Point())
}

// nodeCounts returns "0", or n and its count per depth: "8 (L1=5 L2=2 L3=1)".
func nodeCounts(n int, byDepth map[int]int) string {
	if n == 0 {
		return "0"
	}
	parts := make([]string, 0, len(byDepth))
	for _, d := range slices.Sorted(maps.Keys(byDepth)) {
		parts = append(parts, fmt.Sprintf("L%d=%d", d, byDepth[d]))
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, " "))
}
