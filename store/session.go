package store

import (
	"bytes"
	"encoding/binary"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// sess is one session's buckets inside a transaction. Its methods are the
// "unsafe" layer: the caller holds the transaction.
type sess struct {
	id string
	b  *bolt.Bucket
	f  int // the database's format (schema.go)
	// Format 3: the events bucket, and the session's number there.
	e   *bolt.Bucket
	num [4]byte
	// Format 4: the hot bucket and the journal.
	h, j *bolt.Bucket
	// Format 5: the session's state, open calls and events appended
	// directly are in its own bucket, as in format 2 (schema.go); it has
	// no number yet (numbered is false), and e, h and j are nil.
	cold     bool
	numbered bool
}

func (db *DB) openSess(tx *bolt.Tx, id string) (*sess, error) {
	s, err := db.session(tx, id)
	if err != nil {
		return nil, err
	}
	if s.b == nil {
		return nil, errors.Wrapf(ErrSessionNotFound, "%q", id)
	}
	return s, nil
}

// createSess makes a session's buckets and its checkpoint at seq 0.
func createSess(tx *bolt.Tx, f int, id string) (*sess, error) {
	s, err := makeSessionBucket(tx, f, id)
	if err != nil {
		return nil, err
	}
	st := stateRec{V: recordVersion}
	if _, err := s.putCheckpoint(&st, 0, nil, "session start"); err != nil {
		return nil, err
	}
	return s, s.putState(&st)
}

func (s *sess) sub(name []byte) (*bolt.Bucket, error) {
	b := s.b.Bucket(bucketName(s.f, name))
	if b == nil {
		return nil, corrupt(s.id, string(name), nil, errors.New("bucket missing"))
	}
	return b, nil
}

func (s *sess) state() (stateRec, error) {
	var st stateRec
	v := s.hot().Get(s.stateKey())
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
	return s.hot().Put(s.stateKey(), v)
}

// get decodes the record at key of bucket name into v; found is false when
// the key is absent.
func (s *sess) get(name []byte, t recType, key []byte, v any) (found bool, err error) {
	b, err := s.tbl(name)
	if err != nil {
		return false, err
	}
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := decode(t, raw, v); err != nil {
		return true, corrupt(s.id, string(name), key, err)
	}
	return true, nil
}

func (s *sess) put(name []byte, t recType, key []byte, v any, appendOnly bool) error {
	b, err := s.tbl(name)
	if err != nil {
		return err
	}
	if appendOnly && b.prefix == nil {
		b.b.FillPercent = 1.0
	}
	raw, err := encode(t, v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func (s *sess) event(seq uint64) (tier.Event, []byte, error) {
	stores, err := s.stores()
	if err != nil {
		return tier.Event{}, nil, err
	}
	var raw []byte
	for _, st := range stores {
		if raw = st.b.Get(s.eventKey(st.style, seq)); raw != nil {
			break
		}
	}
	if raw == nil && s.j != nil && !s.cold {
		err := s.journal(seq, func(at uint64, v []byte) (bool, error) {
			if at == seq {
				raw = v
			}
			return false, nil
		})
		if err != nil {
			return tier.Event{}, nil, err
		}
	}
	if raw == nil {
		return tier.Event{}, nil, corrupt(s.id, "l0", u64(seq), errors.New("event missing"))
	}
	e, err := decodeEvent(s.id, seq, raw)
	return e, raw, err
}

// decodeEvent decodes the event stored under seq. Errors name the session,
// "l0" (the raw log, whatever the format's bucket) and seq.
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
// stored bytes (valid only during the call).
func (s *sess) events(from, to uint64, fn func(e tier.Event, raw []byte) error) error {
	want := from
	err := s.rawEvents(from, func(seq uint64, v []byte) (bool, error) {
		if seq > to {
			return false, nil
		}
		if seq != want {
			return false, corrupt(s.id, "l0", u64(want), errors.Newf("event missing (next stored is %d)", seq))
		}
		e, err := decodeEvent(s.id, seq, v)
		if err != nil {
			return false, err
		}
		if err := fn(e, v); err != nil {
			return false, err
		}
		want++
		return want <= to, nil
	})
	if err != nil {
		return err
	}
	if want <= to {
		return corrupt(s.id, "l0", u64(want), errors.New("event missing"))
	}
	return nil
}

// rawEvents calls fn with the seq and the stored bytes (valid only during
// the call) of the session's events from seq from on, in the order they
// are stored — in l0 (format 5: the session's bucket, then the events
// bucket), then in formats 4 and 5 in the journal — until fn returns
// false. A key it cannot read is an error; a gap is for fn to find.
func (s *sess) rawEvents(from uint64, fn func(seq uint64, raw []byte) (more bool, err error)) error {
	stores, err := s.stores()
	if err != nil {
		return err
	}
	for _, st := range stores {
		c := st.b.Cursor()
		for k, v := c.Seek(s.eventKey(st.style, from)); k != nil; k, v = c.Next() {
			seq, ok, err := s.eventSeq(st.style, k)
			if err != nil {
				return corrupt(s.id, "l0", k, err)
			}
			if !ok {
				break
			}
			if more, err := fn(seq, v); err != nil || !more {
				return err
			}
		}
	}
	if s.j == nil || s.cold {
		return nil
	}
	return s.journal(from, fn)
}

// journal calls fn with the seq and stored bytes of the session's events
// in format 4's journal from seq from on, in order, until fn returns false.
// It reads the journal from the session's first entry there, passing the
// other sessions' entries.
func (s *sess) journal(from uint64, fn func(seq uint64, raw []byte) (more bool, err error)) error {
	first, err := s.journalFirst()
	if first == nil || err != nil {
		return err
	}
	c := s.j.Cursor()
	k, v := c.Seek(first)
	if !bytes.Equal(k, first) {
		return corrupt(s.id, string(bucketJournal4), first, errors.New("the session's first journal entry is missing"))
	}
	for ; k != nil; k, v = c.Next() {
		if len(v) < journalHeader {
			return corrupt(s.id, string(bucketJournal4), k, errors.Newf("entry of %d bytes", len(v)))
		}
		if [4]byte(v) != s.num {
			continue
		}
		seq := binary.BigEndian.Uint64(v[4:])
		if seq < from {
			continue
		}
		if more, err := fn(seq, v[journalHeader:]); err != nil || !more {
			return err
		}
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
	found, err := s.get(bucketNodes, recNode, u64(id), &r)
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
	return s.put(bucketNodes, recNode, u64(r.ID), r, false)
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
	found, err := s.get(bucketMarkers, recMarker, u64(id), &r)
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
	return s.put(bucketMarkers, recMarker, u64(m.ID), &r, false)
}

func (s *sess) checkpoint(id uint64) (checkpoint.Checkpoint, error) {
	var r checkpointRec
	found, err := s.get(bucketCkpts, recCheckpoint, u64(id), &r)
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
	return s.put(bucketCkpts, recCheckpoint, u64(c.ID), &r, false)
}

// putCheckpoint writes a new usable checkpoint at seq with the given prefix
// roots and indexes it.
func (s *sess) putCheckpoint(st *stateRec, seq uint64, prefix []uint64, why string) (uint64, error) {
	st.NextCk++
	c := checkpoint.Checkpoint{ID: st.NextCk, Seq: seq, Prefix: prefix, FrameVersion: st.FrameVersion, Why: why, Status: checkpoint.StatusValid}
	if err := s.writeCheckpoint(&c); err != nil {
		return 0, err
	}
	return c.ID, s.put(bucketCkValid, recIndex, u64u64(seq, c.ID), &indexRec{V: recordVersion, ID: c.ID}, false)
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

// nearestCheckpoint returns the newest usable checkpoint with the greatest
// seq ≤ seq, from the ckvalid index.
func (s *sess) nearestCheckpoint(seq uint64) (id, at uint64, err error) {
	b, err := s.sub(bucketCkValid)
	if err != nil {
		return 0, 0, err
	}
	c := b.Cursor()
	var k []byte
	if seq == ^uint64(0) {
		k, _ = c.Last()
	} else {
		k, _ = c.Seek(u64u64(seq+1, 0))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	if k == nil {
		return 0, 0, corrupt(s.id, "ckvalid", nil, errors.New("no usable checkpoint, not even at seq 0"))
	}
	if len(k) != 16 {
		return 0, 0, corrupt(s.id, "ckvalid", k, errors.New("bad key"))
	}
	at, id = u64val(k[:8]), u64val(k[8:])
	return id, at, nil
}

// roots returns the current roots in seq order, up to and including the one
// starting at upto (all when upto is the max uint64).
func (s *sess) roots(upto uint64) ([]rootRec, error) {
	b, err := s.sub(bucketRoots)
	if err != nil {
		return nil, err
	}
	var out []rootRec
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		from, err := parseU64(k)
		if err != nil {
			return nil, corrupt(s.id, "roots", k, err)
		}
		if from > upto {
			break
		}
		var r rootRec
		if err := decode(recRoot, v, &r); err != nil {
			return nil, corrupt(s.id, "roots", k, err)
		}
		if r.From != from || r.To < r.From {
			return nil, corrupt(s.id, "roots", k, errors.Newf("record holds span %d..%d", r.From, r.To))
		}
		out = append(out, r)
	}
	return out, nil
}

// refusalLast returns the newest audit record, if any.
func (s *sess) refusalLast() (*Refusal, error) {
	b, err := s.sub(bucketAudit)
	if err != nil {
		return nil, err
	}
	k, v := b.Cursor().Last()
	if k == nil {
		return nil, nil
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
	found, err := s.get(bucketAudit, recAudit, u64(id), &r)
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
