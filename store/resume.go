package store

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// Latest asks Resume for the newest valid marker, or else the newest usable
// checkpoint. A frame holding a node committed without validation
// (CommitUnchecked) makes Latest fall back to the checkpoint before that
// node.
const Latest uint64 = 0

// LatestUnchecked asks Resume for the newest valid marker even when it, or a
// root before it, was committed without validation: what a scheme that
// trusts every summary resumes (package eval's naive arm). The context's
// header says which nodes are unchecked.
const LatestUnchecked uint64 = 1<<64 - 1

// Resume returns the context a resuming agent gets for session, from marker
// markerID or, with Latest, from the newest valid marker. It never calls a
// summarizer and never patches a summary: a valid marker serves wholesale
// (the roots up to and including its node, then the raw events after its
// boundary); otherwise the nearest usable checkpoint at or before the
// marker's boundary serves wholesale (its prefix roots, then the raw events
// after its seq), and the context says why.
func (db *DB) Resume(session string, markerID uint64) (ctx *checkpoint.Context, err error) {
	err = db.View(func(s *Snapshot) error {
		ctx, err = s.Resume(session, markerID)
		return err
	})
	return ctx, err
}

// Resume is DB.Resume inside a snapshot.
func (s *Snapshot) Resume(session string, markerID uint64) (*checkpoint.Context, error) {
	// Where reads are round trips: the session, its roots and the marker
	// asked for in one, then what resuming from the marker reads in
	// another (prefetchFrom).
	if err := prefetch(s.tx, func() []backend.Read {
		reads := []backend.Read{{Session: session}, {Session: session, Table: backend.Roots, Scan: true}}
		if markerID != Latest && markerID != LatestUnchecked {
			reads = append(reads, backend.Read{Session: session, Table: backend.Markers, Key: u64(markerID)})
		}
		return reads
	}); err != nil {
		return nil, err
	}
	ss, err := s.sess(session)
	if err != nil {
		return nil, err
	}
	st, err := ss.state()
	if err != nil {
		return nil, err
	}
	ctx := &checkpoint.Context{Session: session, Head: st.Head}
	if st.Parent != "" {
		f := st.forkInfo()
		ctx.Fork = &f
	}

	var m marker.Marker
	fallbackAt := ^uint64(0)
	var ckID uint64 // the checkpoint that serves, when known before the fallback rule
	if markerID == Latest {
		// A fork at a fallback resumes from the checkpoint it was forked
		// at, saying what its parent's resume said.
		if ok, err := ss.atForkCheckpoint(&st); err != nil {
			return nil, err
		} else if ok {
			ckID, ctx.Marker, ctx.Reason = st.ForkCheckpoint, st.ForkMarker, st.ForkReason
		}
	}
	switch {
	case ckID != 0: // served below
	case markerID == Latest || markerID == LatestUnchecked:
		roots, err := ss.roots(^uint64(0))
		if err != nil {
			return nil, err
		}
		if len(roots) == 0 {
			ctx.Reason = "no marker yet"
			if r, err := ss.refusalLast(); err != nil {
				return nil, err
			} else if r != nil {
				ctx.Reason = refusalReason(r)
			}
		} else {
			// The last root's marker, with what resuming from it reads:
			// a root's marker's boundary is the root's end.
			last := roots[len(roots)-1]
			if err := ss.prefetchFrom(last.Node, last.To, st.Head, true); err != nil {
				return nil, err
			}
			if m, err = ss.marker(last.Node); err != nil {
				return nil, damaged(err, ss.id, "roots", u64(last.From), "the last root's marker")
			}
		}
	default:
		if m, err = ss.marker(markerID); err != nil {
			return nil, err
		}
		if err := ss.prefetchFrom(m.Node, m.Boundary, st.Head, false); err != nil {
			return nil, err
		}
		fallbackAt = m.Boundary
	}

	if m.ID != 0 {
		ctx.Marker = m.ID
		n, why, err := ss.markerUsable(&m)
		if err != nil {
			return nil, err
		}
		if n != nil {
			if ctx.Nodes, err = ss.rootNodes(n.From - 1); err != nil {
				return nil, err
			}
			ctx.Nodes = append(ctx.Nodes, *n)
			u := slices.IndexFunc(ctx.Nodes, func(n tier.Node) bool { return n.Unchecked })
			if u < 0 || markerID != Latest {
				ctx.Source, ctx.Boundary = checkpoint.SourceMarker, m.Boundary
				return ctx, ss.tail(ctx, m.Boundary, st.Head)
			}
			// A frame holding a node committed without validation promises
			// nothing from that node on: the latest resume falls back to
			// before it. Naming its marker, or LatestUnchecked, uses it,
			// and the context's header says so.
			un := ctx.Nodes[u].ID // its marker's id too
			why = fmt.Sprintf("marker %d unchecked: node %d was committed without validation", un, un)
			fallbackAt, ctx.Nodes = ctx.Nodes[u].From-1, nil
		}
		ctx.Reason = why
	}

	id, at := ckID, uint64(0)
	if id == 0 {
		if id, at, err = ss.nearestCheckpoint(fallbackAt); err != nil {
			return nil, err
		}
	}
	ck, err := ss.checkpoint(id)
	if err != nil {
		return nil, damaged(err, session, "ckvalid", checkpoint.IndexKey(at, id), "the indexed checkpoint")
	}
	if ckID != 0 {
		at = ck.Seq
	}
	if ck.Seq != at || !ck.Usable() {
		return nil, corrupt(session, "ckvalid", checkpoint.IndexKey(at, id), errors.Newf("indexes checkpoint %d (seq %d, %s)", id, ck.Seq, ck.Status))
	}
	for _, nid := range ck.Prefix {
		n, err := ss.node(nid)
		if err != nil {
			return nil, damaged(err, session, "ckpts", u64(id), "a node of the checkpoint's prefix")
		}
		if !n.IsRoot() {
			return nil, corrupt(session, "ckpts", u64(id), errors.Newf("usable checkpoint's prefix node %d is not a root", nid))
		}
		ctx.Nodes = append(ctx.Nodes, n)
	}
	ctx.Source, ctx.Checkpoint, ctx.Boundary = checkpoint.SourceCheckpoint, ck.ID, ck.Seq
	return ctx, ss.tail(ctx, ck.Seq, st.Head)
}

// atForkCheckpoint reports whether the session of state st is a fork at
// a fallback (DB.ForkFallback) whose frame is still the fork's — its
// checkpoint usable, nothing committed past it — so that its latest resume
// is that checkpoint.
func (ss *sess) atForkCheckpoint(st *stateRec) (bool, error) {
	if st.ForkCheckpoint == 0 {
		return false, nil
	}
	ck, err := ss.checkpoint(st.ForkCheckpoint)
	if err != nil {
		return false, damaged(err, ss.id, "state", nil, "the fork's checkpoint")
	}
	return ck.Usable() && ck.Seq == st.CompactedTo, nil
}

// prefetchFrom reads ahead, where reads are round trips, what resuming
// from the marker of node id, whose boundary is boundary, reads when it is
// usable — the node, the nodes of the roots before it, the raw events after
// the boundary up to head — and withMarker the marker too. The roots are
// those Resume read ahead.
func (ss *sess) prefetchFrom(id, boundary, head uint64, withMarker bool) error {
	return prefetch(ss.tx, func() []backend.Read {
		reads := []backend.Read{{Session: ss.id, Table: backend.Nodes, Key: u64(id)}}
		if withMarker {
			reads = append(reads, backend.Read{Session: ss.id, Table: backend.Markers, Key: u64(id)})
		}
		if roots, err := ss.roots(boundary); err == nil { // an error is the resume's to report
			for _, r := range roots {
				if r.Node != id {
					reads = append(reads, backend.Read{Session: ss.id, Table: backend.Nodes, Key: u64(r.Node)})
				}
			}
		}
		if boundary < head {
			reads = append(reads, backend.Read{Session: ss.id, From: boundary + 1, To: head})
		}
		return reads
	})
}

// markerUsable reads the marker's status and re-checks the one equality
// resume relies on: its node is still a root of the depth it was made at.
// It returns the node when the marker is usable, else why not.
func (ss *sess) markerUsable(m *marker.Marker) (*tier.Node, string, error) {
	if m.Status != marker.StatusValid {
		why := m.Reason
		if why == "" {
			why = "marker is " + m.Status.String()
		}
		return nil, fmt.Sprintf("marker %d invalid: %s", m.ID, why), nil
	}
	n, err := ss.node(m.Node)
	if err != nil {
		return nil, "", damaged(err, ss.id, "markers", u64(m.ID), "the marker's node")
	}
	if !n.IsRoot() || n.Depth != m.Depth || n.To != m.Boundary {
		return nil, "", corrupt(ss.id, "markers", u64(m.ID), errors.Newf("valid marker, but node %d is not a root of depth %d ending at %d", n.ID, m.Depth, m.Boundary))
	}
	return &n, "", nil
}

func refusalReason(r *Refusal) string {
	ie := marker.InvalidError{Failures: r.Failures}
	return fmt.Sprintf("compaction of seq %d..%d refused: %s", r.From, r.To, ie.Reasons())
}

func (ss *sess) tail(ctx *checkpoint.Context, after, head uint64) error {
	if after >= head {
		return nil
	}
	ctx.Events = make([]tier.Event, 0, head-after)
	return ss.events(after+1, head, func(e tier.Event, _ []byte) error {
		ctx.Events = append(ctx.Events, e)
		return nil
	})
}
