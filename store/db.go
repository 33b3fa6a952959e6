package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/strata-go/strata/internal/errmark"
)

// DB is a strata database: one bbolt file holding every session's raw log,
// summary nodes, markers, checkpoints and ledger. A DB is safe for use by
// many goroutines; appends from them are group-committed.
type DB struct {
	path string
	opts Options
	bolt *bolt.DB

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
	poisoned   atomic.Pointer[error] // the commit error that poisoned the DB
	format     int                   // the database's format version (schema.go), set by init
	graph      graphChecks           // the sessions whose page graph this handle checked (graph.go)
}

// MaxSessionBytes bounds a session id.
const MaxSessionBytes = 256

// Open opens the strata database at path. Unless opts.Create is set, the
// file must exist; a zero-length file is refused (ErrEmptyFile); a file that
// another process holds is refused after opts.LockTimeout (ErrLocked); a
// database of a newer format is refused (ErrFormatTooNew).
//
// A write whose commit fails at the disk's fsync (or with EIO) poisons the
// returned DB: that write's error is marked ErrPoisoned, every later write
// returns ErrPoisoned, and reads go on. Close it and Open again to write.
func Open(path string, opts Options) (db *DB, err error) {
	opts = opts.withDefaults()
	if opts.Create && opts.ReadOnly {
		return nil, errors.Wrap(ErrBadOptions, "Create and ReadOnly together")
	}
	// An id or key is a bbolt key, an event one record: a limit past what
	// bbolt or the codec can store would fail whole group commits later.
	if opts.MaxIDBytes > MaxIDBytesLimit {
		return nil, errors.Wrapf(ErrBadOptions, "MaxIDBytes %d is over the limit %d (bbolt's key limit less a 6-byte prefix)", opts.MaxIDBytes, MaxIDBytesLimit)
	}
	if opts.Format < 0 || opts.Format > FormatVersion {
		return nil, errors.Wrapf(ErrBadOptions, "Format %d: this strata makes formats 1 to %d", opts.Format, FormatVersion)
	}
	if opts.MaxEventBytes > MaxEventBytesLimit {
		return nil, errors.Wrapf(ErrBadOptions, "MaxEventBytes %d is over %d", opts.MaxEventBytes, MaxEventBytesLimit)
	}
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && fi.IsDir():
		return nil, errors.Wrapf(ErrNotStrata, "%s is a directory", path)
	case statErr == nil && fi.Size() == 0:
		return nil, errors.WithHint(errors.Wrapf(ErrEmptyFile, "%s", path),
			"a zero-length file is not a database; remove it to start a new one, or restore a backup")
	case errors.Is(statErr, os.ErrNotExist) && !opts.Create:
		return nil, errors.WithHint(errors.Wrapf(ErrNotExist, "%s", path),
			"create it with Options.Create (the CLI's replay creates it)")
	case statErr != nil && !errors.Is(statErr, os.ErrNotExist):
		return nil, errors.Wrapf(statErr, "store: open %s", path)
	}
	fresh := statErr != nil

	defer func() {
		if r := recover(); r != nil {
			db, err = nil, errors.Wrapf(ErrCorrupt, "%s: bbolt panicked while opening: %v", path, r)
		}
	}()
	restore := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(restore)

	b, err := bolt.Open(path, opts.Mode, &bolt.Options{
		Timeout:  opts.LockTimeout,
		ReadOnly: opts.ReadOnly,
		NoSync:   opts.NoSync,
		// Growing the file fsyncs too; with NoSync nothing is durable anyway.
		NoGrowSync: opts.NoSync,
		// bbolt's array freelist, not the hashmap: strata never deletes,
		// so the freelist holds tens of pages (38 in a 78 MB history),
		// where the array's bookkeeping is cheapest. The hashmap's cost
		// about 7 µs per commit: a single writer's durable appends ran at
		// 0.94 of bare bbolt's with it, 0.99 without. Both write the same
		// freelist page: files are the same either way.
		FreelistType: bolt.FreelistArrayType,
		// Read-only too: bbolt would load it lazily, in tx.Check's own
		// goroutine, where a damaged freelist page panics past guard.
		PreLoadFreelist: true,
	})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, errors.WithHint(errors.Wrapf(ErrLocked, "%s (waited %s)", path, opts.LockTimeout),
				"another process has it open for writing; stop it, or read a backup taken through its API")
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
			return nil, errors.Wrapf(ErrNotStrata, "%s: %v", path, err)
		case errors.Is(err, berrors.ErrChecksum):
			return nil, errors.Wrapf(ErrCorrupt, "%s: %v", path, err)
		case strings.Contains(err.Error(), "file size too small"):
			// bbolt read a page size (from a meta page, or the OS's when
			// neither meta page is valid) and the file is shorter than
			// two pages: a truncated database, or not one at all.
			if looksLikeBolt(path) {
				return nil, errors.Wrapf(ErrCorrupt, "%s: truncated: %v", path, err)
			}
			return nil, errors.Wrapf(ErrNotStrata, "%s: %v", path, err)
		}
		return nil, errors.Wrapf(err, "store: open %s", path)
	}
	db = &DB{path: path, opts: opts, bolt: b}
	if err := db.init(fresh); err != nil {
		return nil, errors.CombineErrors(err, b.Close())
	}
	if !opts.ReadOnly {
		db.writes = make(chan *writeReq, opts.MaxBatch)
		db.nudge = make(chan struct{}, 1)
		db.stopped = make(chan struct{})
		go db.committer()
	}
	return db, nil
}

// looksLikeBolt reports whether the file at path starts with a bbolt meta
// page: the page header (16 bytes) then the magic number, little-endian.
func looksLikeBolt(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [20]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(b[16:]) == boltMagic
}

// boltMagic is bbolt's meta page magic number.
const boltMagic = 0xED0CDAED

func (db *DB) init(fresh bool) error {
	if fresh {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			m, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			format := DefaultFormat
			if db.opts.Format != 0 {
				format = db.opts.Format
			}
			v, err := encode(recMeta, &metaRec{V: recordVersion, Format: format, CreatedBy: "strata", Created: db.opts.Clock().UnixNano()})
			if err != nil {
				return err
			}
			if err := m.Put(keyFormat, v); err != nil {
				return err
			}
			switch format {
			case 1:
				_, err = tx.CreateBucket(bucketSessions)
			case 3, 4, 5:
				if _, err = tx.CreateBucket(bucketEvents3); err == nil {
					err = m.Put(keyNextSess3, encodeNext(format, 0))
				}
				if err == nil && format >= 4 {
					if _, err = tx.CreateBucket(bucketHot4); err == nil {
						_, err = tx.CreateBucket(bucketJournal4)
					}
				}
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return db.view(func(tx *bolt.Tx) error {
		if err := checkTop(tx); err != nil {
			return errors.Wrapf(err, "%s", db.path)
		}
		m := tx.Bucket(bucketMeta)
		if m == nil || m.Get(keyFormat) == nil {
			return errors.Wrapf(ErrNotStrata, "%s: a bbolt file without strata's format record", db.path)
		}
		var rec metaRec
		if err := decode(recMeta, m.Get(keyFormat), &rec); err != nil {
			return &CorruptError{Bucket: "meta", Key: "format", Err: err}
		}
		if rec.Format > FormatVersion {
			return errors.WithHintf(errors.Wrapf(ErrFormatTooNew, "%s has format %d, this strata knows %d", db.path, rec.Format, FormatVersion),
				"use a newer strata")
		}
		if rec.Format < 1 {
			return &CorruptError{Bucket: "meta", Key: "format", Err: fmt.Errorf("format version %d", rec.Format)}
		}
		if rec.Format == 1 && tx.Bucket(bucketSessions) == nil {
			return errors.Wrapf(ErrNotStrata, "%s: a format 1 file without its sessions bucket", db.path)
		}
		if rec.Format >= 3 && tx.Bucket(bucketEvents3) == nil {
			return errors.Wrapf(ErrNotStrata, "%s: a format %d file without its events bucket", db.path, rec.Format)
		}
		if rec.Format >= 4 && (tx.Bucket(bucketHot4) == nil || tx.Bucket(bucketJournal4) == nil) {
			return errors.Wrapf(ErrNotStrata, "%s: a format %d file without its hot bucket or journal", db.path, rec.Format)
		}
		db.format = rec.Format
		return nil
	})
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Close waits for appends in flight, then closes the file. It is safe to
// call more than once.
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
		err = db.bolt.Close()
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

// view runs fn in a read transaction, turning a panic or fault inside bbolt
// (a damaged file) into ErrCorrupt.
func (db *DB) view(fn func(*bolt.Tx) error) error {
	return guard(func() error { return db.bolt.View(fn) })
}

// update runs fn in a write transaction, guarded like view. A commit that
// fails at the disk's sync poisons the DB: that error is marked ErrPoisoned,
// and every later update returns ErrPoisoned without writing.
func (db *DB) update(fn func(*bolt.Tx) error) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	committing := false
	err := guard(func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			// Checked under bbolt's writer lock: no write begins on the
			// state a failed sync left.
			if p := db.poisoned.Load(); p != nil {
				return errors.WithHint(errors.Wrapf(ErrPoisoned, "%s: %v", db.path, *p),
					"close the database and reopen it; the failed write may or may not be stored")
			}
			if err := fn(tx); err != nil {
				return err
			}
			if err := hook("commit"); err != nil {
				return err
			}
			committing = true
			return nil
		})
	})
	if err != nil && committing && syncFailed(err) {
		db.poisoned.CompareAndSwap(nil, &err)
		return errmark.Mark(errors.Wrap(err, "store: commit failed at the disk"), ErrPoisoned)
	}
	return err
}

// syncFailed reports whether err, returned by bbolt's commit, may come
// from an fsync or is an I/O error: then the commit's outcome is unknown.
// bbolt returns fdatasync's error as it is (a bare syscall.Errno on Linux,
// an *fs.PathError "sync" elsewhere) and the fsync of a file it grows as a
// "file sync error" string; a write or a truncate fails with an
// *fs.PathError before the meta page is written, so a full disk (ENOSPC
// there) leaves the DB usable once space is freed.
func syncFailed(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op == "sync" || errors.Is(pe.Err, syscall.EIO)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return true
	}
	return strings.Contains(err.Error(), "file sync error")
}

// guard runs fn, turning a panic — or, with SetPanicOnFault, a memory fault
// in bbolt's mmap of a damaged file — into an error instead of taking the
// host process down.
func guard(fn func() error) (err error) {
	restore := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(restore)
	defer func() {
		if r := recover(); r != nil {
			err = errors.Wrapf(ErrCorrupt, "bbolt panicked: %v", r)
		}
	}()
	return fn()
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

// maxKeyShown is how many bytes of a key a CorruptError shows.
const maxKeyShown = 256

func corrupt(session, bucket string, key []byte, err error) error {
	k := ""
	switch {
	case len(key) == 0:
	case len(key) == 8:
		k = fmt.Sprint(u64val(key))
	case len(key) > maxKeyShown:
		// A damaged element can claim a key of gigabytes: only its
		// start is read, and shown.
		k = fmt.Sprintf("%q… (%d bytes)", key[:maxKeyShown], len(key))
	default:
		k = fmt.Sprintf("%q", key)
	}
	return &CorruptError{Session: session, Bucket: bucket, Key: k, Err: err}
}

func u64val(k []byte) uint64 {
	v, _ := parseU64(k)
	return v
}
