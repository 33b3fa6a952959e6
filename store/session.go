package store

import (
	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// sess is one session's records inside a transaction: the records of
// records.go, encoded and decoded over the backend's places. The caller
// holds the transaction.
type sess struct {
	id string
	b  backend.Session
	tx backend.Tx

	// A fork's parent and the parent's head at the fork, read from the
	// state by the first read of an event (forkBase): events up to forkAt
	// are the parent's.
	forkRead bool
	parent   *sess
	forkAt   uint64
}

// findSess returns session id inside tx, or nil when it does not exist.
func findSess(tx backend.Tx, id string) (*sess, error) {
	b, err := tx.Session(id)
	if err != nil || b == nil {
		return nil, err
	}
	return &sess{id: id, b: b, tx: tx}, nil
}

// prefetch reads what reads returns in one round trip, when tx reads over
// a network (backend.Prefetcher); the reads that follow answer from it.
// reads is called only then: a file's transaction (bbolt) builds no list.
func prefetch(tx backend.Tx, reads func() []backend.Read) error {
	pf, ok := tx.(backend.Prefetcher)
	if !ok {
		return nil
	}
	if rs := reads(); len(rs) > 0 {
		return pf.Prefetch(rs)
	}
	return nil
}

// openSess returns session id inside tx, or ErrSessionNotFound.
func openSess(tx backend.Tx, id string) (*sess, error) {
	s, err := findSess(tx, id)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.Wrapf(ErrSessionNotFound, "%q", id)
	}
	return s, nil
}

// createSess makes a session, its state and its checkpoint at seq 0.
func createSess(tx backend.Tx, id string) (*sess, error) {
	b, err := tx.CreateSession(id)
	if err != nil {
		return nil, errors.Wrapf(err, "store: creating session %q", id)
	}
	s := &sess{id: id, b: b, tx: tx}
	st := stateRec{V: recordVersion}
	if _, err := s.putCheckpoint(&st, 0, nil, "session start"); err != nil {
		return nil, err
	}
	return s, s.putState(&st)
}

// state reads the session's state record and decodes it.
func (s *sess) state() (stateRec, error) {
	v, err := s.b.State()
	if err != nil {
		return stateRec{}, err
	}
	return s.stateOf(v)
}

// stateOf decodes v, the state record of s as stored.
func (s *sess) stateOf(v []byte) (stateRec, error) {
	var st stateRec
	if v == nil {
		// What a copy stopped midway leaves (Snapshot.Copy).
		return st, corrupt(s.id, "state", nil, errors.New("missing (a copy of the session stopped midway leaves it so; the same copy run again completes it)"))
	}
	if err := decodeState(v, &st); err != nil {
		return st, corrupt(s.id, "state", nil, err)
	}
	return st, nil
}

func (s *sess) putState(st *stateRec) error {
	st.V = recordVersion
	v, err := encodeState(st)
	if err != nil {
		return err
	}
	return s.b.PutState(v)
}

// get decodes the record at key of table t into v; found is false when the
// key is absent.
func (s *sess) get(t backend.Table, rt recType, key []byte, v any) (found bool, err error) {
	raw, err := s.b.Get(t, key)
	if err != nil || raw == nil {
		return false, err
	}
	if err := decode(rt, raw, v); err != nil {
		return true, corrupt(s.id, t.String(), key, err)
	}
	return true, nil
}

func (s *sess) put(t backend.Table, rt recType, key []byte, v any) error {
	raw, err := encode(rt, v)
	if err != nil {
		return err
	}
	return s.b.Put(t, key, raw)
}

// scan calls fn with every record of table t from key from on (nil: all),
// in key order, until fn returns false.
func (s *sess) scan(t backend.Table, from []byte, fn func(k, v []byte) (bool, error)) error {
	return s.b.Scan(t, from, fn)
}

func (s *sess) event(seq uint64) (tier.Event, []byte, error) {
	if err := s.forkBase(); err != nil {
		return tier.Event{}, nil, err
	}
	if seq <= s.forkAt {
		return s.parent.event(seq)
	}
	raw, err := s.b.Event(seq)
	if err != nil {
		return tier.Event{}, nil, err
	}
	if raw == nil {
		return tier.Event{}, nil, corrupt(s.id, "l0", u64(seq), errors.New("event missing"))
	}
	e, err := decodeEvent(s.id, seq, raw)
	return e, raw, err
}

// decodeEvent decodes the event stored under seq. Errors name the session,
// "l0" (the raw log) and seq.
func decodeEvent(session string, seq uint64, raw []byte) (tier.Event, error) {
	var r eventRec
	if err := decodeEventRec(raw, &r); err != nil {
		return tier.Event{}, corrupt(session, "l0", u64(seq), err)
	}
	if r.Seq != seq {
		return tier.Event{}, corrupt(session, "l0", u64(seq), errors.Newf("record holds seq %d", r.Seq))
	}
	if !r.Kind.Valid() {
		return tier.Event{}, corrupt(session, "l0", u64(seq), errors.Newf("unknown kind %d", r.Kind))
	}
	return r.event(), nil
}

// events calls fn for each event with from ≤ seq ≤ to, in order, with its
// stored bytes (valid only during the call). A missing event is damage.
func (s *sess) events(from, to uint64, fn func(e tier.Event, raw []byte) error) error {
	return s.rawEvents(from, to, func(seq uint64, v []byte) error {
		e, err := decodeEvent(s.id, seq, v)
		if err != nil {
			return err
		}
		return fn(e, v)
	})
}

// rawEvents calls fn with the seq and the stored bytes (valid only during
// the call) of every event from ≤ seq ≤ to, in order. A missing event is
// damage.
func (s *sess) rawEvents(from, to uint64, fn func(seq uint64, raw []byte) error) error {
	if err := s.forkBase(); err != nil {
		return err
	}
	if from <= s.forkAt {
		if err := s.parent.rawEvents(from, min(to, s.forkAt), fn); err != nil {
			return err
		}
		if to <= s.forkAt {
			return nil
		}
		from = s.forkAt + 1
	}
	return s.ownEvents(from, to, fn)
}

// ownEvents is rawEvents of the events stored in the session itself: for
// a fork, those past its fork point.
func (s *sess) ownEvents(from, to uint64, fn func(seq uint64, raw []byte) error) error {
	want := from
	err := s.b.Events(from, to, func(seq uint64, v []byte) (bool, error) {
		if seq != want {
			return false, corrupt(s.id, "l0", u64(want), errors.Newf("event missing (next stored is %d)", seq))
		}
		if err := fn(seq, v); err != nil {
			return false, err
		}
		want++
		return true, nil
	})
	if err != nil {
		return err
	}
	if want <= to {
		return corrupt(s.id, "l0", u64(want), errors.New("event missing"))
	}
	return nil
}

func (s *sess) node(id uint64) (tier.Node, error) {
	r, err := s.nodeRecord(id)
	if err != nil {
		return tier.Node{}, err
	}
	return r.node(), nil
}

// nodeRecord returns node id's record as stored, facts included.
func (s *sess) nodeRecord(id uint64) (nodeRec, error) {
	var r nodeRec
	found, err := s.get(backend.Nodes, recNode, u64(id), &r)
	if err != nil {
		return nodeRec{}, err
	}
	if !found {
		return nodeRec{}, errors.Wrapf(ErrNotFound, "session %q node %d", s.id, id)
	}
	if r.ID != id {
		return nodeRec{}, corrupt(s.id, "nodes", u64(id), errors.Newf("record holds node %d", r.ID))
	}
	return r, nil
}

func (s *sess) putNodeRecord(r *nodeRec) error {
	r.V = recordVersion
	return s.put(backend.Nodes, recNode, u64(r.ID), r)
}

// setParent records that node id was folded into parent (superseded, when
// superseded is true), keeping the rest of its record.
func (s *sess) setParent(id, parent uint64, superseded bool) error {
	r, err := s.nodeRecord(id)
	if err != nil {
		return err
	}
	if superseded {
		r.SupersededBy = parent
	} else {
		r.Parent = parent
	}
	return s.putNodeRecord(&r)
}

func (s *sess) marker(id uint64) (marker.Marker, error) {
	var r markerRec
	found, err := s.get(backend.Markers, recMarker, u64(id), &r)
	if err != nil {
		return marker.Marker{}, err
	}
	if !found {
		return marker.Marker{}, errors.Wrapf(ErrNotFound, "session %q marker %d", s.id, id)
	}
	if r.ID != id {
		// A damaged key: the marker is not the one asked for.
		return marker.Marker{}, corrupt(s.id, "markers", u64(id), errors.Newf("record holds marker %d", r.ID))
	}
	return marker.Marker{ID: r.ID, Node: r.Node, Depth: r.Depth, FrameVersion: r.FrameVersion, Boundary: r.Boundary,
		Status: r.Status, Reason: r.Reason, InvalidatedAt: r.InvalidatedAt, Unchecked: r.Unchecked}, nil
}

func (s *sess) putMarker(m *marker.Marker) error {
	r := markerRec{V: recordVersion, ID: m.ID, Node: m.Node, Depth: m.Depth, FrameVersion: m.FrameVersion,
		Boundary: m.Boundary, Status: m.Status, Reason: m.Reason, InvalidatedAt: m.InvalidatedAt, Unchecked: m.Unchecked}
	return s.put(backend.Markers, recMarker, u64(m.ID), &r)
}

func (s *sess) checkpoint(id uint64) (checkpoint.Checkpoint, error) {
	var r checkpointRec
	found, err := s.get(backend.Checkpoints, recCheckpoint, u64(id), &r)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if !found {
		return checkpoint.Checkpoint{}, errors.Wrapf(ErrNotFound, "session %q checkpoint %d", s.id, id)
	}
	if r.ID != id {
		return checkpoint.Checkpoint{}, corrupt(s.id, "ckpts", u64(id), errors.Newf("record holds checkpoint %d", r.ID))
	}
	return checkpoint.Checkpoint{ID: r.ID, Seq: r.Seq, Prefix: r.Prefix, FrameVersion: r.FrameVersion, Why: r.Why,
		Status: checkpoint.Status(r.Status), Reason: r.Reason, InvalidatedAt: r.InvalidatedAt}, nil
}

func (s *sess) writeCheckpoint(c *checkpoint.Checkpoint) error {
	r := checkpointRec{V: recordVersion, ID: c.ID, Seq: c.Seq, Prefix: c.Prefix, FrameVersion: c.FrameVersion,
		Why: c.Why, Status: uint8(c.Status), Reason: c.Reason, InvalidatedAt: c.InvalidatedAt}
	return s.put(backend.Checkpoints, recCheckpoint, u64(c.ID), &r)
}

// putCheckpoint writes a new usable checkpoint at seq with the given prefix
// roots and indexes it.
func (s *sess) putCheckpoint(st *stateRec, seq uint64, prefix []uint64, why string) (uint64, error) {
	st.NextCk++
	c := checkpoint.Checkpoint{ID: st.NextCk, Seq: seq, Prefix: prefix, FrameVersion: st.FrameVersion, Why: why, Status: checkpoint.StatusValid}
	if err := s.writeCheckpoint(&c); err != nil {
		return 0, err
	}
	return c.ID, s.put(backend.CheckpointIndex, recIndex, checkpoint.IndexKey(seq, c.ID), &indexRec{V: recordVersion, ID: c.ID})
}

// usableCheckpointAt returns the id of the newest usable checkpoint at
// exactly seq, or 0.
func (s *sess) usableCheckpointAt(seq uint64) (uint64, error) {
	id, at, err := s.nearestCheckpoint(seq)
	if err != nil || at != seq {
		return 0, err
	}
	return id, nil
}

// nearestCheckpoint returns the checkpoint a fallback from seq takes (the
// rule of package checkpoint), from the index of usable checkpoints.
func (s *sess) nearestCheckpoint(seq uint64) (id, at uint64, err error) {
	k, _, err := s.b.Last(backend.CheckpointIndex, checkpoint.FallbackBelow(seq))
	if err != nil {
		return 0, 0, err
	}
	if k == nil {
		return 0, 0, corrupt(s.id, "ckvalid", nil, errors.New("no usable checkpoint, not even at seq 0"))
	}
	at, id, ok := checkpoint.ParseIndexKey(k)
	if !ok {
		return 0, 0, corrupt(s.id, "ckvalid", k, errors.New("bad key"))
	}
	return id, at, nil
}

// roots returns the current roots in seq order, up to and including the one
// starting at upto (all when upto is the max uint64).
func (s *sess) roots(upto uint64) ([]rootRec, error) {
	var out []rootRec
	err := s.scan(backend.Roots, nil, func(k, v []byte) (bool, error) {
		from, err := parseU64(k)
		if err != nil {
			return false, corrupt(s.id, "roots", k, err)
		}
		if from > upto {
			return false, nil
		}
		var r rootRec
		if err := decode(recRoot, v, &r); err != nil {
			return false, corrupt(s.id, "roots", k, err)
		}
		if r.From != from || r.To < r.From {
			return false, corrupt(s.id, "roots", k, errors.Newf("record holds span %d..%d", r.From, r.To))
		}
		out = append(out, r)
		return true, nil
	})
	return out, err
}

// refusalLast returns the newest audit record, if any.
func (s *sess) refusalLast() (*Refusal, error) {
	k, v, err := s.b.Last(backend.Audit, nil)
	if err != nil || k == nil {
		return nil, err
	}
	var r auditRec
	if err := decode(recAudit, v, &r); err != nil {
		return nil, corrupt(s.id, "audit", k, err)
	}
	return &r.Refusal, nil
}

// refusal returns audit record id.
func (s *sess) refusal(id uint64) (Refusal, error) {
	var r auditRec
	found, err := s.get(backend.Audit, recAudit, u64(id), &r)
	if err != nil {
		return Refusal{}, err
	}
	if !found {
		return Refusal{}, errors.Wrapf(ErrNotFound, "session %q refusal %d", s.id, id)
	}
	if r.ID != id {
		return Refusal{}, corrupt(s.id, "audit", u64(id), errors.Newf("record holds refusal %d", r.ID))
	}
	return r.Refusal, nil
}

// ref returns the Refs entry of ref: the seqs of the events made from that
// source record.
func (s *sess) ref(ref string) (refRec, bool, error) {
	var r refRec
	found, err := s.get(backend.Refs, recRef, []byte(ref), &r)
	if err != nil || !found {
		return refRec{}, false, err
	}
	if r.First == 0 || r.Last < r.First {
		return refRec{}, false, corrupt(s.id, "refs", []byte(ref), errors.Newf("record holds seqs %d..%d", r.First, r.Last))
	}
	return r, true, nil
}

// forEach calls fn with every record of table t, in key order.
func (s *sess) forEach(t backend.Table, fn func(k, v []byte) error) error {
	return s.scan(t, nil, func(k, v []byte) (bool, error) { return true, fn(k, v) })
}
