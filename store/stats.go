package store

import (
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// SessionStats counts one session's records.
type SessionStats struct {
	ID                 string         `json:"id"`
	Events             uint64         `json:"events"`
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
}

// Stats counts per session and in total.
type Stats struct {
	Sessions      []SessionStats `json:"sessions"`
	Total         SessionStats   `json:"total"`
	FileBytes     int64          `json:"file_bytes"`
	BytesPerEvent float64        `json:"bytes_per_event"`
}

// Stats counts the records of every session, in one read transaction.
func (db *DB) Stats() (out Stats, err error) {
	err = db.View(func(s *Snapshot) error {
		out, err = s.Stats()
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
}

// SessionStats counts one session's records.
func (s *Snapshot) SessionStats(id string) (SessionStats, error) {
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
	return out, nil
}
