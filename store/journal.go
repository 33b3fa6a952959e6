package store

import (
	"bytes"
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
func (s *sess) journals(vals [][]byte) (bool, error) {
	if s.cold {
		return smallAppend(vals), nil // nothing of it in the journal
	}
	first, err := s.journalFirst()
	return first != nil || smallAppend(vals), err
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

// hotValue returns the value at key of the hot bucket h, nil when there is
// none, and an error when the key holds a bucket (damage: Get would say
// nothing is there, and a Put or Delete would fail half-way through a
// commit).
func hotValue(h *bolt.Bucket, key []byte) ([]byte, error) {
	k, v := h.Cursor().Seek(key)
	if !bytes.Equal(k, key) {
		return nil, nil
	}
	if v == nil {
		return nil, corrupt("", string(bucketHot4), key, errors.New("a bucket where a value belongs"))
	}
	return v, nil
}

// journalFirst returns the journal key of the session's first event in the
// journal, or nil when it has none there.
func (s *sess) journalFirst() ([]byte, error) {
	first, err := hotValue(s.h, s.journalKey())
	if err != nil {
		return nil, corrupt(s.id, string(bucketHot4), s.journalKey(), errors.Unwrap(err))
	}
	if first != nil && len(first) != 8 {
		return nil, corrupt(s.id, string(bucketHot4), s.journalKey(), errors.Newf("journal key of %d bytes", len(first)))
	}
	return first, nil
}

// maxJournalKey bounds the journal's keys and sequence: the journal starts
// again at 1 at every fold, so no undamaged journal comes near it, and an
// append past it could wrap the sequence round to keys in use.
const maxJournalKey = 1 << 48

// journalSound checks that an append of n events can go to the journal:
// its keys are its own (8 bytes), and the keys the append takes, after the
// last one (putJournal), stay below maxJournalKey.
func journalSound(tx *bolt.Tx, n int) error {
	j := tx.Bucket(bucketJournal4)
	if j == nil {
		return corrupt("", string(bucketJournal4), nil, errors.New("bucket missing"))
	}
	k, _ := j.Cursor().Last()
	switch {
	case k == nil:
	case len(k) != 8:
		return corrupt("", string(bucketJournal4), k, errors.Newf("last key of %d bytes", len(k)))
	case binary.BigEndian.Uint64(k) > maxJournalKey-uint64(n):
		return corrupt("", string(bucketJournal4), k, errors.New("last key past any a journal reaches"))
	}
	return nil
}

// lastJournalKey returns the journal's last key as a number (0: empty);
// journalSound checked it.
func lastJournalKey(j *bolt.Bucket) uint64 {
	if k, _ := j.Cursor().Last(); len(k) == 8 {
		return binary.BigEndian.Uint64(k)
	}
	return 0
}

// putJournal appends events (seqs first.., stored bytes vals) to the
// journal, recording in h where the session's first one is. A sequence
// that is not the journal's last key or past it, or that is past
// maxJournalKey (damage either way), is set to the last key first: the
// next key is past every entry, no entry is written over, and the
// sequence cannot wrap round.
func (s *sess) putJournal(first uint64, vals [][]byte) error {
	s.j.FillPercent = 1.0 // keys only ever grow
	if last, seq := lastJournalKey(s.j), s.j.Sequence(); last > seq || seq > maxJournalKey {
		if err := s.j.SetSequence(last); err != nil {
			return err
		}
	}
	start, err := s.journalFirst()
	if err != nil {
		return err
	}
	for i, v := range vals {
		g, err := s.j.NextSequence()
		if err != nil {
			return err
		}
		k := binary.BigEndian.AppendUint64(nil, g)
		if start == nil {
			if err := s.h.Put(s.journalKey(), k); err != nil {
				return err
			}
			start = k
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
// Options.JournalEvents events. It first checks all it will write and
// delete (canFold), and writes nothing when the journal or the records
// around it are damaged: the appends go on into the journal, and Verify
// reports the damage.
func (db *DB) foldJournal(tx *bolt.Tx) error {
	j, h, e := tx.Bucket(bucketJournal4), tx.Bucket(bucketHot4), tx.Bucket(bucketEvents3)
	if j == nil || h == nil || e == nil || j.Sequence() < uint64(db.opts.JournalEvents) {
		return nil
	}
	sessions := db.canFold(tx, j, h, e)
	if sessions == nil {
		return nil
	}
	e.FillPercent = 1.0
	c := j.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		key := make([]byte, 13)
		copy(key, v[:4])
		key[4] = eventPrefix
		copy(key[5:], v[4:journalHeader])
		if err := e.Put(key, append([]byte(nil), v[journalHeader:]...)); err != nil {
			return err
		}
	}
	for _, num := range sessions {
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

// canFold returns the sessions of the journal j when folding it can write
// nothing wrong, or nil: every key is 8 bytes, every entry longer than
// its header; each session's state is in h, and its record of its first
// entry, if any, is a value (the fold deletes it: a damaged record is
// dropped with the rest, and the session's events become readable
// again); its entries carry the seqs after its last event in e, one by
// one, up to its head — so no event in e is written over, and none of
// another session's (a damaged header moves an entry out of that run).
// The pages of e each session's events go to are walked first, unless
// this handle has.
func (db *DB) canFold(tx *bolt.Tx, j, h, e *bolt.Bucket) [][4]byte {
	next := map[[4]byte]uint64{} // a session's next seq in the journal
	var order [][4]byte
	c := j.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || len(v) < journalHeader {
			return nil
		}
		num, seq := [4]byte(v), binary.BigEndian.Uint64(v[4:])
		if want, ok := next[num]; ok {
			if seq != want {
				return nil
			}
			next[num] = seq + 1
			continue
		}
		// The pointer is for reads; the fold deletes it, and a Delete of
		// a bucket would fail.
		if _, err := hotValue(h, append(num[:], journalSuffix4)); err != nil {
			return nil
		}
		if !db.graph.checkedNum(num) {
			n, err := walkEvents(tx, e, num)
			if err != nil {
				return nil
			}
			db.graph.markNum(num)
			if db.graph.touched.Add(int64(n)) > releaseAfterPages {
				// After a reopen, up to a journal's worth of sessions:
				// their pages leave the resident set as db.session's do.
				db.graph.touched.Store(0)
				releaseMapped(db.path)
			}
		}
		last, ok := lastEventSeq(e, num)
		if ok && last == 0 && db.format >= 5 {
			// Format 5: with nothing in e, its entries follow the events
			// it was appended while cold.
			last, ok = coldHead(h, num)
		}
		if !ok || seq != last+1 {
			return nil
		}
		next[num] = seq + 1
		order = append(order, num)
	}
	for _, num := range order {
		v, err := hotValue(h, append(num[:], stateSuffix4))
		var st stateRec
		if err != nil || v == nil || decodeState(v, &st) != nil || st.Head != next[num]-1 {
			return nil
		}
	}
	return order
}

// lastEventSeq returns the seq of session num's last event in the events
// bucket e (0: none); ok is false when the key before the session's id is
// neither an event of the session nor another session's key.
func lastEventSeq(e *bolt.Bucket, num [4]byte) (seq uint64, ok bool) {
	c := e.Cursor()
	var k, v []byte
	if at, _ := c.Seek(append(num[:], stateSuffix3)); at == nil {
		k, v = c.Last() // the session's keys are the bucket's last
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, num[:]) {
		return 0, true
	}
	if len(k) != 13 || k[4] != eventPrefix || v == nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[5:]), true
}

// coldHead returns the seq of the last event that session num of format 5
// was appended while cold (0: none), which warm records in h — where a
// fold reads it, rather than in the session's own bucket, so that damage
// there cannot stop every session's fold. ok is false when the record is
// missing or damaged.
func coldHead(h *bolt.Bucket, num [4]byte) (seq uint64, ok bool) {
	v, err := hotValue(h, append(num[:], coldHeadSuffix5))
	if err != nil || len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// canWarm checks that a cold session of format 5, or a new one (s.b nil),
// can turn hot (warm): the number it will take is free — no key of h or e
// carries it (nextSessionNumber, which walks the pages of e where its keys
// will go), nor a journal entry — and its open bucket holds values only:
// warm moves them, and deletes the bucket, which would read the pages of a
// bucket inside it, never walked (graph.go). A Put over a bucket in h or e
// would fail half-way through a commit: when anything is off, the append
// keeps the session cold instead (prepareAppend).
func (db *DB) canWarm(tx *bolt.Tx, s *sess) error {
	num, atEnd, err := nextSessionNumber(tx, s.f, s.id, !db.graph.tailWalked())
	if err != nil {
		return err
	}
	if atEnd {
		db.graph.markTail()
	}
	c := tx.Bucket(bucketJournal4).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) >= 4 && [4]byte(v) == num {
			return corrupt(s.id, string(bucketJournal4), k, errors.Newf("an entry of session number %d, which no session has", binary.BigEndian.Uint32(num[:])))
		}
	}
	if s.b == nil {
		return nil
	}
	if open := s.b.Bucket(keyOpen2); open != nil {
		return open.ForEach(func(k, v []byte) error {
			if v == nil {
				return corrupt(s.id, string(keyOpen2), k, errors.New("a bucket where an open call belongs"))
			}
			return nil
		})
	}
	return nil
}

// warm turns a cold session of format 5 hot, before its first append to
// the journal: it takes the next session number, its state and open calls
// move from its bucket to the hot bucket, beside every hot session's, h
// records its head (coldHead), and the events bucket gets its id key. Its
// events stay where they are. The caller checked it (canWarm), and writes
// the state (putState) after.
func (s *sess) warm(tx *bolt.Tx) error {
	st, err := s.state()
	if err != nil {
		return err
	}
	num, err := takeSessionNumber(tx, s.f, s.id)
	if err != nil {
		return err
	}
	if err := s.b.Put(keyNum3, num[:]); err != nil {
		return err
	}
	s.num, s.numbered = num, true
	s.e, s.h, s.j = tx.Bucket(bucketEvents3), tx.Bucket(bucketHot4), tx.Bucket(bucketJournal4)
	if s.e == nil || s.h == nil || s.j == nil {
		return corrupt(s.id, "", nil, errors.New("the events bucket, hot bucket or journal is missing"))
	}
	if err := s.b.Delete(stateKey2); err != nil {
		return err
	}
	if open := s.b.Bucket(keyOpen2); open != nil {
		err := open.ForEach(func(k, v []byte) error {
			return s.h.Put(append(append(s.num[:], openSuffix3), k...), v)
		})
		if err != nil {
			return err
		}
		if err := s.b.DeleteBucket(keyOpen2); err != nil {
			return err
		}
	}
	if err := s.h.Put(append(s.num[:], coldHeadSuffix5), binary.BigEndian.AppendUint64(nil, st.Head)); err != nil {
		return err
	}
	s.e.FillPercent = 1.0
	if err := s.e.Put(append(s.num[:], stateSuffix3, idSuffix3), []byte(s.id)); err != nil {
		return err
	}
	s.cold = false
	return nil
}
