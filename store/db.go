package store

import (
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/tier"
)

// DB is a strata database: every session's raw log, summary nodes,
// markers, checkpoints and ledger, kept in one backend (a bbolt file, by
// Open). A DB is safe for use by many goroutines; appends from them are
// group-committed.
type DB struct {
	path string
	opts Options
	be   backend.Backend

	closeOnce sync.Once
	writes    chan *writeReq // nil when read-only
	commitMu  sync.Mutex     // held while writes commit (the committer, or submit itself)
	appending atomic.Int32   // Append calls submitted and not yet committed
	queued    atomic.Int32   // writes handed to the committer and not yet committed
	queuedApp atomic.Int32   // of those, the appends (not compactions' commits)
	// For Options.CommitWait: when an append last committed (Unix ns), and
	// whether the last commit that waited for company got it.
	lastAppend atomic.Int64
	lingerPays atomic.Bool
	// For Options.GroupWait: how long the last commit took (ns), and how
	// many appenders were active then (gather).
	lastCommit atomic.Int64
	active     atomic.Int32
	nudge      chan struct{} // NoCommitWait: a waiting commit goes at once
	noWait     atomic.Int32  // NoCommitWait calls not yet restored
	stopped    chan struct{}
	mu         sync.RWMutex // held for reading by operations, for writing by Close
	closed     bool
}

// MaxSessionBytes bounds a session id.
const MaxSessionBytes = 256

// New returns a DB over backend be, which it owns from then on (Close
// closes it). opts.ReadOnly says whether writes are refused; the options of
// the bytes themselves (a file's lock, sync) are the backend's. Open is New
// over the backend a path or URL names.
//
// A backend with a limit on its keys (backend.KeyLimiter, as PostgreSQL's
// is) bounds the ids and keys of events: MaxIDBytes defaults
// to that limit when it is lower than tier.DefaultMaxIDBytes, and a larger
// MaxIDBytes is refused (ErrBadOptions).
func New(be backend.Backend, opts Options) (*DB, error) {
	if k, ok := be.(backend.KeyLimiter); ok {
		limit := k.MaxKeyBytes()
		if opts.MaxIDBytes == 0 && tier.DefaultMaxIDBytes > limit {
			opts.MaxIDBytes = limit
		}
		if opts.MaxIDBytes > limit {
			return nil, errors.Wrapf(ErrBadOptions, "MaxIDBytes %d is over the backend's key limit %d", opts.MaxIDBytes, limit)
		}
	}
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	db := &DB{opts: opts, be: be}
	if p, ok := be.(backend.Pather); ok {
		db.path = p.Path()
	}
	if !opts.ReadOnly {
		db.writes = make(chan *writeReq, opts.MaxBatch)
		db.nudge = make(chan struct{}, 1)
		db.stopped = make(chan struct{})
		go db.committer()
	}
	return db, nil
}

// Path returns the database's path: its file, or "" for a backend without
// one.
func (db *DB) Path() string { return db.path }

// Created reports whether Open made the database (Options.Create, where
// there was none): the file, or strata's tables in a PostgreSQL schema. It
// is false for a backend that does not tell (backend.Dropper).
func (db *DB) Created() bool {
	d, ok := db.be.(backend.Dropper)
	return ok && d.Created()
}

// DropEmpty removes what Open made of the database — the file, the tables
// — when Open made it and it holds no session, and reports whether it did:
// a command that made a database and failed before storing anything leaves
// nothing behind, and never removes what was there or what holds a
// session. Only Close may follow it.
func (db *DB) DropEmpty() (bool, error) {
	d, ok := db.be.(backend.Dropper)
	if !ok || !d.Created() {
		return false, nil
	}
	return d.DropEmpty()
}

// Close waits for appends in flight, then closes the backend. It is safe
// to call more than once.
func (db *DB) Close() error {
	var err error
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		if db.writes != nil {
			close(db.writes)
			<-db.stopped
		}
		err = db.be.Close()
	})
	return err
}

// acquire marks an operation in flight; it fails once Close has begun.
func (db *DB) acquire() error {
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (db *DB) release() { db.mu.RUnlock() }

// view runs fn in a read transaction.
func (db *DB) view(fn func(backend.Tx) error) error { return db.be.View(fn) }

// update runs fn in a write transaction.
func (db *DB) update(fn func(backend.Tx) error) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	return db.be.Update(func(tx backend.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return hook("commit")
	})
}

// CheckSession returns ErrBadSession (wrapped with the reason) unless id is
// a usable session id: 1 to MaxSessionBytes bytes of UTF-8 without control
// characters.
func CheckSession(id string) error {
	switch {
	case id == "":
		return errors.Wrap(ErrBadSession, "empty")
	case len(id) > MaxSessionBytes:
		return errors.Wrapf(ErrBadSession, "%d bytes, limit %d", len(id), MaxSessionBytes)
	case !utf8.ValidString(id):
		return errors.Wrap(ErrBadSession, "not valid UTF-8")
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errors.Wrapf(ErrBadSession, "control character at byte %d", i)
		}
	}
	return nil
}

// corrupt returns a *CorruptError for damage at key of bucket (a table, or
// "l0", "state") in session.
func corrupt(session, bucket string, key []byte, err error) error {
	return backend.Corrupt(session, bucket, key, err)
}

// damaged returns err, or when err says a record is missing (ErrNotFound)
// that another record names, damage at the naming record: what is missing
// was committed with it. The damage is not also ErrNotFound (Handled): a
// caller that tells a record it asked for from damage must see damage.
func damaged(err error, session, bucket string, key []byte, what string) error {
	if errors.Is(err, ErrNotFound) {
		return corrupt(session, bucket, key, errors.Wrapf(errors.Handled(err), "%s is missing", what))
	}
	return err
}

func u64val(k []byte) uint64 {
	v, _ := parseU64(k)
	return v
}
