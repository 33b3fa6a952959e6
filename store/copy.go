package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// A copy's destination transactions are bounded: each carries at most
// copyBatchValues values (events, records, deletes of a stale record) or
// about copyBatchBytes of them, so a session of any length is copied in
// transactions of the same size. (A variable: tests copy in smaller
// batches.)
var copyBatchValues = 1024

const copyBatchBytes = 4 << 20

// CopyOptions tunes Snapshot.Copy and Snapshot.CopyFile.
type CopyOptions struct {
	// Sessions are the ids of the sessions to copy; none means every
	// session of the snapshot. An id the snapshot does not hold is
	// ErrSessionNotFound; one given twice is copied once. The ancestors
	// of a fork among them — its parent, the parent's parent, ... — whose
	// raw logs it reads are copied with it (CopyResult.Ancestors).
	Sessions []string
	// Progress, when set, is called after each destination transaction
	// with the events written so far, of every session, and the events
	// the copy writes in all.
	Progress func(done, total uint64)
	// SkipDamaged reads each session of the snapshot whole before anything
	// is written, and leaves out those in which it meets damage
	// (ErrCorrupt), listing them in CopyResult.Damaged; the others are
	// copied. Without it, damage stops the copy.
	SkipDamaged bool
}

// DamagedSession is a session a copy with CopyOptions.SkipDamaged left
// out: Err is the damage met reading it (errors.Is ErrCorrupt).
type DamagedSession struct {
	ID  string
	Err error
}

// CopyResult is what a copy wrote.
type CopyResult struct {
	// Sessions are the ids copied, in byte order.
	Sessions []string
	// Completed are those of Sessions that the destination held as an
	// unfinished copy, which the copy completed.
	Completed []string
	// Present are the ids the destination held already with every value
	// the source's — a copy made before — left as they were.
	Present []string
	// Ancestors are the ids CopyOptions.Sessions did not name that the
	// copy took because a fork it named reads their raw logs, in byte
	// order: each is in Sessions or Present too.
	Ancestors []string
	// Events is how many events the copy wrote, and Bytes how many bytes
	// of values (events, records, states).
	Events uint64
	Bytes  int64
	// Unfinished, when the copy stopped, is the id of the session it was
	// writing, which the destination holds without its state; "" when it
	// holds none such.
	Unfinished string
	// Damaged are the sessions left out for damage, in byte order
	// (CopyOptions.SkipDamaged).
	Damaged []DamagedSession
}

// Copy copies sessions of the snapshot (opts.Sessions, or all) into dst,
// byte for byte at the backend's level — the state, every event, every
// record of every table — so that dst serves each the same: the same
// resumed bytes, the same dump. The source is this one snapshot; the
// destination is written in transactions of bounded size (copyBatchValues),
// a session's events first, then its records, then its state, last.
//
// Before it writes anything, Copy reads what dst holds of the ids to copy:
// a session there is a *SessionExistsError (errors.Is ErrSessionExists)
// naming every such id, and nothing is written — unless it is the source's
// session byte for byte, or an unfinished copy of it. One the same in
// every value (a copy made before) is left as it is (CopyResult.Present).
// A session of dst whose state is not the source's is another from its
// state alone: nothing more of it is read. Of the others, dst's events and
// records are compared with the source's (by hash), the events first.
// An unfinished copy — a session without its state record, whose events
// are the first events of the session copied, byte for byte, and no
// others — is completed: a copy stopped midway (ctx ended, an error, a kill) leaves the
// session it was writing so, which every read of dst reports as damage (the
// state missing). So the same copy run again, from a source that has not
// changed since, completes what it stopped in and copies what it had not
// reached. Every other session is in dst whole, or not at all.
//
// After the last transaction of each session, Copy reads it back from dst:
// its state and its last event must be the bytes copied.
//
// An error of dst's — reading or writing it, damage in it — is marked
// ErrDestination; one of the snapshot's is not.
func (s *Snapshot) Copy(ctx context.Context, dst *DB, opts CopyOptions) (CopyResult, error) {
	if err := dst.acquire(); err != nil {
		return CopyResult{}, err
	}
	defer dst.release()
	if dst.opts.ReadOnly {
		return CopyResult{}, errors.Wrap(ErrReadOnly, "store: copy")
	}
	return s.copyTo(ctx, dst.be, opts)
}

// CopyFile copies sessions of the snapshot (opts.Sessions, or all), as
// Copy does, into a new database file at path, built beside it by the file
// backend (backend.Builder: boltfile.Build): written without an fsync until it is whole, fsynced,
// and given the name path only then — renamed over a file there when
// replace is true, else linked to path, which must not exist. A failure,
// an ended ctx, damage in the source, leaves path as it was and no
// temporary file. A path that is the database's own file is refused, as
// BackupFile refuses it. Of a database that is not a bbolt file, it is the
// backup (BackupFile).
func (s *Snapshot) CopyFile(ctx context.Context, path string, replace bool, opts CopyOptions) (res CopyResult, err error) {
	if err := s.db.refuseItself("copy", path); err != nil {
		return CopyResult{}, err
	}
	b, err := fileDriver[backend.Builder]("copy to", path)
	if err != nil {
		return CopyResult{}, err
	}
	err = b.Build(path, replace, func(be backend.Backend) error {
		res, err = s.copyTo(ctx, be, opts)
		return err
	})
	if err != nil {
		return CopyResult{}, err // no file holds any of it
	}
	return res, nil
}

// copyPlan is one session to copy: its source, its state, and what the
// destination holds of it.
type copyPlan struct {
	src   *sess
	state []byte // the source's state record, as stored
	head  uint64
	// own is the first seq the session's own events start at: 1, or a
	// fork's fork point + 1 (its events up to it are its parent's).
	own uint64
	// The destination holds the same session: nothing to copy.
	present bool
	// An unfinished copy in the destination: the events it holds (the
	// copy goes on after them), and its records, which go.
	resume bool
	have   uint64
	stale  []tableKey
}

type tableKey struct {
	t backend.Table
	k []byte
}

// copyTo is Copy into the backend dst.
func (s *Snapshot) copyTo(ctx context.Context, dst backend.Backend, opts CopyOptions) (CopyResult, error) {
	ids, ancestors, err := s.withAncestors(opts.Sessions)
	if err != nil {
		return CopyResult{}, err
	}
	plans, damaged, err := s.copyPlans(ids, opts.SkipDamaged)
	if err != nil {
		return CopyResult{}, err
	}
	if err := readDestination(dst, plans); err != nil {
		return CopyResult{}, err
	}
	c := &copier{ctx: ctx, dst: dst, progress: opts.Progress, res: CopyResult{Damaged: damaged, Ancestors: ancestors}}
	for _, p := range plans {
		if !p.present {
			c.total += p.head - p.have
		}
	}
	for _, p := range plans {
		if p.present {
			c.res.Present = append(c.res.Present, p.src.id)
			continue
		}
		if err := c.session(p); err != nil {
			if c.created && !c.finished {
				c.res.Unfinished = p.src.id
			}
			return c.res, err
		}
		c.res.Sessions = append(c.res.Sessions, p.src.id)
		if p.resume {
			c.res.Completed = append(c.res.Completed, p.src.id)
		}
	}
	return c.res, nil
}

// withAncestors returns ids with the ancestors of the forks among them
// (the sessions whose raw logs they read), and those it added, each in
// byte order; none stays none (every session).
func (s *Snapshot) withAncestors(ids []string) (all, added []string, err error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	named := map[string]bool{}
	for _, id := range ids {
		named[id] = true
	}
	seen := map[string]bool{}
	for _, id := range ids {
		for p := id; p != "" && !seen[p]; {
			seen[p] = true
			if !named[p] {
				added = append(added, p)
			}
			f, err := s.Fork(p)
			if err != nil {
				return nil, nil, err
			}
			p = f.Parent
		}
	}
	all = append(slices.Clone(ids), added...)
	slices.Sort(added)
	return all, added, nil
}

// copyPlans returns the sessions to copy, in byte order, each with its
// state. With skipDamaged, each is read whole first, and one in which the
// read meets damage is left out, listed in damaged.
func (s *Snapshot) copyPlans(ids []string, skipDamaged bool) (plans []*copyPlan, damaged []DamagedSession, err error) {
	if len(ids) == 0 {
		var err error
		if ids, err = s.Sessions(); err != nil {
			return nil, nil, err
		}
	} else {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	plans = make([]*copyPlan, 0, len(ids))
	for _, id := range ids {
		p, err := s.copyPlan(id)
		if err == nil && skipDamaged {
			err = p.readWhole()
		}
		if skipDamaged && errors.Is(err, ErrCorrupt) {
			damaged = append(damaged, DamagedSession{ID: id, Err: err})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		plans = append(plans, p)
	}
	return plans, damaged, nil
}

// copyPlan returns the plan of session id: its state read.
func (s *Snapshot) copyPlan(id string) (*copyPlan, error) {
	ss, err := s.sess(id)
	if err != nil {
		return nil, err
	}
	raw, err := ss.b.State()
	if err != nil {
		return nil, err
	}
	st, err := ss.stateOf(raw)
	if err != nil {
		return nil, err
	}
	return &copyPlan{src: ss, state: raw[:len(raw):len(raw)], head: st.Head, own: st.ForkAt + 1}, nil
}

// readWhole reads every event and record of p's session, as the copy will,
// for the damage it meets.
func (p *copyPlan) readWhole() error {
	if err := p.src.rawEvents(1, p.head, func(uint64, []byte) error { return nil }); err != nil {
		return err
	}
	for t := backend.Table(1); t < backend.Tables; t++ {
		if err := p.src.scan(t, nil, func(_, _ []byte) (bool, error) { return true, nil }); err != nil {
			return err
		}
	}
	return nil
}

// readDestination reads, in one transaction of dst, what it holds of each
// session planned, then compares it with the source: nothing, the same
// session, an unfinished copy of it (which the copy completes), or another
// session — a *SessionExistsError naming every such one. The source is
// read outside dst's transaction, so that every error of that transaction
// is the destination's (ErrDestination).
func readDestination(dst backend.Backend, plans []*copyPlan) error {
	held := make([]*destSession, len(plans))
	err := dst.View(func(tx backend.Tx) error {
		for i, p := range plans {
			b, err := tx.Session(p.src.id)
			if err == nil && b != nil {
				held[i], err = readDestSession(b, p)
			}
			if err != nil {
				return errors.Wrapf(err, "store: copy: the destination's session %q", p.src.id)
			}
		}
		return nil
	})
	if err != nil {
		return errors.Mark(err, ErrDestination)
	}
	var exists []string
	for i, p := range plans {
		if held[i] == nil {
			continue
		}
		ok, err := p.against(held[i])
		if err != nil {
			return errors.Wrapf(err, "store: copy: session %q", p.src.id)
		}
		if !ok {
			exists = append(exists, p.src.id)
		}
	}
	if len(exists) > 0 {
		return &SessionExistsError{IDs: exists}
	}
	return nil
}

// destSession is what the destination holds of a session to copy.
type destSession struct {
	// What it holds is not the session copied, nor an unfinished copy of
	// it: a state other than the source's, an event past the source's
	// head or after a gap, or fewer events than the state's head. Nothing
	// else of it is read.
	other  bool
	state  []byte            // its state record, nil when it has none
	events uint64            // the last seq of those it holds from the session's own first (copyPlan.own), gapless
	sum    [sha256.Size]byte // a hash of those (hashEvents)
	// With a state: a hash of each table (hashTable). Without: the keys
	// of its records, which a completed copy deletes.
	tables [backend.Tables][sha256.Size]byte
	keys   []tableKey
}

// readDestSession reads b, the destination's session of p's id, as against
// compares it: the cheap things first — its state, then whether it holds
// an event past p's head — and its events and records only when those do
// not tell it from p's session already (d.other).
func readDestSession(b backend.Session, p *copyPlan) (*destSession, error) {
	st, err := b.State()
	if err != nil {
		return nil, err
	}
	d := &destSession{state: bytes.Clone(st), other: st != nil && !bytes.Equal(st, p.state)}
	if d.other {
		return d, nil
	}
	// An event past the head, or, of a fork, one up to its fork point
	// (those are its parent's), is another session's.
	for _, r := range [][2]uint64{{p.head + 1, math.MaxUint64}, {1, p.own - 1}} {
		if r[1] < r[0] || d.other {
			continue
		}
		err = b.Events(r[0], r[1], func(uint64, []byte) (bool, error) {
			d.other = true
			return false, nil
		})
		if err != nil {
			return nil, err
		}
	}
	if d.other {
		return d, nil
	}
	if d.events, d.sum, d.other, err = hashEvents(b, p.own, p.head); err != nil {
		return nil, err
	}
	if st != nil && d.events != p.head {
		d.other = true
	}
	if d.other {
		return d, nil
	}
	for t := backend.Table(1); t < backend.Tables; t++ {
		if st != nil {
			d.tables[t], err = hashTable(b, t)
		} else {
			err = b.Scan(t, nil, func(k, _ []byte) (bool, error) {
				d.keys = append(d.keys, tableKey{t: t, k: bytes.Clone(k)})
				return true, nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

// against reports whether d, the destination's session of p's id, may
// stay: when it is p's session byte for byte (p.present), or an unfinished
// copy of it — no state, and events that are p's first, byte for byte,
// and no other — in which case p goes on after its events, and its
// records go. A session without a state that holds an event past those
// (after a gap) is no unfinished copy: the copy writes no event over it,
// and deletes none. What readDestSession found other is compared no
// further; else the source is read as far as needed: its first events,
// then, for a session with the source's state, its records.
func (p *copyPlan) against(d *destSession) (bool, error) {
	if d.other {
		return false, nil
	}
	n, sum, _, err := hashEvents(p.src.b, p.own, d.events)
	if err != nil || n != d.events || sum != d.sum {
		return false, err
	}
	if d.state == nil {
		p.resume, p.have, p.stale = true, d.events, d.keys
		return true, nil
	}
	for t := backend.Table(1); t < backend.Tables; t++ {
		x, err := hashTable(p.src.b, t)
		if err != nil || x != d.tables[t] {
			return false, err
		}
	}
	p.present = true
	return true, nil
}

// hashTable returns a hash of the keys and values of table t of b.
func hashTable(b backend.Session, t backend.Table) (sum [sha256.Size]byte, err error) {
	h := sha256.New()
	err = b.Scan(t, nil, func(k, v []byte) (bool, error) {
		hashValue(h, uint64(len(k)), k)
		hashValue(h, 0, v)
		return true, nil
	})
	h.Sum(sum[:0])
	return sum, err
}

// hashEvents returns the last seq of the events b holds from seq from up
// to seq to, gapless (from-1 for none), and a hash of their seqs and
// bytes; more says that b holds an event up to to past them, after a gap.
func hashEvents(b backend.Session, from, to uint64) (n uint64, sum [sha256.Size]byte, more bool, err error) {
	h := sha256.New()
	n = from - 1
	err = b.Events(from, to, func(seq uint64, v []byte) (bool, error) {
		if seq != n+1 {
			more = true
			return false, nil
		}
		n = seq
		hashValue(h, seq, v)
		return true, nil
	})
	h.Sum(sum[:0])
	return n, sum, more, err
}

// hashValue adds to h n (a seq, a length) and v, framed.
func hashValue(h hash.Hash, n uint64, v []byte) {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], n)
	binary.BigEndian.PutUint64(b[8:], uint64(len(v)))
	h.Write(b[:])
	h.Write(v)
}

// copier writes sessions into the destination, in batches.
type copier struct {
	ctx      context.Context
	dst      backend.Backend
	progress func(done, total uint64)
	total    uint64
	res      CopyResult

	// The batch of the session being written.
	id       string
	created  bool // the session is in the destination
	finished bool // with its state
	dels     []tableKey
	events   []seqValue
	recs     []tableValue
	state    []byte
	n, size  int
}

type seqValue struct {
	seq uint64
	v   []byte
}

type tableValue struct {
	t    backend.Table
	k, v []byte
}

// session copies p: the stale records of an unfinished copy go, then the
// events it lacks, every record, and the state, in the last transaction;
// then it reads the session back.
func (c *copier) session(p *copyPlan) error {
	c.id, c.created, c.finished = p.src.id, p.resume, false
	for _, d := range p.stale {
		c.dels = append(c.dels, d)
		if err := c.added(len(d.k)); err != nil {
			return err
		}
	}
	// Values are the source's, valid while its snapshot is: capacity cut,
	// so that no backend writes into the bytes past them (package backend).
	// A fork's events up to its fork point are its parent's, copied with
	// the parent: the fork's own are those past it.
	if err := p.src.forkBase(); err != nil {
		return err
	}
	err := p.src.ownEvents(max(p.have, p.src.forkAt)+1, p.head, func(seq uint64, v []byte) error {
		c.events = append(c.events, seqValue{seq: seq, v: v[:len(v):len(v)]})
		return c.added(len(v))
	})
	if err != nil {
		return err
	}
	for t := backend.Table(1); t < backend.Tables; t++ {
		err := p.src.scan(t, nil, func(k, v []byte) (bool, error) {
			c.recs = append(c.recs, tableValue{t: t, k: k[:len(k):len(k)], v: v[:len(v):len(v)]})
			return true, c.added(len(k) + len(v))
		})
		if err != nil {
			return err
		}
	}
	c.state = p.state
	c.size += len(p.state)
	if err := c.flush(); err != nil {
		return err
	}
	return c.check(p)
}

// added counts a value put in the batch, and writes the batch when it is
// full.
func (c *copier) added(size int) error {
	c.n++
	c.size += size
	if c.n < copyBatchValues && c.size < copyBatchBytes {
		return nil
	}
	return c.flush()
}

// flush writes the batch in one transaction of the destination: the first
// of a session creates it.
func (c *copier) flush() error {
	if err := c.ctx.Err(); err != nil {
		return errors.Wrapf(err, "store: copy of session %q stopped", c.id)
	}
	err := c.dst.Update(func(tx backend.Tx) error {
		var b backend.Session
		var err error
		if c.created {
			if b, err = tx.Session(c.id); err == nil && b == nil {
				err = errors.Newf("store: copy: session %q left the destination while it was copied", c.id)
			}
		} else {
			b, err = tx.CreateSession(c.id)
		}
		if err != nil {
			return err
		}
		for _, d := range c.dels {
			if err := b.Delete(d.t, d.k); err != nil {
				return err
			}
		}
		for _, e := range c.events {
			if err := b.PutEvent(e.seq, e.v); err != nil {
				return err
			}
		}
		for _, r := range c.recs {
			if err := b.Put(r.t, r.k, r.v); err != nil {
				return err
			}
		}
		if c.state != nil {
			return b.PutState(c.state)
		}
		return nil
	})
	if err != nil {
		return errors.Mark(errors.Wrapf(err, "store: copy of session %q", c.id), ErrDestination)
	}
	c.created, c.finished = true, c.state != nil
	c.res.Events += uint64(len(c.events))
	c.res.Bytes += int64(c.size)
	if c.progress != nil {
		c.progress(c.res.Events, c.total)
	}
	c.dels, c.events, c.recs, c.state = c.dels[:0], c.events[:0], c.recs[:0], nil
	c.n, c.size = 0, 0
	return nil
}

// check reads session p back from the destination: its state and its
// last event must be the source's bytes, and nothing past its head.
func (c *copier) check(p *copyPlan) error {
	var last []byte
	if p.head > 0 {
		var err error
		if last, err = p.src.b.Event(p.head); err != nil {
			return err
		}
	}
	err := c.dst.View(func(tx backend.Tx) error {
		b, err := tx.Session(p.src.id)
		if err != nil {
			return err
		}
		if b == nil {
			return errors.AssertionFailedf("store: copy: session %q is not in the destination after its copy", p.src.id)
		}
		st, err := b.State()
		if err != nil {
			return err
		}
		var got, past []byte
		if p.head > 0 {
			if got, err = b.Event(p.head); err != nil {
				return err
			}
		}
		if past, err = b.Event(p.head + 1); err != nil {
			return err
		}
		if !bytes.Equal(st, p.state) || !bytes.Equal(got, last) || past != nil {
			return errors.AssertionFailedf("store: copy: session %q reads back from the destination other than it was copied", p.src.id)
		}
		return nil
	})
	return errors.Mark(err, ErrDestination)
}
