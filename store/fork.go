package store

import (
	"fmt"
	"sort"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// A fork is a session that starts as another session's resumed context at
// a marker and lives on its own from there (DB.Fork). It stores its frame
// — the roots up to the marker, their nodes and markers — the ledger at
// the fork point and two checkpoints; the raw events 1..ForkAt stay the
// parent's and are read from it (sess.rawEvents), so that a compaction of
// the fork checks its conditions against the same raw log. A session a
// fork reads is held: Prune removes no session a fork depends on.

// ForkInfo is where a session came from: the session it was forked from,
// the parent's head at the fork (the fork's events up to it are the
// parent's) and the parent's marker whose frame it took. The zero value is
// a session of its own.
type ForkInfo struct {
	Parent string `json:"parent,omitempty"`
	At     uint64 `json:"fork_seq,omitempty"`
	Marker uint64 `json:"fork_marker,omitempty"`
}

// IsFork reports whether the session is a fork.
func (f ForkInfo) IsFork() bool { return f.Parent != "" }

// ForkResult is what DB.Fork made.
type ForkResult struct {
	// Session is the new session; ForkInfo its origin.
	Session string
	ForkInfo
	// Boundary is the marker's boundary: the fork's roots cover 1..Boundary.
	Boundary uint64
	// Roots is the number of roots the fork took.
	Roots int
}

// forkBase reads, once per transaction, whether s is a fork and opens its
// parent.
func (s *sess) forkBase() error {
	if s.forkRead {
		return nil
	}
	v, err := s.b.State()
	if err != nil {
		return err
	}
	if v == nil { // a session being created or half copied: no fork
		s.forkRead = true
		return nil
	}
	st, err := s.stateOf(v)
	if err != nil {
		return err
	}
	if st.Parent != "" {
		p, err := findSess(s.tx, st.Parent)
		if err != nil {
			return err
		}
		if p == nil {
			return corrupt(s.id, "state", nil, errors.Wrapf(ErrForkParentMissing, "fork of %q at seq %d", st.Parent, st.ForkAt))
		}
		s.parent, s.forkAt = p, st.ForkAt
	}
	s.forkRead = true
	return nil
}

// inheritedNode returns node id of s or, when s does not hold it and is a
// fork, of the sessions it was forked from: the nodes under a fork's frame
// are its parent's.
func (s *sess) inheritedNode(id uint64) (tier.Node, error) {
	n, err := s.node(id)
	if !errors.Is(err, ErrNotFound) {
		return n, err
	}
	if ferr := s.forkBase(); ferr != nil {
		return n, ferr
	}
	if s.parent == nil {
		return n, err
	}
	return s.parent.inheritedNode(id)
}

// Fork makes session dst a fork of session src at marker markerID (Latest:
// the marker of src's last root). dst's resumed context at Latest is
// Resume(src, markerID)'s but for the session's name: the same roots, the
// same marker, boundary and head, the same raw tail. From there dst
// appends, compacts and resumes on its own; src is not written.
//
// Only a valid marker whose node is a root is forked at: a marker that is
// invalid, or none (Latest of a session without roots, or whose frame
// holds a node committed without validation), is ErrForkMarker. dst must
// not exist (ErrSessionExists).
func (db *DB) Fork(src string, markerID uint64, dst string) (res ForkResult, err error) {
	if err := CheckSession(dst); err != nil {
		return res, err
	}
	if err := db.acquire(); err != nil {
		return res, err
	}
	defer db.release()
	err = db.update(func(tx backend.Tx) error {
		res = ForkResult{}
		return fork(tx, src, markerID, dst, &res)
	})
	return res, err
}

func fork(tx backend.Tx, src string, markerID uint64, dst string, res *ForkResult) error {
	ss, err := openSess(tx, src)
	if err != nil {
		return err
	}
	if b, err := tx.Session(dst); err != nil {
		return err
	} else if b != nil {
		return errors.Wrapf(ErrSessionExists, "fork %q", dst)
	}
	st, err := ss.state()
	if err != nil {
		return err
	}
	roots, err := ss.roots(^uint64(0))
	if err != nil {
		return err
	}
	latest := markerID == Latest
	if latest {
		if len(roots) == 0 {
			return errors.Wrapf(ErrForkMarker, "session %q has no marker yet", src)
		}
		markerID = roots[len(roots)-1].Node
	}
	m, err := ss.marker(markerID)
	if err != nil {
		return err
	}
	n, why, err := ss.markerUsable(&m)
	if err != nil {
		return err
	}
	if n == nil {
		return errors.Wrapf(ErrForkMarker, "session %q %s", src, why)
	}
	var frame []rootRec
	for _, r := range roots {
		if r.From <= n.From {
			frame = append(frame, r)
		}
	}
	if latest {
		// As Resume's Latest: a frame holding a node committed without
		// validation promises nothing from it on; naming its marker forks.
		for _, r := range frame {
			rn, err := ss.node(r.Node)
			if err != nil {
				return err
			}
			if rn.Unchecked {
				return errors.Wrapf(ErrForkMarker, "session %q: node %d of the latest frame was committed without validation; name its marker to fork at it", src, r.Node)
			}
		}
	}

	// The tail's size in a resumed context, for the fork's counters.
	var tail uint64
	if err := ss.events(m.Boundary+1, st.Head, func(e tier.Event, _ []byte) error {
		tail += uint64(checkpoint.EventTextLen(&e))
		return nil
	}); err != nil {
		return err
	}

	b, err := tx.CreateSession(dst)
	if err != nil {
		return errors.Wrapf(err, "store: creating session %q", dst)
	}
	ds := &sess{id: dst, b: b, tx: tx}
	nst := stateRec{Head: st.Head, Turn: st.Turn, FrameVersion: st.FrameVersion, CompactedTo: m.Boundary,
		Roots: len(frame), NextNode: st.NextNode, NextCk: st.NextCk, NextAudit: st.NextAudit,
		Bytes: st.Bytes, CompactedBytes: st.Bytes - tail,
		Parent: src, ForkAt: st.Head, ForkMarker: markerID}
	if m.Boundary == st.CompactedTo {
		nst.RefusedTo, nst.RefusedTurn, nst.RefusedBytes = st.RefusedTo, st.RefusedTurn, st.RefusedBytes
		nst.FoldRefusedTo, nst.FoldRefusedPrev = st.FoldRefusedTo, st.FoldRefusedPrev
	}

	// The frame: each root, its node and its marker, as stored.
	prefix := make([]uint64, 0, len(frame))
	for _, r := range frame {
		for _, c := range []struct {
			t   backend.Table
			key []byte
		}{{backend.Roots, u64(r.From)}, {backend.Nodes, u64(r.Node)}, {backend.Markers, u64(r.Node)}} {
			if err := copyRecord(ss, ds, c.t, c.key); err != nil {
				return err
			}
		}
		prefix = append(prefix, r.Node)
	}
	// The ledger at the fork point: src's at its head, which is the fork's
	// head. Its records name events by seq, which the fork reads from src.
	for _, t := range []backend.Table{backend.Open, backend.Dispositions, backend.Constraints, backend.Artifacts} {
		if err := ss.scan(t, nil, func(k, v []byte) (bool, error) {
			return true, ds.b.Put(t, k, v)
		}); err != nil {
			return err
		}
	}
	if _, err := ds.putCheckpoint(&nst, 0, nil, "session start"); err != nil {
		return err
	}
	if _, err := ds.putCheckpoint(&nst, m.Boundary, prefix, fmt.Sprintf("fork of %s at marker %d", src, markerID)); err != nil {
		return err
	}
	if err := ds.putState(&nst); err != nil {
		return err
	}
	*res = ForkResult{Session: dst, ForkInfo: ForkInfo{Parent: src, At: st.Head, Marker: markerID},
		Boundary: m.Boundary, Roots: len(frame)}
	return nil
}

// copyRecord copies the record at key of table t from one session to
// another, as stored; a missing record is damage of from.
func copyRecord(from, to *sess, t backend.Table, key []byte) error {
	v, err := from.b.Get(t, key)
	if err != nil {
		return err
	}
	if v == nil {
		return corrupt(from.id, t.String(), key, errors.New("missing (named by a root)"))
	}
	return to.b.Put(t, key, v)
}

// Fork returns where session came from.
func (s *Snapshot) Fork(session string) (ForkInfo, error) {
	ss, err := s.sess(session)
	if err != nil {
		return ForkInfo{}, err
	}
	st, err := ss.state()
	if err != nil {
		return ForkInfo{}, err
	}
	return st.forkInfo(), nil
}

func (st *stateRec) forkInfo() ForkInfo {
	return ForkInfo{Parent: st.Parent, At: st.ForkAt, Marker: st.ForkMarker}
}

// Forks returns, for every session that has forks, the ids of its direct
// forks, in order: the sessions that depend on it.
func (s *Snapshot) Forks() (map[string][]string, error) {
	ids, err := s.Sessions()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, id := range ids {
		f, err := s.Fork(id)
		if err != nil {
			return nil, err
		}
		if f.IsFork() {
			out[f.Parent] = append(out[f.Parent], id)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out, nil
}
