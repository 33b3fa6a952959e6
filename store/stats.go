package store

import (
	"time"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// Counts are what Stats counts of sessions: one session's records
// (SessionStats), or their sums over the sessions counted (Stats.Total).
type Counts struct {
	Events             uint64         `json:"events"` // of one session, equal to its head seq: seqs are gapless from 1
	Turns              uint64         `json:"turns"`
	NodesByDepth       map[int]int    `json:"nodes_by_depth"`
	Roots              int            `json:"roots"`
	MarkersValid       int            `json:"markers_valid"`
	MarkersInvalid     int            `json:"markers_invalid"`
	CheckpointsValid   int            `json:"checkpoints_valid"`
	CheckpointsInvalid int            `json:"checkpoints_invalid"`
	Refusals           int            `json:"refusals"`
	RefusalsByClass    map[string]int `json:"refusals_by_class"` // a refusal counts once in each class it failed
	Open               int            `json:"open"`
	Dispositions       int            `json:"dispositions"`
	Constraints        int            `json:"constraints"`
	Artifacts          int            `json:"artifacts"`
	// RawBytes is the size of the raw events' stored records (the raw
	// log, L0), and BytesPerEvent that size per event.
	RawBytes      uint64  `json:"raw_bytes"`
	BytesPerEvent float64 `json:"bytes_per_event"`
}

// SessionStats counts one session's records, with what only a session
// has: its id, its frame's version and the time of its newest event.
type SessionStats struct {
	ID string `json:"id"`
	Counts
	FrameVersion uint64 `json:"frame_version"`
	// LastTime is the time of the session's newest event, in UTC; absent
	// (zero) when its events carry no time.
	LastTime time.Time `json:"last_time,omitzero"`
	// Fork is where a fork came from; nil for a session of its own.
	Fork *ForkInfo `json:"fork,omitempty"`
}

// Stats counts per session and in total.
type Stats struct {
	Sessions []SessionStats `json:"sessions"`
	// Total sums the counts of Sessions. It has no id, frame version or
	// newest event's time: those are a session's.
	Total Counts `json:"total"`
	// FileBytes is the database file's size — the whole file's, whichever
	// sessions are counted — and FileBytesPerEvent that size per raw event
	// when every session is counted: what the file costs per event,
	// summaries, indexes and free pages included. Counting named sessions
	// leaves FileBytesPerEvent absent (0): the file holds every session,
	// not only theirs. Both are absent for a database that is not a file.
	FileBytes         int64   `json:"file_bytes,omitempty"`
	FileBytesPerEvent float64 `json:"file_bytes_per_event,omitempty"`
	// TableBytes is, for a database in PostgreSQL, the size of strata's
	// tables in its schema with their indexes and TOAST
	// (pg_total_relation_size) — every session's — and TableBytesPerEvent
	// that size per raw event when every session is counted, absent (0)
	// when named sessions are. Both are absent for a file.
	TableBytes         int64   `json:"table_bytes,omitempty"`
	TableBytesPerEvent float64 `json:"table_bytes_per_event,omitempty"`
	// BytesPerEvent is Total.BytesPerEvent: the stored raw events' bytes
	// per event of the sessions counted.
	BytesPerEvent float64 `json:"bytes_per_event"`
}

// Stats counts the records of the sessions named (none: every session), in
// one read transaction. A session that does not exist is
// ErrSessionNotFound.
func (db *DB) Stats(sessions ...string) (out Stats, err error) {
	err = db.View(func(s *Snapshot) error {
		out, err = s.Stats(sessions...)
		return err
	})
	return out, err
}

// newCounts returns counts of nothing, with every refusal class at 0.
func newCounts() Counts {
	rc := map[string]int{}
	for _, c := range marker.Classes {
		rc[c] = 0
	}
	return Counts{NodesByDepth: map[int]int{}, RefusalsByClass: rc}
}

// add adds s to t.
func (t *Counts) add(s *Counts) {
	t.Events += s.Events
	t.Turns += s.Turns
	for d, n := range s.NodesByDepth {
		t.NodesByDepth[d] += n
	}
	for c, n := range s.RefusalsByClass {
		t.RefusalsByClass[c] += n
	}
	t.Roots += s.Roots
	t.MarkersValid += s.MarkersValid
	t.MarkersInvalid += s.MarkersInvalid
	t.CheckpointsValid += s.CheckpointsValid
	t.CheckpointsInvalid += s.CheckpointsInvalid
	t.Refusals += s.Refusals
	t.Open += s.Open
	t.Dispositions += s.Dispositions
	t.Constraints += s.Constraints
	t.Artifacts += s.Artifacts
	t.RawBytes += s.RawBytes
	t.BytesPerEvent = perEvent(t.RawBytes, t.Events)
}

// perEvent returns bytes per event, 0 for no event.
func perEvent[T int64 | uint64](bytes T, events uint64) float64 {
	if events == 0 {
		return 0
	}
	return float64(bytes) / float64(events)
}

// SessionStats counts one session's records: SessionSummary's counts and
// the raw log's size, which it reads whole.
func (s *Snapshot) SessionStats(id string) (SessionStats, error) {
	out, err := s.SessionSummary(id)
	if err != nil || out.Events == 0 {
		return out, err
	}
	ss, err := s.sess(id)
	if err != nil {
		return out, err
	}
	if err := ss.rawEvents(1, out.Events, func(_ uint64, raw []byte) error {
		out.RawBytes += uint64(len(raw))
		return nil
	}); err != nil {
		return out, err
	}
	out.BytesPerEvent = perEvent(out.RawBytes, out.Events)
	return out, nil
}

// SessionSummary counts one session's records as SessionStats does, from
// its state, its summary and ledger tables and its newest event, without
// reading the raw log: RawBytes and BytesPerEvent are zero. It is what a
// listing of the sessions reads (strata sessions), however long their logs.
func (s *Snapshot) SessionSummary(id string) (SessionStats, error) {
	out := SessionStats{ID: id, Counts: newCounts()}
	info, err := s.Info(id)
	if err != nil {
		return out, err
	}
	out.Events, out.Turns, out.Roots, out.FrameVersion, out.Fork = info.Head, info.Turn, info.Roots, info.FrameVersion, info.Fork
	if err := s.Nodes(id, func(n tier.Node) error {
		out.NodesByDepth[int(n.Depth)]++
		return nil
	}); err != nil {
		return out, err
	}
	if err := s.Markers(id, func(m marker.Marker) error {
		if m.Status == marker.StatusValid {
			out.MarkersValid++
		} else {
			out.MarkersInvalid++
		}
		return nil
	}); err != nil {
		return out, err
	}
	if err := s.Checkpoints(id, func(c checkpoint.Checkpoint) error {
		if c.Usable() {
			out.CheckpointsValid++
		} else {
			out.CheckpointsInvalid++
		}
		return nil
	}); err != nil {
		return out, err
	}
	if err := s.Refusals(id, func(r Refusal) error {
		out.Refusals++
		seen := map[string]bool{}
		for _, f := range r.Failures {
			if !seen[f.Class] {
				seen[f.Class] = true
				out.RefusalsByClass[f.Class]++
			}
		}
		return nil
	}); err != nil {
		return out, err
	}
	l, err := s.Ledger(id)
	if err != nil {
		return out, err
	}
	out.Open, out.Dispositions, out.Constraints, out.Artifacts = len(l.Open), len(l.Dispositions), len(l.Constraints), len(l.Artifacts)
	if info.Head == 0 {
		return out, nil
	}
	ss, err := s.sess(id)
	if err != nil {
		return out, err
	}
	last, _, err := ss.event(info.Head)
	if err != nil {
		return out, err
	}
	if last.Time != 0 {
		out.LastTime = time.Unix(0, last.Time).UTC()
	}
	return out, nil
}
