package store

import (
	"time"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// SessionStats counts one session's records; Stats.Total, the sum over
// every session, has no ID, FrameVersion or LastTime.
type SessionStats struct {
	ID                 string         `json:"id,omitempty"`
	Events             uint64         `json:"events"` // equal to the head seq: seqs are gapless from 1
	Turns              uint64         `json:"turns"`
	NodesByDepth       map[int]int    `json:"nodes_by_depth"`
	Roots              int            `json:"roots"`
	FrameVersion       uint64         `json:"frame_version"`
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
	// LastTime is the time of the session's newest event, in UTC.
	LastTime time.Time `json:"last_time,omitzero"`
}

// Stats counts per session and in total.
type Stats struct {
	Sessions []SessionStats `json:"sessions"`
	Total    SessionStats   `json:"total"`
	// FileBytes is the database file's size, and FileBytesPerEvent that
	// size per raw event of the sessions counted: what the file costs per
	// event, summaries, indexes and free pages included. Both are absent
	// (0) for a database that is not a file.
	FileBytes         int64   `json:"file_bytes,omitempty"`
	FileBytesPerEvent float64 `json:"file_bytes_per_event,omitempty"`
	// TableBytes is, for a database in PostgreSQL, the size of strata's
	// tables in its schema with their indexes and TOAST
	// (pg_total_relation_size), and TableBytesPerEvent that size per raw
	// event of the sessions counted; absent (0) for a file.
	TableBytes         int64   `json:"table_bytes,omitempty"`
	TableBytesPerEvent float64 `json:"table_bytes_per_event,omitempty"`
	// BytesPerEvent is Total.BytesPerEvent: the stored raw events' bytes
	// per event.
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

func newSessionStats(id string) SessionStats {
	rc := map[string]int{}
	for _, c := range marker.Classes {
		rc[c] = 0
	}
	return SessionStats{ID: id, NodesByDepth: map[int]int{}, RefusalsByClass: rc}
}

func (t *SessionStats) add(s *SessionStats) {
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
	out := newSessionStats(id)
	info, err := s.Info(id)
	if err != nil {
		return out, err
	}
	out.Events, out.Turns, out.Roots, out.FrameVersion = info.Head, info.Turn, info.Roots, info.FrameVersion
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
