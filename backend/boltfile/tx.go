package boltfile

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime/debug"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/internal/placecrc"
)

// The layout (doc.go): event keys, the state's, the Open table's.
const (
	eventPrefix = 0xFE
	eventKeyLen = 9
)

var (
	sessionPrefix = []byte("s/")
	keyState      = []byte{0xFF}
	keyOpenTable  = []byte("\xFFopen")
)

func sessionKey(id string) []byte {
	return append(append(make([]byte, 0, len(sessionPrefix)+len(id)), sessionPrefix...), id...)
}

func eventKey(seq uint64) []byte {
	k := make([]byte, eventKeyLen)
	k[0] = eventPrefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// tableKey returns table t's key in a session's bucket.
func tableKey(t backend.Table) []byte {
	if t == backend.Open {
		return keyOpenTable
	}
	return []byte(t.String())
}

// tx is a transaction; viewTx a read transaction, which can also copy the
// file.
type tx struct {
	b   *Backend
	btx *bolt.Tx
	w   walker
	// A write transaction: the sessions it created (their buckets are in
	// memory only), and the tables it deleted from — bbolt's cursor passes
	// over leaves a Delete emptied, in memory, to pages past those a read's
	// shadow walks: a range read of such a table walks it whole.
	created map[string]bool
	deleted map[tableRef]bool
	broken  error // a panic recovered inside bbolt: not to be committed
}

// tableRef names a session's table.
type tableRef struct {
	session string
	t       backend.Table
}

type viewTx struct{ *tx }

var (
	_ backend.Tx             = (*tx)(nil)
	_ backend.Snapshotter    = (*viewTx)(nil)
	_ backend.MappedReleaser = (*viewTx)(nil)
)

func (b *Backend) newTx(btx *bolt.Tx, txid uint64) *tx {
	t := &tx{b: b, btx: btx}
	t.w = newWalker(btx, b.cacheFor(txid))
	return t
}

// Writable implements backend.Tx.
func (t *tx) Writable() bool { return t.btx.Writable() }

// Size implements backend.Snapshotter: the length of WriteTo's copy.
func (t *viewTx) Size() int64 { return t.btx.Size() }

// WriteTo implements backend.Snapshotter: a copy of the whole file as of
// this transaction, while writers go on.
func (t *viewTx) WriteTo(w io.Writer) (int64, error) {
	n, err := t.btx.WriteTo(bigCopies{w})
	return n, errors.Wrap(err, "boltfile: copy")
}

// ReleaseMapped lets the kernel take back, from the process's resident
// set, the pages of the file this transaction read: they stay in the page
// cache. A long read of a file larger than memory calls it now and then.
// Linux only; elsewhere it does nothing. It never changes what is read.
func (t *viewTx) ReleaseMapped() { releaseRange(t.w.data) }

// rootAt is where the root bucket's pages are.
func (t *tx) rootAt() at { return at{root: uint64(t.btx.Cursor().Bucket().Root())} }

// locate walks the path to key in the bucket at in and returns where the
// bucket under key is, and whether there is one. It checks no more than a
// Get of key reads.
func (t *tx) locate(in at, key []byte) (at, bool, error) {
	if in.fresh {
		return at{fresh: true}, true, nil
	}
	var sh shadow
	s := sh.init(&t.w, in)
	if err := s.seek(key); err != nil {
		return at{}, false, errors.Wrap(err, "damaged page graph")
	}
	leaf := &s.top().p
	i := searchLeaf(leaf, key)
	if i >= leaf.n || !bytes.Equal(leaf.key(i), key) {
		return at{}, false, nil
	}
	if leaf.leafFlags(i)&bucketLeafFlag == 0 {
		return at{}, false, errors.New("a value where a bucket was expected")
	}
	v := leaf.value(i)
	if root := le64(v); root != 0 {
		return at{root: root}, true, nil
	}
	return at{inline: v[bucketHeader:]}, true, nil
}

// point walks what a Get, a Put or (del) a Delete of key in the bucket at
// where reads.
func (t *tx) point(where at, key []byte, del bool) error {
	if where.fresh {
		return nil
	}
	var sh shadow
	s := sh.init(&t.w, where)
	if err := s.seek(key); err != nil {
		return errors.Wrap(err, "damaged page graph")
	}
	if del {
		if err := s.siblings(); err != nil {
			return errors.Wrap(err, "damaged page graph")
		}
	}
	return nil
}

// Sessions implements backend.Tx.
func (t *tx) Sessions(fn func(id string) error) (err error) {
	inFn := false
	defer t.unguard(debug.SetPanicOnFault(true), &err, &inFn, "", "root")
	var a ahead
	a.s.init(&t.w, t.rootAt())
	if err := a.start(sessionPrefix); err != nil {
		return backend.Corrupt("", "root", nil, errors.Wrap(err, "damaged page graph"))
	}
	c := t.btx.Cursor()
	for k, v := c.Seek(sessionPrefix); k != nil && bytes.HasPrefix(k, sessionPrefix); {
		if v != nil {
			return backend.Corrupt("", "root", k, errors.New("a value where a session's bucket was expected"))
		}
		id := string(k[len(sessionPrefix):])
		if id == "" {
			return backend.Corrupt("", "root", k, errors.New("a session without an id"))
		}
		inFn = true
		err := fn(id)
		inFn = false
		if err != nil {
			return err
		}
		if err := a.before(k); err != nil {
			return backend.Corrupt("", "root", nil, errors.Wrap(err, "damaged page graph"))
		}
		k, v = c.Next()
	}
	return nil
}

// maxSessionBytes is the longest id bbolt can key.
const maxSessionBytes = bolt.MaxKeySize - 2

func checkID(id string) error {
	if id == "" || len(id) > maxSessionBytes {
		return errors.Newf("boltfile: a session id of %d bytes (1 to %d)", len(id), maxSessionBytes)
	}
	return nil
}

// Session implements backend.Tx.
func (t *tx) Session(id string) (s backend.Session, err error) {
	defer t.unguard(debug.SetPanicOnFault(true), &err, nil, id, "bucket")
	if err := checkID(id); err != nil {
		return nil, err
	}
	if t.created[id] {
		return t.newSession(id, t.btx.Bucket(sessionKey(id)), at{fresh: true}), nil
	}
	key := sessionKey(id)
	where, found, err := t.locate(t.rootAt(), key)
	if err != nil {
		return nil, backend.Corrupt(id, "bucket", nil, err)
	}
	b := t.btx.Bucket(key)
	switch {
	case !found && b == nil:
		return nil, nil
	case !found || b == nil:
		return nil, backend.Corrupt(id, "bucket", nil, errors.Newf("bbolt and its pages disagree on the session's bucket (pages: %v, bbolt: %v)", found, b != nil))
	case where.root == 0:
		// A bucket that holds buckets is never inline.
		return nil, backend.Corrupt(id, "bucket", nil, errors.New("session bucket stored inline"))
	case uint64(b.Root()) != where.root:
		return nil, backend.Corrupt(id, "bucket", nil, errors.Newf("bbolt finds the session's bucket at page %d, its pages at %d", b.Root(), where.root))
	}
	return t.newSession(id, b, where), nil
}

// CreateSession implements backend.Tx.
func (t *tx) CreateSession(id string) (s backend.Session, err error) {
	defer t.unguard(debug.SetPanicOnFault(true), &err, nil, id, "bucket")
	if err := checkID(id); err != nil {
		return nil, err
	}
	if !t.btx.Writable() {
		return nil, errors.New("boltfile: CreateSession in a read transaction")
	}
	key := sessionKey(id)
	if !t.created[id] {
		if err := t.point(t.rootAt(), key, false); err != nil {
			return nil, backend.Corrupt(id, "bucket", nil, err)
		}
	}
	b, err := t.btx.CreateBucket(key)
	if errors.Is(err, berrors.ErrBucketExists) {
		return nil, errors.Newf("boltfile: session %q exists", id)
	}
	if err != nil {
		return nil, errors.Wrapf(err, "boltfile: create session %q", id)
	}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		if _, err := b.CreateBucket(tableKey(tb)); err != nil {
			return nil, errors.Wrapf(err, "boltfile: create session %q table %s", id, tb)
		}
	}
	if t.created == nil {
		t.created = map[string]bool{}
	}
	t.created[id] = true
	return t.newSession(id, b, at{fresh: true}), nil
}

// session is one session's records inside a transaction.
type session struct {
	t      *tx
	id     string
	b      *bolt.Bucket
	at     at
	crc    uint32 // placecrc.Session(id)
	tables [backend.Tables]*table
}

type table struct {
	t    backend.Table
	b    *bolt.Bucket
	at   at
	name string // for errors
}

func (t *tx) newSession(id string, b *bolt.Bucket, where at) *session {
	return &session{t: t, id: id, b: b, at: where, crc: placecrc.Session(id)}
}

// ID implements backend.Session.
func (s *session) ID() string { return s.id }

func (s *session) corrupt(where string, key []byte, err error) error {
	if where == "events" {
		// The raw log, by seq, as the store names it.
		where = "l0"
		if len(key) == 9 && key[0] == eventPrefix {
			key = key[1:]
		}
	}
	return backend.Corrupt(s.id, where, key, err)
}

func (s *session) writable() error {
	if !s.t.btx.Writable() {
		return errors.Newf("boltfile: session %q: a write in a read transaction", s.id)
	}
	return nil
}

// State implements backend.Session.
func (s *session) State() (v []byte, err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, "state")
	if err := s.t.point(s.at, keyState, false); err != nil {
		return nil, s.corrupt("state", nil, err)
	}
	raw := s.b.Get(keyState)
	if raw == nil {
		return nil, nil
	}
	v, err = unseal(identity(s.crc, codeState, keyState), raw)
	if err != nil {
		return nil, s.corrupt("state", nil, err)
	}
	return v, nil
}

// PutState implements backend.Session.
func (s *session) PutState(v []byte) (err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, "state")
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.t.point(s.at, keyState, false); err != nil {
		return s.corrupt("state", nil, err)
	}
	return errors.Wrapf(s.b.Put(keyState, seal(identity(s.crc, codeState, keyState), v)), "boltfile: session %q: state", s.id)
}

// Event implements backend.Session.
func (s *session) Event(seq uint64) (v []byte, err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, "events")
	k := eventKey(seq)
	if err := s.t.point(s.at, k, false); err != nil {
		return nil, s.corrupt("events", k, err)
	}
	raw := s.b.Get(k)
	if raw == nil {
		return nil, nil
	}
	v, err = unseal(identity(s.crc, codeEvent, k), raw)
	if err != nil {
		return nil, s.corrupt("events", k, err)
	}
	return v, nil
}

// PutEvent implements backend.Session.
func (s *session) PutEvent(seq uint64, v []byte) (err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, "events")
	if err := s.writable(); err != nil {
		return err
	}
	k := eventKey(seq)
	if err := s.t.point(s.at, k, false); err != nil {
		return s.corrupt("events", k, err)
	}
	// Events are appended: leaves split full, as a log's should.
	s.b.FillPercent = 1.0
	return errors.Wrapf(s.b.Put(k, seal(identity(s.crc, codeEvent, k), v)), "boltfile: session %q: event %d", s.id, seq)
}

// Events implements backend.Session.
func (s *session) Events(from, to uint64, fn func(seq uint64, v []byte) (bool, error)) (err error) {
	inFn := false
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, &inFn, s.id, "events")
	if from > to {
		return nil
	}
	lo := eventKey(from)
	var a *ahead
	if !s.at.fresh {
		a = new(ahead)
		a.s.init(&s.t.w, s.at)
		if err := a.start(lo); err != nil {
			return s.corrupt("events", lo, errors.Wrap(err, "damaged page graph"))
		}
	}
	c := s.b.Cursor()
	for k, v := c.Seek(lo); k != nil && k[0] == eventPrefix; {
		if len(k) != eventKeyLen {
			return s.corrupt("events", k, errors.Newf("an event key of %d bytes", len(k)))
		}
		if v == nil {
			return s.corrupt("events", k, errors.New("a bucket where an event was expected"))
		}
		seq := binary.BigEndian.Uint64(k[1:])
		if seq > to {
			return nil
		}
		p, err := unseal(identity(s.crc, codeEvent, k), v)
		if err != nil {
			return s.corrupt("events", k, err)
		}
		inFn = true
		more, err := fn(seq, p)
		inFn = false
		if err != nil || !more || seq == to {
			return err
		}
		if a != nil {
			if err := a.before(k); err != nil {
				return s.corrupt("events", k, errors.Wrap(err, "damaged page graph"))
			}
		}
		k, v = c.Next()
	}
	return nil
}

// table returns table tb, once the path to its bucket is walked.
func (s *session) table(tb backend.Table) (*table, error) {
	if tb == 0 || tb >= backend.Tables {
		return nil, errors.Newf("boltfile: no table %d", tb)
	}
	if x := s.tables[tb]; x != nil {
		return x, nil
	}
	key := tableKey(tb)
	where, found, err := s.t.locate(s.at, key)
	if err != nil {
		return nil, s.corrupt(tb.String(), nil, err)
	}
	b := s.b.Bucket(key)
	switch {
	case s.at.fresh:
		if b == nil {
			return nil, s.corrupt(tb.String(), nil, errors.New("bucket missing"))
		}
	case !found && b == nil:
		return nil, s.corrupt(tb.String(), nil, errors.New("bucket missing"))
	case !found || b == nil:
		return nil, s.corrupt(tb.String(), nil, errors.Newf("bbolt and its pages disagree on the table's bucket (pages: %v, bbolt: %v)", found, b != nil))
	case uint64(b.Root()) != where.root:
		return nil, s.corrupt(tb.String(), nil, errors.Newf("bbolt finds the table's bucket at page %d, its pages at %d", b.Root(), where.root))
	}
	x := &table{t: tb, b: b, at: where, name: tb.String()}
	s.tables[tb] = x
	return x, nil
}

// wasDeleted reports whether this transaction deleted from table x.
func (s *session) wasDeleted(x *table) bool {
	return s.t.deleted[tableRef{s.id, x.t}]
}

// Get implements backend.Session.
func (s *session) Get(tb backend.Table, key []byte) (v []byte, err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, tb.String())
	x, err := s.table(tb)
	if err != nil {
		return nil, err
	}
	if err := s.t.point(x.at, key, false); err != nil {
		return nil, s.corrupt(x.name, key, err)
	}
	raw := x.b.Get(key)
	if raw == nil {
		return nil, nil
	}
	v, err = unseal(identity(s.crc, byte(tb), key), raw)
	if err != nil {
		return nil, s.corrupt(x.name, key, err)
	}
	return v, nil
}

// Put implements backend.Session.
func (s *session) Put(tb backend.Table, key, v []byte) (err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, tb.String())
	if err := s.writable(); err != nil {
		return err
	}
	x, err := s.table(tb)
	if err != nil {
		return err
	}
	if err := s.t.point(x.at, key, false); err != nil {
		return s.corrupt(x.name, key, err)
	}
	return errors.Wrapf(x.b.Put(key, seal(identity(s.crc, byte(tb), key), v)), "boltfile: session %q: %s key %s", s.id, x.name, backend.ShowKey(key))
}

// Delete implements backend.Session.
func (s *session) Delete(tb backend.Table, key []byte) (err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, tb.String())
	if err := s.writable(); err != nil {
		return err
	}
	x, err := s.table(tb)
	if err != nil {
		return err
	}
	if err := s.t.point(x.at, key, true); err != nil {
		return s.corrupt(x.name, key, err)
	}
	if err := x.b.Delete(key); err != nil {
		return errors.Wrapf(err, "boltfile: session %q: %s key %s", s.id, x.name, backend.ShowKey(key))
	}
	if s.t.deleted == nil {
		s.t.deleted = map[tableRef]bool{}
	}
	s.t.deleted[tableRef{s.id, x.t}] = true
	return nil
}

// record returns the payload of the record at k of table x, as a cursor
// found it.
func (s *session) record(x *table, k, v []byte) ([]byte, error) {
	if v == nil {
		return nil, s.corrupt(x.name, k, errors.New("a bucket where a record was expected"))
	}
	p, err := unseal(identity(s.crc, byte(x.t), k), v)
	if err != nil {
		return nil, s.corrupt(x.name, k, err)
	}
	return p, nil
}

// Scan implements backend.Session. fn must not write to table tb.
func (s *session) Scan(tb backend.Table, from []byte, fn func(k, v []byte) (bool, error)) (err error) {
	inFn := false
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, &inFn, s.id, tb.String())
	x, err := s.table(tb)
	if err != nil {
		return err
	}
	var a *ahead // nil: nothing (more) to walk
	whole := func() error {
		a = nil
		if x.at.fresh {
			return nil
		}
		if err := new(shadow).init(&s.t.w, x.at).all(); err != nil {
			return s.corrupt(x.name, nil, errors.Wrap(err, "damaged page graph"))
		}
		return nil
	}
	switch {
	case x.at.fresh:
	case s.wasDeleted(x):
		if err := whole(); err != nil {
			return err
		}
	default:
		a = new(ahead)
		a.s.init(&s.t.w, x.at)
		if err := a.start(from); err != nil {
			return s.corrupt(x.name, from, errors.Wrap(err, "damaged page graph"))
		}
	}
	c := x.b.Cursor()
	var k, v []byte
	if from == nil {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for k != nil {
		p, err := s.record(x, k, v)
		if err != nil {
			return err
		}
		inFn = true
		more, err := fn(k[:len(k):len(k)], p)
		inFn = false
		if err != nil || !more {
			return err
		}
		if a != nil {
			if s.wasDeleted(x) {
				if err := whole(); err != nil {
					return err
				}
			} else if err := a.before(k); err != nil {
				return s.corrupt(x.name, k, errors.Wrap(err, "damaged page graph"))
			}
		}
		k, v = c.Next()
	}
	return nil
}

// Last implements backend.Session.
func (s *session) Last(tb backend.Table, below []byte) (k, v []byte, err error) {
	defer s.t.unguard(debug.SetPanicOnFault(true), &err, nil, s.id, tb.String())
	x, err := s.table(tb)
	if err != nil {
		return nil, nil, err
	}
	if !x.at.fresh {
		if err := s.walkLast(x, below); err != nil {
			return nil, nil, s.corrupt(x.name, below, errors.Wrap(err, "damaged page graph"))
		}
	}
	c := x.b.Cursor()
	if below == nil {
		k, v = c.Last()
	} else if k, v = c.Seek(below); k == nil {
		if !x.at.fresh && !s.wasDeleted(x) {
			// Every key is below: the last of all.
			if err := new(shadow).init(&s.t.w, x.at).last(); err != nil {
				return nil, nil, s.corrupt(x.name, nil, errors.Wrap(err, "damaged page graph"))
			}
		}
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil {
		return nil, nil, nil
	}
	p, err := s.record(x, k, v)
	if err != nil {
		return nil, nil, err
	}
	return k[:len(k):len(k)], p, nil
}

// walkLast walks what Last(below) reads: the rightmost path, or the path
// to below and the leaves on either side (bbolt's Seek may go to the next,
// its Prev to the previous). A table this transaction deleted from is
// walked whole.
func (s *session) walkLast(x *table, below []byte) error {
	var fwd, back shadow
	sh := fwd.init(&s.t.w, x.at)
	switch {
	case s.wasDeleted(x):
		return sh.all()
	case below == nil:
		return sh.last()
	}
	if err := sh.seek(below); err != nil {
		return err
	}
	sh.cloneTo(&back)
	if _, err := sh.next(); err != nil {
		return err
	}
	_, err := back.prev()
	return err
}

var _ backend.SessionDeleter = (*tx)(nil)

// DeleteSession implements backend.SessionDeleter: the session's bucket,
// with its nested tables, goes in one bbolt delete; its pages go to the
// freelist (strata vacuum gives them back to the file system).
func (t *tx) DeleteSession(id string) (err error) {
	defer t.unguard(debug.SetPanicOnFault(true), &err, nil, id, "bucket")
	if err := checkID(id); err != nil {
		return err
	}
	if !t.btx.Writable() {
		return errors.Wrap(backend.ErrReadOnly, "boltfile: DeleteSession in a read transaction")
	}
	s, err := t.Session(id) // walks the path to the bucket first
	if err != nil || s == nil {
		return err
	}
	delete(t.created, id)
	return errors.Wrapf(t.btx.DeleteBucket(sessionKey(id)), "boltfile: delete session %q", id)
}
