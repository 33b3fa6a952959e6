package store

import (
	"bytes"
	"encoding/binary"

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
// the whole file (Verify), or through DB.sessionBucket.
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

// makeSessionBucket creates session id's bucket and the buckets inside it.
func makeSessionBucket(tx *bolt.Tx, f int, id string) (*bolt.Bucket, error) {
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
	return b, nil
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

// l0 returns the bucket holding the session's events.
func (s *sess) l0() (*bolt.Bucket, error) {
	if s.f == 1 {
		return s.sub(bucketL0)
	}
	return s.b, nil
}

// eventKey returns the key of event seq in the bucket l0 returns.
func (s *sess) eventKey(seq uint64) []byte {
	if s.f == 1 {
		return u64(seq)
	}
	k := make([]byte, 9)
	k[0] = eventPrefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// eventSeq returns the seq of an event key of the bucket l0 returns. ok is
// false for a key past the events (format 2: the state); err is for a key
// that is neither.
func (s *sess) eventSeq(k []byte) (seq uint64, ok bool, err error) {
	if s.f != 1 {
		if len(k) == 0 || k[0] != eventPrefix {
			return 0, false, nil
		}
		k = k[1:]
	}
	seq, err = parseU64(k)
	return seq, err == nil, err
}

// stateKey returns the key of the session's state in its bucket.
func (s *sess) stateKey() []byte {
	if s.f == 1 {
		return keyState
	}
	return stateKey2
}
