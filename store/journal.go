package store

import (
	"encoding/binary"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
)

// Format 4's journal (schema.go): the appends of many sessions side by
// side, folded into each session's keys of the events bucket in bulk.

const (
	// journalHeader is the session number and seq before an entry's event.
	journalHeader = 4 + 8
	// directEvents is how many events an append must carry to go straight
	// to the events bucket (when its session has nothing in the journal):
	// enough to fill part of a leaf of their own.
	directEvents = 8
	// directBytes is the same in bytes: one large event goes straight to
	// the events bucket too, rather than being written twice.
	directBytes = 4 << 10
)

// journals reports whether an append of events (their stored bytes vals)
// to s goes to the journal: when s already has events there, which must
// stay after its events in e, or when the append is small.
func (s *sess) journals(vals [][]byte) bool {
	return s.h.Get(s.journalKey()) != nil || smallAppend(vals)
}

// smallAppend reports whether an append of events whose stored bytes are
// vals is small enough for the journal.
func smallAppend(vals [][]byte) bool {
	if len(vals) >= directEvents {
		return false
	}
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	return n < directBytes
}

// journalSound checks that the journal's next key is past its last one:
// a damaged sequence would make an append write over another's entry.
func journalSound(tx *bolt.Tx) error {
	j := tx.Bucket(bucketJournal4)
	if j == nil {
		return corrupt("", string(bucketJournal4), nil, errors.New("bucket missing"))
	}
	if k, _ := j.Cursor().Last(); k != nil && (len(k) != 8 || binary.BigEndian.Uint64(k) > j.Sequence()) {
		return corrupt("", string(bucketJournal4), k, errors.Newf("last key past the journal's sequence %d", j.Sequence()))
	}
	return nil
}

// putJournal appends events (seqs first.., stored bytes vals) to the
// journal, recording in h where the session's first one is.
func (s *sess) putJournal(first uint64, vals [][]byte) error {
	s.j.FillPercent = 1.0 // keys only ever grow
	hasFirst := s.h.Get(s.journalKey()) != nil
	for i, v := range vals {
		g, err := s.j.NextSequence()
		if err != nil {
			return err
		}
		k := binary.BigEndian.AppendUint64(nil, g)
		if !hasFirst {
			if err := s.h.Put(s.journalKey(), k); err != nil {
				return err
			}
			hasFirst = true
		}
		e := make([]byte, journalHeader+len(v))
		copy(e, s.num[:])
		binary.BigEndian.PutUint64(e[4:], first+uint64(i))
		copy(e[journalHeader:], v)
		if err := s.j.Put(k, e); err != nil {
			return err
		}
	}
	return nil
}

// foldJournal moves every event of format 4's journal to its session's
// keys in the events bucket, and empties the journal, once it holds
// Options.JournalEvents events. It writes nothing when the journal or the pages it
// would write are damaged (a page graph this handle has not checked fails
// its walk): the appends go on into the journal, and Verify reports the
// damage.
func (db *DB) foldJournal(tx *bolt.Tx) error {
	j, h, e := tx.Bucket(bucketJournal4), tx.Bucket(bucketHot4), tx.Bucket(bucketEvents3)
	if j == nil || h == nil || e == nil || j.Sequence() < uint64(db.opts.JournalEvents) {
		return nil
	}
	sessions := map[[4]byte]bool{}
	c := j.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || len(v) < journalHeader {
			return nil
		}
		num := [4]byte(v)
		if sessions[num] {
			continue
		}
		sessions[num] = true
		if !db.graph.checkedNum(num) {
			if _, err := walkEvents(tx, e, num); err != nil {
				return nil
			}
			db.graph.markNum(num)
		}
		if e.Get(append(num[:], stateSuffix3, idSuffix3)) == nil {
			return nil // no session has the number
		}
	}
	e.FillPercent = 1.0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		key := make([]byte, 13)
		copy(key, v[:4])
		key[4] = eventPrefix
		copy(key[5:], v[4:journalHeader])
		if err := e.Put(key, append([]byte(nil), v[journalHeader:]...)); err != nil {
			return err
		}
	}
	for num := range sessions {
		if err := h.Delete(append(num[:], journalSuffix4)); err != nil {
			return err
		}
	}
	if err := tx.DeleteBucket(bucketJournal4); err != nil {
		return errors.Wrap(err, "store: folding the journal")
	}
	_, err := tx.CreateBucket(bucketJournal4)
	return errors.Wrap(err, "store: folding the journal")
}
