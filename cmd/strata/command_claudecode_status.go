package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// claudeStatusOptions are the flags of `strata claude-code status`.
type claudeStatusOptions struct {
	claudeInstallOptions
	json    bool
	timeout time.Duration
	store   string // the store read: --db, or the hooks'
}

// claudeStatus is what `strata claude-code status --json` prints.
type claudeStatus struct {
	Settings  string                    `json:"settings"`
	Installed bool                      `json:"installed"` // a hook of strata's under every event it hooks
	Hooks     []claudecode.SettingsHook `json:"hooks"`     // strata's hooks in the settings
	Missing   []string                  `json:"missing"`   // the events without one
	// Elsewhere is strata's hooks in the other settings files Claude Code
	// reads for the same sessions (the project's settings.local.json, the
	// user's or the project's settings), each file that holds some: Claude
	// Code runs those too.
	Elsewhere   []claudeHooksElsewhere `json:"elsewhere"`
	Store       string                 `json:"store"` // the store the hooks write, or --db
	StoreExists bool                   `json:"store_exists"`
	Sessions    []claudeStatusSession  `json:"sessions"` // null when the store could not be read
	// Error is why the store could not be read, and Hints what to do, as
	// stderr says them (Error: …, Hint: …); none when it was read.
	Error string   `json:"error,omitempty"`
	Hints []string `json:"hints,omitempty"`
}

// claudeStatusSession is a session of the store.
type claudeStatusSession struct {
	ID     string `json:"id"`
	Events uint64 `json:"events"`
	// Compactions counts Claude Code's own compactions the session's
	// transcript recorded (compact_boundary records), as imported.
	Compactions    int `json:"compactions"`
	MarkersValid   int `json:"markers_valid"`
	MarkersInvalid int `json:"markers_invalid"`
	Refusals       int `json:"refusals"`
	// LatestMarker is the marker a resume serves, 0 when a checkpoint
	// would (no marker yet, or none usable); Boundary the last seq its
	// nodes cover, and Facts what they carry.
	LatestMarker uint64       `json:"latest_marker"`
	Boundary     uint64       `json:"boundary,omitempty"`
	Facts        *claudeFacts `json:"facts,omitempty"`
	LastTime     time.Time    `json:"last_time,omitzero"`
	// SummaryChecks are the checks of Claude Code's summaries the hooks
	// stored, one per compaction checked, oldest first.
	SummaryChecks []claudeSummaryCheck `json:"summary_checks"`
}

// claudeSummaryCheck is one stored check of Claude Code's summary
// (companion.ParseCheck): the facts the raw log implies at Boundary that
// the summary does not mention.
type claudeSummaryCheck struct {
	Seq        uint64 `json:"seq"`                   // the check's event
	SummarySeq uint64 `json:"summary_seq,omitempty"` // the summary record's event; none when checked at PostCompact
	Boundary   uint64 `json:"boundary"`
	Facts      int    `json:"facts"`
	// Omitted counts the facts not mentioned; SummaryOmitted lists them as
	// the check's event does (past its size limit, fewer than Omitted).
	Omitted        int      `json:"omitted"`
	SummaryOmitted []string `json:"summary_omitted"`
}

// claudeFacts counts the state the nodes of a resume carry at their
// boundary: the calls still open there (the last node's UNRESOLVED
// claims), the failed calls, the keys rejected, superseded or failed by
// their last disposition, the artifacts, and the constraints active.
type claudeFacts struct {
	Unresolved  int `json:"unresolved"`
	Failures    int `json:"failures"`
	Rejected    int `json:"rejected"`
	Superseded  int `json:"superseded"`
	FailedKeys  int `json:"failed_keys"`
	Artifacts   int `json:"artifacts"`
	Constraints int `json:"constraints"`
}

// factsOf returns the facts that nodes, the roots of a resume in order,
// carry: each key with its latest state.
func factsOf(nodes []tier.Node) *claudeFacts {
	f := &claudeFacts{}
	if len(nodes) == 0 {
		return f
	}
	f.Unresolved = len(nodes[len(nodes)-1].Claims.Unresolved)
	failures, artifacts := map[string]bool{}, map[string]bool{}
	states, active := map[string]tier.Kind{}, map[string]bool{}
	for _, n := range nodes {
		for _, r := range n.Claims.Failures {
			failures[r.ID+"@"+strconv.FormatUint(r.Seq, 10)] = true
		}
		for _, d := range n.Claims.Dispositions {
			states[d.Key] = d.State
		}
		for _, c := range n.Claims.Constraints {
			active[c.Key] = !c.Withdrawn
		}
		for _, a := range n.Claims.Artifacts {
			artifacts[a.Key] = true
		}
	}
	f.Failures, f.Artifacts = len(failures), len(artifacts)
	for _, s := range states {
		switch s {
		case tier.KindRejected:
			f.Rejected++
		case tier.KindSuperseded:
			f.Superseded++
		case tier.KindFailed:
			f.FailedKeys++
		}
	}
	for _, a := range active {
		if a {
			f.Constraints++
		}
	}
	return f
}

// newClaudeCodeStatusCommand returns `strata claude-code status`.
func newClaudeCodeStatusCommand() *cobra.Command {
	o := &claudeStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status [--user] [--dir PROJECT] [--db DB] [--json]",
		Short: "Show strata's hooks in Claude Code's settings, their store and its sessions",
		Long: `Show whether strata's hooks are in Claude Code's settings (the project's,
or with --user the user's, as install), each with its event and command;
the store they write (--db DB: that one instead); and the sessions of the
store, one line each: its events, the compactions of Claude Code's that
its transcript recorded, strata's valid markers, the marker a resume
serves (LATEST, - for none) and the facts its nodes carry at their
boundary: the calls still open (OPEN), the failed calls, the keys
rejected and superseded, the artifacts, and the active constraints. After
the hooks come strata's hooks in every other settings file Claude Code
reads for the same sessions (the project's .claude/settings.local.json,
~/.claude/settings.json; with --user the project's in the current
directory), which Claude Code runs too, each with how to remove them.

A store the hook has not made yet (before the first compaction) is said
to be none yet; that, as hooks not installed, is a state, exit 0. The
store is opened read-only, waiting at most --timeout for a hook that
holds it; one it cannot read (damaged, held longer, not a store) is an
error, exit 1, after the hooks are shown.

--json prints one document: {"settings", "installed", "hooks":[{"event",
"matcher", "command"}], "missing", "elsewhere":[{"settings", "hooks"}],
"store", "store_exists", "sessions":[{"id", "events", "compactions",
"markers_valid", "markers_invalid", "refusals", "latest_marker",
"boundary", "facts": {"unresolved", "failures", "rejected", "superseded",
"failed_keys", "artifacts", "constraints"}, "last_time", "summary_checks":
[{"seq", "summary_seq", "boundary", "facts", "omitted",
"summary_omitted"}]}]}: summary_checks are the checks of Claude Code's
summaries the hooks stored, one per compaction, each listing the facts the
raw log implies at its boundary that the summary does not mention
(summary_omitted). When the
store cannot be read the document comes all the same, "sessions" null,
with "error" and "hints": what stderr says (Error: …, Hint: …).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(o.timeout); err != nil {
				return err
			}
			if cmd.Flags().Changed("db") && o.db == "" {
				return usagef("--db must not be empty: leave it out for the store the hooks write")
			}
			err := o.run(cmd)
			if err != nil && o.db == "" && o.store != "" {
				// What the error says of the store (damage, a lock, a file
				// not strata's) names the store the hooks write, as --db.
				_ = cmd.Flags().Set("db", o.store)
			}
			return err
		},
	}
	o.addSettingsFlags(cmd)
	cmd.Flags().StringVar(&o.db, "db", "", "the store to show (default: the one the hooks write)")
	addJSONFlag(cmd, &o.json, "one JSON document")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// run shows the status.
func (o *claudeStatusOptions) run(cmd *cobra.Command) error {
	out := cmd.OutOrStdout()
	s, err := o.settings()
	if err != nil {
		return err
	}
	st := claudeStatus{Settings: s.shown, Hooks: []claudecode.SettingsHook{}, Missing: []string{}, Sessions: []claudeStatusSession{}}
	if st.Elsewhere, err = strataHooksElsewhere(s); err != nil {
		return err
	}
	hooks, exists, err := strataHooksIn(s)
	if err != nil {
		return err
	}
	st.Hooks = append(st.Hooks, hooks...)
	db := filepath.Join(s.dir, companion.StoreName)
	if len(hooks) > 0 {
		if named, ok := s.storeOf(hooks[0].Command); ok {
			db = named
		}
	}
	for _, ev := range claudecode.HookEvents {
		if !slices.ContainsFunc(st.Hooks, func(h claudecode.SettingsHook) bool { return h.Event == ev.Name }) {
			st.Missing = append(st.Missing, ev.Name)
		}
	}
	st.Installed = len(st.Missing) == 0
	// What it prints of the commands: without a URL's password.
	for i := range st.Hooks {
		st.Hooks[i].Command = shownCommand(st.Hooks[i].Command)
	}
	for _, e := range st.Elsewhere {
		for i := range e.Hooks {
			e.Hooks[i].Command = shownCommand(e.Hooks[i].Command)
		}
	}
	if o.db != "" {
		db = o.db
	}
	o.store = db
	st.Store = s.show(db)
	if !o.json {
		// The hooks first: what the settings say stands whatever the store's
		// state, a damaged one included.
		st.printHooks(out, exists)
	}
	if _, err := os.Stat(db); postgres.IsURL(db) || err == nil {
		st.StoreExists = true
		if st.Sessions, err = o.sessions(db); err != nil {
			return o.storeFailed(cmd, &st, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return o.storeFailed(cmd, &st, err)
	}
	if o.json {
		return writeJSON(out, st)
	}
	return st.printStore(out)
}

// storeFailed reports err, which kept the store st names from being read.
// As text, the hooks part is out already and err is returned, for the
// command line to print as any error. With --json the document still
// comes, with the hints the command line would add to err (explain) and
// "sessions" null, then err on stderr as JSON, as any error: exit 1 both
// ways.
func (o *claudeStatusOptions) storeFailed(cmd *cobra.Command, st *claudeStatus, err error) error {
	if !o.json {
		return err
	}
	err = explain(cmd, err, o.store)
	st.Sessions, st.Error, st.Hints = nil, err.Error(), errors.GetAllHints(err)
	if werr := writeJSON(cmd.OutOrStdout(), st); werr != nil {
		return werr
	}
	printJSONError(cmd.ErrOrStderr(), err, exitError)
	return &exitCodeError{code: exitError}
}

// sessions reads the sessions of the store db, from one snapshot.
func (o *claudeStatusOptions) sessions(path string) (out []claudeStatusSession, err error) {
	db, err := openReadOnly(path, o.timeout)
	if err != nil {
		return nil, err
	}
	defer closeDB(db, &err)
	out = []claudeStatusSession{}
	err = db.View(func(snap *store.Snapshot) error {
		ids, err := snap.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			ss, err := snap.SessionStats(id)
			if err != nil {
				return err
			}
			cs := claudeStatusSession{ID: id, Events: ss.Events, MarkersValid: ss.MarkersValid,
				MarkersInvalid: ss.MarkersInvalid, Refusals: ss.Refusals, LastTime: ss.LastTime, SummaryChecks: []claudeSummaryCheck{}}
			if err := snap.Events(id, 1, ss.Events, func(e tier.Event) error {
				if transcript.IsClaudeCodeCompaction(e) {
					cs.Compactions++
				}
				if c, omitted, ok := companion.ParseCheck(e); ok {
					cs.SummaryChecks = append(cs.SummaryChecks, claudeSummaryCheck{Seq: e.Seq, SummarySeq: c.Summary, Boundary: c.Boundary,
						Facts: c.Facts, Omitted: omitted, SummaryOmitted: append([]string{}, c.Unmentioned...)})
				}
				return nil
			}); err != nil {
				return err
			}
			rc, err := snap.Resume(id, store.Latest)
			if err != nil {
				return err
			}
			if rc.Source == checkpoint.SourceMarker {
				cs.LatestMarker, cs.Boundary, cs.Facts = rc.Marker, rc.Boundary, factsOf(rc.Nodes)
			}
			out = append(out, cs)
		}
		return nil
	})
	return out, err
}

// printHooks writes the hooks part of the status as text; settings says
// the settings file exists.
func (st *claudeStatus) printHooks(out io.Writer, settings bool) {
	switch {
	case !settings:
		fmt.Fprintf(out, "hooks: not installed: %s does not exist; strata claude-code install adds them\n", st.Settings)
	case len(st.Hooks) == 0:
		fmt.Fprintf(out, "hooks: not installed in %s; strata claude-code install adds them\n", st.Settings)
	case !st.Installed:
		fmt.Fprintf(out, "hooks: partly installed in %s, none under %s; strata claude-code install adds them\n", st.Settings, strings.Join(st.Missing, ", "))
	default:
		fmt.Fprintf(out, "hooks: installed in %s\n", st.Settings)
	}
	for _, h := range st.Hooks {
		fmt.Fprintf(out, "  %s: %s\n", eventName(h.Event, h.Matcher), h.Command)
	}
	for _, e := range st.Elsewhere {
		fmt.Fprintf(out, "hooks: also in %s, which Claude Code runs too; %s\n", e.Settings, e.remove)
		for _, h := range e.Hooks {
			fmt.Fprintf(out, "  %s: %s\n", eventName(h.Event, h.Matcher), h.Command)
		}
	}
}

// printStore writes the store part of the status as text.
func (st *claudeStatus) printStore(out io.Writer) error {
	if !st.StoreExists {
		fmt.Fprintf(out, "store: %s: none yet (the hook makes it at the first compaction)\n", st.Store)
		return nil
	}
	fmt.Fprintf(out, "store: %s\n", st.Store)
	if len(st.Sessions) == 0 {
		fmt.Fprintln(out, "sessions: none yet")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tEVENTS\tCOMPACTIONS\tMARKERS\tLATEST\tOPEN\tFAILED\tREJECTED\tSUPERSEDED\tARTIFACTS\tCONSTRAINTS")
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t", fieldValue(s.ID), s.Events, s.Compactions, s.MarkersValid)
		if s.Facts == nil {
			fmt.Fprintln(tw, "-\t-\t-\t-\t-\t-\t-")
			continue
		}
		f := s.Facts
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.LatestMarker, f.Unresolved, f.Failures, f.Rejected, f.Superseded, f.Artifacts, f.Constraints)
	}
	return tw.Flush()
}
