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
// parent's) and the parent's marker whose frame it took, or the checkpoint
// of a fork at a fallback. The zero value is a session of its own.
type ForkInfo = checkpoint.Fork

// ForkResult is what DB.Fork made.
type ForkResult struct {
	// Session is the new session; ForkInfo its origin.
	Session string
	ForkInfo
	// Boundary is the marker's boundary: the fork's roots cover 1..Boundary.
	Boundary uint64
	// Roots is the number of roots the fork took.
	Roots int
	// Reason is, for a fork at a fallback (Checkpoint set), why the
	// parent's resume fell back: what the fork's context says too.
	Reason string
}

// forkMarkerError is a *ForkMarkerError with a hint to fork at the
// fallback instead.
func forkMarkerError(session string, markerID uint64, why string) error {
	return errors.WithHint(&ForkMarkerError{Session: session, Marker: markerID, Reason: why},
		"to fork at the raw checkpoint resume falls back to, ask for it: DB.ForkFallback, strata fork --fallback")
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
// holds a node committed without validation), is a *ForkMarkerError
// naming it (ErrForkMarker); ForkFallback forks at the checkpoint a resume
// falls back to instead. dst must not exist (ErrSessionExists).
func (db *DB) Fork(src string, markerID uint64, dst string) (ForkResult, error) {
	return db.fork(src, markerID, dst, false)
}

// ForkFallback makes dst a fork of src at what Resume(src, markerID)
// serves: at the marker when it is valid, as Fork does, and otherwise at
// the raw checkpoint the resume falls back to. A fork at a checkpoint
// (ForkResult.Checkpoint) takes the checkpoint's prefix roots as its frame
// and the checkpoint itself, under the same id, and resumes from it — to
// Resume(src, markerID)'s bytes but for the session's name, naming the
// same checkpoint, marker and reason — until it commits a frame of its
// own; its raw events after the checkpoint are the tail.
func (db *DB) ForkFallback(src string, markerID uint64, dst string) (ForkResult, error) {
	return db.fork(src, markerID, dst, true)
}

func (db *DB) fork(src string, markerID uint64, dst string, fallback bool) (res ForkResult, err error) {
	if err := CheckSession(dst); err != nil {
		return res, err
	}
	if err := db.acquire(); err != nil {
		return res, err
	}
	defer db.release()
	err = db.update(func(tx backend.Tx) error {
		res = ForkResult{}
		err := fork(tx, src, markerID, dst, &res)
		if fallback && errors.Is(err, ErrForkMarker) {
			return forkCheckpoint(&Snapshot{tx: tx, db: db}, src, markerID, dst, &res)
		}
		return err
	})
	return res, err
}

func fork(tx backend.Tx, src string, markerID uint64, dst string, res *ForkResult) error {
	ss, err := openSess(tx, src)
	if err != nil {
		return err
	}
	if err := checkNoSession(tx, dst); err != nil {
		return err
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
			return forkMarkerError(src, 0, "no marker yet")
		}
		// As Resume's Latest: a fork at a fallback resumes from its
		// checkpoint until it commits past it.
		if ok, err := ss.atForkCheckpoint(&st); err != nil {
			return err
		} else if ok {
			return forkMarkerError(src, 0, fmt.Sprintf("it resumes from checkpoint %d, where it was forked from %s", st.ForkCheckpoint, st.Parent))
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
		return forkMarkerError(src, markerID, why)
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
				return forkMarkerError(src, r.Node, fmt.Sprintf("node %d of the latest frame was committed without validation; name its marker to fork at it", r.Node))
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
	nst := forkState(&st, src, m.Boundary, len(frame), tail)
	nst.ForkMarker = markerID
	ds, err := createFork(tx, ss, dst, frame)
	if err != nil {
		return err
	}
	prefix := make([]uint64, 0, len(frame))
	for _, r := range frame {
		prefix = append(prefix, r.Node)
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
	*res = ForkResult{Session: dst, ForkInfo: nst.forkInfo(), Boundary: m.Boundary, Roots: len(frame)}
	return nil
}

// forkCheckpoint makes dst a fork of src at the checkpoint
// Resume(src, markerID) falls back to (ForkFallback).
func forkCheckpoint(s *Snapshot, src string, markerID uint64, dst string, res *ForkResult) error {
	ctx, err := s.Resume(src, markerID)
	if err != nil {
		return err
	}
	if ctx.Source != checkpoint.SourceCheckpoint {
		return errors.AssertionFailedf("store: fork of %q at %d: the marker was refused, yet resume serves it", src, markerID)
	}
	ss, err := openSess(s.tx, src)
	if err != nil {
		return err
	}
	if err := checkNoSession(s.tx, dst); err != nil {
		return err
	}
	st, err := ss.state()
	if err != nil {
		return err
	}
	ck, err := ss.checkpoint(ctx.Checkpoint)
	if err != nil {
		return err
	}
	frame := make([]rootRec, len(ctx.Nodes))
	end := uint64(0)
	for i, n := range ctx.Nodes {
		frame[i] = rootRec{From: n.From, To: n.To, Node: n.ID}
		end = n.To
	}
	if end != ck.Seq {
		return corrupt(src, "ckpts", u64(ck.ID), errors.Newf("checkpoint at seq %d, its prefix ends at %d", ck.Seq, end))
	}
	var tail uint64
	for i := range ctx.Events {
		tail += uint64(checkpoint.EventTextLen(&ctx.Events[i]))
	}
	nst := forkState(&st, src, ck.Seq, len(frame), tail)
	nst.ForkMarker, nst.ForkCheckpoint, nst.ForkReason = ctx.Marker, ck.ID, ctx.Reason
	ds, err := createFork(s.tx, ss, dst, frame)
	if err != nil {
		return err
	}
	// The checkpoint, under its id; a session start of the fork's own
	// unless the checkpoint is at seq 0.
	if err := copyRecord(ss, ds, backend.Checkpoints, u64(ck.ID)); err != nil {
		return err
	}
	if err := ds.put(backend.CheckpointIndex, recIndex, checkpoint.IndexKey(ck.Seq, ck.ID), &indexRec{V: recordVersion, ID: ck.ID}); err != nil {
		return err
	}
	if ck.Seq > 0 {
		if _, err := ds.putCheckpoint(&nst, 0, nil, "session start"); err != nil {
			return err
		}
	}
	if err := ds.putState(&nst); err != nil {
		return err
	}
	*res = ForkResult{Session: dst, ForkInfo: nst.forkInfo(), Boundary: ck.Seq, Roots: len(frame), Reason: ctx.Reason}
	return nil
}

// checkNoSession refuses a fork onto a session that exists.
func checkNoSession(tx backend.Tx, dst string) error {
	b, err := tx.Session(dst)
	if err != nil {
		return err
	}
	if b != nil {
		return errors.Wrapf(ErrSessionExists, "fork %q", dst)
	}
	return nil
}

// forkState is the state of a fork of the session of state st whose frame
// ends at boundary, holds roots roots and leaves a tail of tail bytes.
func forkState(st *stateRec, parent string, boundary uint64, roots int, tail uint64) stateRec {
	nst := stateRec{Head: st.Head, Turn: st.Turn, FrameVersion: st.FrameVersion, CompactedTo: boundary,
		Roots: roots, NextNode: st.NextNode, NextCk: st.NextCk, NextAudit: st.NextAudit,
		Bytes: st.Bytes, CompactedBytes: st.Bytes - tail, Parent: parent, ForkAt: st.Head}
	if boundary == st.CompactedTo {
		nst.RefusedTo, nst.RefusedTurn, nst.RefusedBytes = st.RefusedTo, st.RefusedTurn, st.RefusedBytes
		nst.FoldRefusedTo, nst.FoldRefusedPrev = st.FoldRefusedTo, st.FoldRefusedPrev
	}
	return nst
}

// createFork creates session dst with the frame of src it takes — each
// root, its node and its marker, as stored — and src's ledger at its head,
// which is the fork's head: its records name events by seq, which the fork
// reads from src.
func createFork(tx backend.Tx, ss *sess, dst string, frame []rootRec) (*sess, error) {
	b, err := tx.CreateSession(dst)
	if err != nil {
		return nil, errors.Wrapf(err, "store: creating session %q", dst)
	}
	ds := &sess{id: dst, b: b, tx: tx}
	for _, r := range frame {
		for _, c := range []struct {
			t   backend.Table
			key []byte
		}{{backend.Roots, u64(r.From)}, {backend.Nodes, u64(r.Node)}, {backend.Markers, u64(r.Node)}} {
			if err := copyRecord(ss, ds, c.t, c.key); err != nil {
				return nil, err
			}
		}
	}
	for _, t := range []backend.Table{backend.Open, backend.Dispositions, backend.Constraints, backend.Artifacts} {
		if err := ss.scan(t, nil, func(k, v []byte) (bool, error) {
			return true, ds.b.Put(t, k, v)
		}); err != nil {
			return nil, err
		}
	}
	return ds, nil
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
	return ForkInfo{Parent: st.Parent, At: st.ForkAt, Marker: st.ForkMarker, Checkpoint: st.ForkCheckpoint}
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
