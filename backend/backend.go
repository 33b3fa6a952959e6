// Package backend is the seam between strata's store, which is the
// protocol (append with the ledger, plan, commit with validation,
// invalidation, refusal, resume, verify), and the bytes that hold it.
//
// A backend stores opaque values in typed places — a session's state, its
// events by seq, and its records by table and key — inside read and write
// transactions, and answers for their integrity: a value it returns is the
// value stored at that place, or it returns a *CorruptError naming the
// place. It knows nothing of events, nodes or markers; package store
// encodes and decodes them. Package boltfile is the backend of one bbolt
// file; package storetest states what every backend must do, through the
// store.
package backend

import "io"

// Table names a kind of record inside a session. Keys are the store's: a
// big-endian uint64 id or seq for the numbered tables, an id or key string
// for the ledger's and for Refs.
type Table uint8

// Tables.
const (
	// Open holds the calls and resources open at head, by call id.
	Open Table = iota + 1
	// Dispositions holds the ledger's dispositions, by item key.
	Dispositions
	// Constraints holds the ledger's active constraints, by key.
	Constraints
	// Artifacts holds the ledger's artifacts, by key.
	Artifacts
	// Nodes holds summary nodes, by id.
	Nodes
	// Roots holds the frame's current roots, by the first seq each covers.
	Roots
	// Markers holds recovery markers, by id (a marker's id is its node's).
	Markers
	// Checkpoints holds raw checkpoints, by id.
	Checkpoints
	// CheckpointIndex holds the usable checkpoints, by seq and id.
	CheckpointIndex
	// Audit holds the records of refused compactions, by id.
	Audit
	// Refs holds, by the ref of a source record (tier.Event.Ref), the seqs
	// of the events made from it.
	Refs

	// Tables is one past the last table.
	Tables
)

var tableNames = [...]string{Open: "open", Dispositions: "disp", Constraints: "constr", Artifacts: "art",
	Nodes: "nodes", Roots: "roots", Markers: "markers", Checkpoints: "ckpts", CheckpointIndex: "ckvalid", Audit: "audit",
	Refs: "refs"}

// String returns the table's name, as errors and dumps show it.
func (t Table) String() string {
	if t == 0 || t >= Tables {
		return "table?"
	}
	return tableNames[t]
}

// Backend is a store's bytes. A Backend is safe for concurrent use: many
// read transactions may run beside one write transaction.
type Backend interface {
	// View runs fn in a read transaction: everything fn reads is one
	// consistent state.
	View(fn func(Tx) error) error
	// Update runs fn in a write transaction and commits it when fn returns
	// nil: all of it is durable when Update returns nil (unless the backend
	// was opened without sync), none of it when fn returns an error. An
	// error of the commit itself is returned; one after which the
	// backend's state is not known is marked ErrPoisoned.
	//
	// A backend shared by processes may roll a transaction back for a
	// conflict with another process's and run fn again, in a new
	// transaction, before Update returns: fn must be re-runnable — what it
	// keeps outside the transaction must be reset by each run, which reads
	// everything it depends on inside its own transaction.
	Update(fn func(Tx) error) error
	// Close releases the backend. Transactions must have ended.
	Close() error
}

// Tx is a transaction. Values it returns are valid until the transaction
// ends and must not be modified; values passed to a write must not be
// modified until the transaction ends. A write may use the spare capacity
// of a value passed (v[len(v):cap(v)]), so that a backend's framing takes
// no copy: pass v[:len(v):len(v)] when those bytes hold something else.
type Tx interface {
	// Writable reports whether the transaction can write.
	Writable() bool
	// Sessions calls fn with every session's id, in byte order.
	Sessions(fn func(id string) error) error
	// Session returns session id, or nil and no error when there is none.
	Session(id string) (Session, error)
	// CreateSession makes session id, empty: no state, no records. It is an
	// error if it exists.
	CreateSession(id string) (Session, error)
}

// Session is one session's records inside a transaction.
type Session interface {
	// ID returns the session's id.
	ID() string
	// State returns the session's state record, or nil before the first
	// PutState.
	State() ([]byte, error)
	// PutState replaces the state record.
	PutState(v []byte) error

	// Event returns event seq's record, or nil when there is none.
	Event(seq uint64) ([]byte, error)
	// Events calls fn with the stored events from ≤ seq ≤ to, in seq order,
	// until fn returns false or an error. It reads nothing past to.
	Events(from, to uint64, fn func(seq uint64, v []byte) (bool, error)) error
	// PutEvent stores event seq. Events are appended in seq order; a store
	// never rewrites one.
	PutEvent(seq uint64, v []byte) error

	// Get returns the record at key of table t, or nil.
	Get(t Table, key []byte) ([]byte, error)
	// Put stores v at key of table t.
	Put(t Table, key, v []byte) error
	// Delete removes key from table t; a missing key is no error.
	Delete(t Table, key []byte) error
	// Scan calls fn with the records of table t whose key is ≥ from (nil:
	// all), in key order, until fn returns false or an error.
	Scan(t Table, from []byte, fn func(k, v []byte) (bool, error)) error
	// Last returns the record of table t with the greatest key below below
	// (nil: the greatest of all), or nil k when there is none.
	Last(t Table, below []byte) (k, v []byte, err error)
}

// Prefetcher is a Tx that reads ahead: Prefetch reads together — in one
// round trip to a server — the sessions and records that reads names, so
// that the calls that ask for them next (Session, Get, Scan, Last, Events)
// answer from memory, until the transaction writes what they read. It
// reads them as those calls would (in a write transaction, after taking
// each session's lock), and reports only what breaks the transaction: a
// read it does not make is made by the call that asks for it, and what a
// read found wrong (a damaged record, an id the backend refuses) is that
// call's error. A backend whose reads are local need not implement it;
// the store calls it where it knows what it is about to read.
type Prefetcher interface {
	Prefetch(reads []Read) error
}

// Read names what Prefetch reads in session Session: the session itself
// (its state), when it names nothing else; the record at Key of Table; the
// records Scan of Table from Key reads first (Scan); the record Last of
// Table below Key returns (Last); or the events Events from From to To
// reads first (To ≥ From ≥ 1).
type Read struct {
	Session    string
	Table      Table
	Key        []byte
	Scan, Last bool
	From, To   uint64
}

// Snapshotter is a read transaction that can copy the whole backend as one
// file: the bbolt file's backup. Size is the copy's length.
type Snapshotter interface {
	Size() int64
	WriteTo(w io.Writer) (int64, error)
}

// Checker is a backend that checks its own structure — what the store's
// logical checks cannot see, such as bbolt's page graph and freelist — for
// store.Verify. Check calls problem for each thing wrong; safe is false when
// the structure is too damaged for the logical checks to read it.
type Checker interface {
	Check(tx Tx, problem func(session, what string)) (safe bool, err error)
}

// SessionDeleter is a write transaction that removes a whole session:
// DeleteSession removes its state, its events and every record of every
// table, atomically with the rest of the transaction. A session that does
// not exist is no error. store.DB.Prune asks for it.
type SessionDeleter interface {
	DeleteSession(id string) error
}
