package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
)

// The two layouts of schema.go, behind one set of functions: a DB knows its
// format from the meta record, a sess carries it.

// sessionKey returns the root's key of session id's bucket in format 2.
func sessionKey(id string) []byte {
	return append(append(make([]byte, 0, len(sessionPrefix)+len(id)), sessionPrefix...), id...)
}

// lookupSession returns session id's bucket in a database of format f, or
// nil, without checking its page graph: only for a transaction that checks
// the whole file (Verify), or through DB.session.
func lookupSession(tx *bolt.Tx, f int, id string) *bolt.Bucket {
	if f == 1 {
		s := tx.Bucket(bucketSessions)
		if s == nil {
			return nil
		}
		return s.Bucket([]byte(id))
	}
	return tx.Bucket(sessionKey(id))
}

// newSess returns session id's records in tx, given its bucket b (nil: a
// session not yet made). In formats 3 and 4 it reads the session's number and
// finds the events bucket.
func newSess(tx *bolt.Tx, f int, id string, b *bolt.Bucket) (*sess, error) {
	s := &sess{id: id, b: b, f: f}
	if f < 3 || b == nil {
		return s, nil
	}
	// Format 5: a session is cold while its bucket holds its state, and
	// gets its number when it turns hot (warm).
	s.cold = f >= 5 && b.Get(stateKey2) != nil
	num := b.Get(keyNum3)
	if s.cold && num == nil {
		return s, nil
	}
	if s.cold {
		// Damage: a hot session's state key back in its bucket would read
		// as an old head, its newer events passed over.
		return nil, corrupt(id, "session", stateKey2, errors.New("a state in the session's bucket, which only a session without a number (cold) has"))
	}
	if len(num) != 4 {
		return nil, corrupt(id, "session", keyNum3, errors.Newf("session number of %d bytes", len(num)))
	}
	if s.e = tx.Bucket(bucketEvents3); s.e == nil {
		return nil, corrupt(id, string(bucketEvents3), nil, errors.New("bucket missing"))
	}
	s.num, s.numbered = [4]byte(num), true
	if f >= 4 {
		if s.h = tx.Bucket(bucketHot4); s.h == nil {
			return nil, corrupt(id, string(bucketHot4), nil, errors.New("bucket missing"))
		}
		if s.j = tx.Bucket(bucketJournal4); s.j == nil {
			return nil, corrupt(id, string(bucketJournal4), nil, errors.New("bucket missing"))
		}
	}
	return s, nil
}

// makeSessionBucket creates session id's bucket and the buckets inside it;
// in formats 3 and 4 it gives the session the next number.
func makeSessionBucket(tx *bolt.Tx, f int, id string) (*sess, error) {
	var b *bolt.Bucket
	var err error
	if f == 1 {
		b, err = tx.Bucket(bucketSessions).CreateBucket([]byte(id))
	} else {
		b, err = tx.CreateBucket(sessionKey(id))
	}
	if err != nil {
		return nil, errors.Wrapf(err, "store: creating session %q", id)
	}
	for _, name := range subBuckets(f) {
		if _, err := b.CreateBucket(name); err != nil {
			return nil, err
		}
	}
	if f >= 5 {
		// Cold: nothing of it outside its bucket, not even a number.
		return &sess{id: id, b: b, f: f, cold: true}, nil
	}
	if f >= 3 {
		// prepareAppend checked what this reaches, in this transaction.
		num, err := takeSessionNumber(tx, f, id)
		if err != nil {
			return nil, err
		}
		if err := b.Put(keyNum3, num[:]); err != nil {
			return nil, err
		}
		if err := tx.Bucket(bucketEvents3).Put(append(num[:], stateSuffix3, idSuffix3), []byte(id)); err != nil {
			return nil, err
		}
	}
	return newSess(tx, f, id, b)
}

// takeSessionNumber gives session id the next number (nextSessionNumber,
// which the caller checked in this transaction), and records the one after.
func takeSessionNumber(tx *bolt.Tx, f int, id string) ([4]byte, error) {
	num, _, err := nextSessionNumber(tx, f, id, false)
	if err != nil {
		return num, err
	}
	n := binary.BigEndian.Uint32(num[:])
	return num, tx.Bucket(bucketMeta).Put(keyNextSess3, encodeNext(f, n+1))
}

// nextSessionNumber returns the number formats 3 and 4 give the next session
// (format 5: the next session to turn hot),
// id, once it has checked what its first write will reach: meta's record
// of the number, the pages of the events bucket where the session's keys
// go (which no read of this handle may have reached), and that no session
// has the number yet. prepareAppend calls it before an append makes a
// session, so that a damaged file fails that append alone. atEnd reports
// that no key of the events bucket sorts after the number's: the pages
// walked are the bucket's rightmost path, where every later number's keys
// go too (meta's record of the number changes only with this handle's own
// writes), on those pages or on pages this handle writes. walk is false
// when a walk found that: those pages are checked already.
func nextSessionNumber(tx *bolt.Tx, f int, id string, walk bool) (num [4]byte, atEnd bool, err error) {
	next, err := decodeNext(f, tx.Bucket(bucketMeta).Get(keyNextSess3))
	if err != nil {
		return num, false, corrupt("", string(bucketMeta), keyNextSess3, err)
	}
	if next == ^uint32(0) {
		return num, false, errors.Newf("store: creating session %q: every session number is taken", id)
	}
	num = [4]byte(binary.BigEndian.AppendUint32(nil, next))
	e := tx.Bucket(bucketEvents3)
	if e == nil {
		return num, false, corrupt(id, string(bucketEvents3), nil, errors.New("bucket missing"))
	}
	if walk {
		if _, err := walkEvents(tx, e, num); err != nil {
			return num, false, corrupt(id, string(bucketEvents3), nil, errors.Wrap(err, "damaged page graph"))
		}
	}
	k, _ := e.Cursor().Seek(num[:])
	inUse := bytes.HasPrefix(k, num[:])
	if h := tx.Bucket(bucketHot4); h != nil && !inUse {
		// Format 4: the state and open calls are in the hot bucket
		// (walked at Open).
		hk, _ := h.Cursor().Seek(num[:])
		inUse = bytes.HasPrefix(hk, num[:])
	}
	if inUse {
		return num, false, corrupt("", string(bucketMeta), keyNextSess3, errors.Newf("the next session number %d is in use", binary.BigEndian.Uint32(num[:])))
	}
	return num, k == nil, nil
}

// encodeNext encodes meta's record of the number the next session gets, in
// format f: 4 bytes, and in format 5 its CRC32C after them. A format 5
// session while cold has no key anywhere but in its own bucket, so nothing
// can tell that a damaged record names a number in use (formats 3 and 4
// find the number's keys in e or h): the checksum makes the damage an
// error instead of two sessions sharing a number.
func encodeNext(f int, n uint32) []byte {
	v := binary.BigEndian.AppendUint32(nil, n)
	if f >= 5 {
		v = binary.BigEndian.AppendUint32(v, crc32.Checksum(v, castagnoli))
	}
	return v
}

// decodeNext decodes what encodeNext encoded.
func decodeNext(f int, v []byte) (uint32, error) {
	size := 4
	if f >= 5 {
		size = 8
	}
	if len(v) != size {
		return 0, errors.Newf("next session number of %d bytes, not %d", len(v), size)
	}
	if f >= 5 && binary.BigEndian.Uint32(v[4:]) != crc32.Checksum(v[:4], castagnoli) {
		return 0, errors.New("next session number: checksum mismatch")
	}
	return binary.BigEndian.Uint32(v), nil
}

// forEachSession calls fn with each session's id, in byte order, and its
// bucket — nil where the key holds a value instead (damage).
func forEachSession(tx *bolt.Tx, f int, fn func(id []byte, b *bolt.Bucket) error) error {
	if f == 1 {
		s := tx.Bucket(bucketSessions)
		return s.ForEach(func(k, v []byte) error {
			if v != nil {
				return fn(k, nil)
			}
			return fn(k, s.Bucket(k))
		})
	}
	c := tx.Cursor()
	for k, _ := c.Seek(sessionPrefix); k != nil && bytes.HasPrefix(k, sessionPrefix); k, _ = c.Next() {
		if err := fn(k[len(sessionPrefix):], tx.Bucket(k)); err != nil {
			return err
		}
	}
	return nil
}

// sessionsBucket returns the bucket whose keys are the sessions: in format
// 1 the sessions bucket, in format 2 the root.
func sessionsBucket(tx *bolt.Tx, f int) *bolt.Bucket {
	if f == 1 {
		return tx.Bucket(bucketSessions)
	}
	return tx.Cursor().Bucket()
}

// subBuckets returns the names of the buckets inside the session's bucket:
// subBuckets(f), less format 5's open bucket once the session is hot.
func (s *sess) subBuckets() [][]byte {
	names := subBuckets(s.f)
	if s.f >= 5 && !s.cold {
		names = slices.DeleteFunc(slices.Clone(names), func(n []byte) bool { return bytes.Equal(n, keyOpen2) })
	}
	return names
}

// evStore is a bucket holding some of a session's events, and the style
// of their keys there: that of format 1 (seq), of format 2 (0xFE seq), or
// of format 3 (<n> 0xFE seq).
type evStore struct {
	b     *bolt.Bucket
	style int
}

// direct returns where an append that does not go to the journal writes
// the session's events: format 1's l0 bucket, format 2's session bucket,
// formats 3 and 4's events bucket; in format 5 the session's bucket while
// the session is cold, the events bucket once it is hot (schema.go).
func (s *sess) direct() (evStore, error) {
	switch {
	case s.f == 1:
		b, err := s.sub(bucketL0)
		return evStore{b, 1}, err
	case s.f == 2 || s.cold:
		return evStore{s.b, 2}, nil
	}
	return evStore{s.e, 3}, nil
}

// stores returns the buckets holding the session's events outside the
// journal, in the order of their seqs: in format 5, its bucket (the events
// appended while it was cold), then the events bucket.
func (s *sess) stores() ([]evStore, error) {
	if s.f >= 5 && s.cold {
		return []evStore{{s.b, 2}}, nil
	}
	if s.f >= 5 {
		return []evStore{{s.b, 2}, {s.e, 3}}, nil
	}
	d, err := s.direct()
	if err != nil {
		return nil, err
	}
	return []evStore{d}, nil
}

// hot returns the bucket holding the session's state: its own, in format 3
// the events bucket, in format 4 the hot bucket, in format 5 its own while
// it is cold and the hot bucket once it is hot.
func (s *sess) hot() *bolt.Bucket {
	switch {
	case s.f <= 2 || s.cold:
		return s.b
	case s.f == 3:
		return s.e
	}
	return s.h
}

// eventKey returns the key of event seq in a bucket of the given key style.
func (s *sess) eventKey(style int, seq uint64) []byte {
	switch style {
	case 1:
		return u64(seq)
	case 2:
		return binary.BigEndian.AppendUint64([]byte{eventPrefix}, seq)
	}
	k := make([]byte, 13)
	copy(k, s.num[:])
	k[4] = eventPrefix
	binary.BigEndian.PutUint64(k[5:], seq)
	return k
}

// eventSeq returns the seq of an event key of a bucket of the given key
// style. ok is false for a key past the events (format 2: the state;
// format 3: the state, or another session's key); err is for a key that
// is neither.
func (s *sess) eventSeq(style int, k []byte) (seq uint64, ok bool, err error) {
	switch style {
	case 1:
	case 2:
		if len(k) == 0 || k[0] != eventPrefix {
			return 0, false, nil
		}
		k = k[1:]
	default:
		if len(k) < 5 || [4]byte(k) != s.num || k[4] != eventPrefix {
			return 0, false, nil
		}
		k = k[5:]
	}
	seq, err = parseU64(k)
	return seq, err == nil, err
}

// stateKey returns the key of the session's state in the bucket hot
// returns.
func (s *sess) stateKey() []byte {
	switch {
	case s.f == 1:
		return keyState
	case s.f == 2 || s.cold:
		return stateKey2
	case s.f == 3:
		return append(s.num[:], stateSuffix3)
	}
	return append(s.num[:], stateSuffix4)
}

// journalKey returns the key, in the hot bucket of format 4, of the
// journal key of the session's first event in the journal.
func (s *sess) journalKey() []byte { return append(s.num[:], journalSuffix4) }

// table is a bucket, or the keys under a prefix of one: format 3 keeps a
// session's open calls in the events bucket, under <n> 0xFF 'o'. Keys
// passed and returned are without the prefix.
type table struct {
	b      *bolt.Bucket
	prefix []byte
}

func (t table) key(k []byte) []byte {
	if t.prefix == nil {
		return k
	}
	return append(append(make([]byte, 0, len(t.prefix)+len(k)), t.prefix...), k...)
}

// Get returns the value at k, or nil.
func (t table) Get(k []byte) []byte { return t.b.Get(t.key(k)) }

// Put stores v at k.
func (t table) Put(k, v []byte) error { return t.b.Put(t.key(k), v) }

// Delete removes k.
func (t table) Delete(k []byte) error { return t.b.Delete(t.key(k)) }

// ForEach calls fn with every key (without the prefix) and value, in order.
func (t table) ForEach(fn func(k, v []byte) error) error {
	if t.prefix == nil {
		return t.b.ForEach(fn)
	}
	c := t.b.Cursor()
	for k, v := c.Seek(t.prefix); k != nil && bytes.HasPrefix(k, t.prefix); k, v = c.Next() {
		if err := fn(k[len(t.prefix):], v); err != nil {
			return err
		}
	}
	return nil
}

// tbl returns the records of bucket name: the bucket itself (sub), or for
// the open calls their keys in the events bucket (format 3) or in the hot
// bucket (format 4).
func (s *sess) tbl(name []byte) (table, error) {
	if s.f >= 3 && !s.cold && string(name) == string(bucketOpen) {
		if s.f == 3 {
			return table{b: s.e, prefix: append(s.num[:], stateSuffix3, openSuffix3)}, nil
		}
		return table{b: s.h, prefix: append(s.num[:], openSuffix3)}, nil
	}
	b, err := s.sub(name)
	return table{b: b}, err
}
