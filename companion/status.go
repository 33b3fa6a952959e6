package companion

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Status is strata's hooks in an agent's settings file, the store they
// write and its sessions: what `strata AGENT status --json` prints.
type Status struct {
	Settings  string         `json:"settings"`
	Installed bool           `json:"installed"` // a hook of strata's under every event it hooks
	Hooks     []SettingsHook `json:"hooks"`     // strata's hooks in the settings
	Missing   []string       `json:"missing"`   // the events without one
	// Elsewhere is strata's hooks in the other settings files the agent
	// reads for the same sessions (a project's local file, the user's or
	// the project's settings), each file that holds some: the agent runs
	// those too.
	Elsewhere   []Elsewhere     `json:"elsewhere"`
	Store       string          `json:"store"` // the store the hooks write, or the one asked for
	StoreExists bool            `json:"store_exists"`
	Sessions    []SessionStatus `json:"sessions"` // null when the store could not be read
	// Error is why the store could not be read, and Hints what to do;
	// none when it was read.
	Error string   `json:"error,omitempty"`
	Hints []string `json:"hints,omitempty"`

	// SettingsExist says the settings file exists.
	SettingsExist bool `json:"-"`
	// StorePath is the store, absolute (or a URL), as Store shows it.
	StorePath string `json:"-"`
}

// HookStatus returns the status of strata's hooks in the settings file s
// and the store they write — db instead when not "" — without reading
// the store: Sessions is empty, StoreExists says whether it is there (a
// URL always is).
func HookStatus(s *SettingsFile, db string) (*Status, error) {
	st := &Status{Settings: s.Shown, Hooks: []SettingsHook{}, Missing: []string{}, Sessions: []SessionStatus{}}
	var err error
	if st.Elsewhere, err = s.Elsewhere(); err != nil {
		return nil, err
	}
	hooks, exists, err := s.Hooks()
	if err != nil {
		return nil, err
	}
	st.SettingsExist = exists
	st.Hooks = append(st.Hooks, hooks...)
	named := filepath.Join(s.Dir, StoreName)
	if len(hooks) > 0 {
		if d, ok := s.StoreOf(hooks[0].Command); ok {
			named = d
		}
	}
	for _, ev := range s.Agent.Settings().Events {
		if !slices.ContainsFunc(st.Hooks, func(h SettingsHook) bool { return h.Event == ev.Name }) {
			st.Missing = append(st.Missing, ev.Name)
		}
	}
	st.Installed = len(st.Missing) == 0
	if db == "" {
		db = named
	}
	st.StorePath, st.Store = db, s.Show(db)
	if _, err := os.Stat(db); postgres.IsURL(db) || err == nil {
		st.StoreExists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, err
	}
	return st, nil
}

// SessionStatus is a session of a companion's store.
type SessionStatus struct {
	ID     string `json:"id"`
	Events uint64 `json:"events"`
	// Compactions counts the agent's own compactions the session's
	// transcript recorded (Agent.IsCompaction), as imported.
	Compactions    int `json:"compactions"`
	MarkersValid   int `json:"markers_valid"`
	MarkersInvalid int `json:"markers_invalid"`
	Refusals       int `json:"refusals"`
	// LatestMarker is the marker a resume serves, 0 when a checkpoint
	// would (no marker yet, or none usable); Boundary the last seq its
	// nodes cover, and Facts what they carry.
	LatestMarker uint64    `json:"latest_marker"`
	Boundary     uint64    `json:"boundary,omitempty"`
	Facts        *Facts    `json:"facts,omitempty"`
	LastTime     time.Time `json:"last_time,omitzero"`
	// SummaryChecks are the checks of the agent's summaries the hooks
	// stored, one per compaction checked, oldest first.
	SummaryChecks []SummaryCheck `json:"summary_checks"`
}

// SummaryCheck is one stored check of the agent's summary (ParseCheck):
// the facts the raw log implies at Boundary that the summary does not
// mention.
type SummaryCheck struct {
	Seq        uint64 `json:"seq"`                   // the check's event
	SummarySeq uint64 `json:"summary_seq,omitempty"` // the summary record's event; none when checked from the hook's input
	Boundary   uint64 `json:"boundary"`
	Facts      int    `json:"facts"`
	// Omitted counts the facts not mentioned; SummaryOmitted lists them as
	// the check's event does (past its size limit, fewer than Omitted).
	Omitted        int      `json:"omitted"`
	SummaryOmitted []string `json:"summary_omitted"`
}

// Facts counts the state the nodes of a resume carry at their boundary:
// the calls still open there (the last node's UNRESOLVED claims), the
// failed calls, the keys rejected, superseded or failed by their last
// disposition, the artifacts, and the constraints active.
type Facts struct {
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
func factsOf(nodes []tier.Node) *Facts {
	f := &Facts{}
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

// Sessions returns the sessions of a companion's store of agent a, from
// one snapshot: each with its events, the agent's compactions its
// transcript recorded, its markers, the facts the marker a resume serves
// carries, and the checks of the agent's summaries the hooks stored.
func Sessions(db *store.DB, a Agent) ([]SessionStatus, error) {
	out := []SessionStatus{}
	err := db.View(func(snap *store.Snapshot) error {
		ids, err := snap.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			ss, err := snap.SessionStats(id)
			if err != nil {
				return err
			}
			cs := SessionStatus{ID: id, Events: ss.Events, MarkersValid: ss.MarkersValid,
				MarkersInvalid: ss.MarkersInvalid, Refusals: ss.Refusals, LastTime: ss.LastTime, SummaryChecks: []SummaryCheck{}}
			if err := snap.Events(id, 1, ss.Events, func(e tier.Event) error {
				if a.IsCompaction(e) {
					cs.Compactions++
				}
				if c, omitted, ok := ParseCheck(e); ok {
					cs.SummaryChecks = append(cs.SummaryChecks, SummaryCheck{Seq: e.Seq, SummarySeq: c.Summary, Boundary: c.Boundary,
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
