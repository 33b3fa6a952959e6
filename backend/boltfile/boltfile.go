package boltfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/errmark"
)

// FormatVersion is the layout this package writes, and MinFormatVersion
// the oldest it reads: the same, one format. The next change of layout
// raises both; a file of another version is refused at Open, naming both.
const (
	FormatVersion    = 7
	MinFormatVersion = 7
)

// Options tunes Open.
type Options struct {
	// Create makes the database when there is no file at the path. The
	// new file is built beside it and takes its place only once complete.
	Create bool
	// ReadOnly opens the file for reading only, beside other readers.
	ReadOnly bool
	// LockTimeout is how long Open waits for another process that holds
	// the file; 0 means 1 s. Open never waits forever.
	LockTimeout time.Duration
	// NoSync skips every fsync: nothing is durable across a power loss.
	// For tests and scratch databases.
	NoSync bool
	// Mode is a new file's permission bits; 0 means 0600.
	Mode os.FileMode
	// Clock gives the creation time written in a new file's meta record;
	// nil means time.Now.
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Backend is the backend of one bbolt file. It implements backend.Backend
// and backend.Checker, Pather, Versioner and FileSizer; its read
// transactions implement backend.Snapshotter and MappedReleaser.
type Backend struct {
	path    string
	opts    Options
	db      *bolt.DB
	created bool // Open made the file (Dropper)

	writeMu  sync.Mutex            // held by Update
	poisoned atomic.Pointer[error] // the commit error that poisoned the handle
	cache    atomic.Pointer[pageCache]

	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ backend.Checker   = (*Backend)(nil)
	_ backend.Pather    = (*Backend)(nil)
	_ backend.Versioner = (*Backend)(nil)
	_ backend.FileSizer = (*Backend)(nil)
	_ backend.Dropper   = (*Backend)(nil)
)
var _ backend.Checker = (*Backend)(nil)

// Open opens the database at path.
//
// Unless opts.Create is set the file must exist (backend.ErrNotExist); a
// zero-length file is refused (backend.ErrEmptyFile), and so is a file that
// is not bbolt's or has no strata meta record (backend.ErrNotStrata), a file
// of another format (backend.ErrFormatTooNew, backend.ErrFormatTooOld) and a
// damaged one (backend.ErrCorrupt). A file another process holds is refused
// after opts.LockTimeout (backend.ErrLocked). A panic or a memory fault inside bbolt is ErrCorrupt, never
// a crash.
func Open(path string, opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	if opts.Create && opts.ReadOnly {
		return nil, errors.Newf("boltfile: open %s: creating and read-only together", path)
	}
	for try := 1; ; try++ {
		b, err := openOrCreate(path, opts)
		if errors.Is(err, errReplaced) && try < maxOpenTries {
			continue // the file went while this Open waited for its lock: look again
		}
		return b, err
	}
}

// maxOpenTries bounds how often Open looks again at a path whose file was
// removed or replaced while it waited for the file's lock.
const maxOpenTries = 4

// errReplaced is the cause of an Open whose file was removed or replaced
// at its path while Open waited for its lock.
var errReplaced = errors.New("boltfile: the file was removed or replaced while waiting for its lock")

func openOrCreate(path string, opts Options) (*Backend, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, errors.Wrapf(backend.ErrNotStrata, "%s is a directory", path)
	case err == nil && fi.Size() == 0:
		return nil, emptyFile(path)
	case errors.Is(err, fs.ErrNotExist) && !opts.Create:
		return nil, notExist(path)
	case errors.Is(err, fs.ErrNotExist):
		made, err := create(path, opts)
		if err != nil {
			return nil, err
		}
		b, err := open(path, opts)
		if b != nil {
			b.created = made
		}
		return b, err
	case err != nil:
		return nil, errors.Wrapf(err, "boltfile: open %s", path)
	}
	return open(path, opts)
}

func emptyFile(path string) error {
	return errors.WithHint(errors.Wrapf(backend.ErrEmptyFile, "%s", path),
		"a zero-length file is not a database: remove it to start a new one, or restore a backup")
}

func notExist(path string) error {
	return errors.WithHint(errors.Wrapf(backend.ErrNotExist, "%s", path),
		"check the path; a new database is made by a command that creates one, such as strata replay")
}

// boltOptions are the bbolt options of a file opened with opts.
func boltOptions(opts Options) *bolt.Options {
	return &bolt.Options{
		Timeout:  opts.LockTimeout,
		ReadOnly: opts.ReadOnly,
		NoSync:   opts.NoSync,
		// Growing the file fsyncs too; with NoSync nothing is durable.
		NoGrowSync: opts.NoSync,
		// bbolt's array freelist: strata deletes little, and the freelist
		// stays tens of pages, where the array's bookkeeping is cheapest.
		FreelistType: bolt.FreelistArrayType,
		// Read-only too: bbolt would load it lazily, in tx.Check's own
		// goroutine, where a damaged freelist page panics past guard.
		PreLoadFreelist: true,
	}
}

// open opens the existing file at path.
func open(path string, opts Options) (b *Backend, err error) {
	bo := boltOptions(opts)
	// Never create: a file removed since Open's stat is not made anew,
	// empty, by bbolt; and a file emptied since is not initialized.
	var opened *os.File
	bo.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag&^os.O_CREATE, mode)
		if err != nil {
			return nil, err
		}
		if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
			f.Close()
			return nil, errEmptyOpened
		}
		opened = f
		return f, nil
	}
	var db *bolt.DB
	err = guard(func() error {
		var err error
		db, err = bolt.Open(path, opts.Mode, bo)
		return err
	})
	if err != nil {
		return nil, openError(path, opts, err)
	}
	// The lock is held now: the file locked must still be the one at path.
	// A command that made the file and failed removes it while it holds
	// the lock (so that a failed command leaves no empty database); an
	// Open that waited for that lock would write to a file no path names.
	if err := hook("open:locked"); err != nil {
		return nil, errors.CombineErrors(err, guard(db.Close))
	}
	if !samePath(opened, path) {
		return nil, errors.CombineErrors(errors.Wrapf(errReplaced, "%s", path), guard(db.Close))
	}
	b = &Backend{path: path, opts: opts, db: db}
	if err := b.init(); err != nil {
		return nil, errors.CombineErrors(err, guard(db.Close))
	}
	if !opts.ReadOnly {
		// What a creation or a write of path killed midway left beside it:
		// a second name of this file, a dead writer's temporary file.
		sweepTemps(path, time.Now())
	}
	return b, nil
}

var errEmptyOpened = errors.New("emptied since it was looked at")

// samePath reports whether f is the file at path.
func samePath(f *os.File, path string) bool {
	if f == nil {
		return false
	}
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// openError maps an error of bolt.Open.
func openError(path string, opts Options, err error) error {
	switch {
	case errors.Is(err, errEmptyOpened):
		return emptyFile(path)
	case errors.Is(err, fs.ErrNotExist):
		return notExist(path)
	case errors.Is(err, berrors.ErrTimeout):
		return errors.WithHint(errors.Wrapf(backend.ErrLocked, "%s (waited %s)", path, opts.LockTimeout),
			"another process has it open; stop it, or read a backup")
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		// Neither meta page is valid. One that still starts as bbolt's
		// makes the file a damaged bbolt file, not another program's.
		if metaMagic(path) {
			return errors.WithHint(errors.Wrapf(backend.Corrupt("", "meta pages", nil, err), "%s: both of bbolt's meta pages are damaged", path),
				"restore a backup")
		}
		return errors.Wrapf(backend.ErrNotStrata, "%s: %v", path, err)
	case errors.Is(err, berrors.ErrChecksum):
		return errors.Wrapf(backend.ErrCorrupt, "%s: %v", path, err)
	case errors.Is(err, backend.ErrCorrupt):
		return errors.Wrapf(err, "%s", path)
	case strings.Contains(err.Error(), "file size too small"):
		// bbolt read a page size (from a meta page, or the OS's when
		// neither meta page is valid) and the file is shorter than two
		// pages: a truncated database, or not one at all.
		if looksLikeBolt(path) {
			return errors.Wrapf(backend.ErrCorrupt, "%s: truncated: %v", path, err)
		}
		return errors.Wrapf(backend.ErrNotStrata, "%s: %v", path, err)
	}
	return errors.Wrapf(err, "boltfile: open %s", path)
}

// IsBoltFile reports whether the file at path starts as a bbolt file does
// (a meta page: the page header, then bbolt's magic number), whether or
// not it is strata's. It reads the first bytes only.
func IsBoltFile(path string) bool { return looksLikeBolt(path) }

// metaMagic reports whether either of the file's meta pages starts as
// bbolt's does: the first page (looksLikeBolt), or the second, at any page
// size bbolt writes.
func metaMagic(path string) bool {
	if looksLikeBolt(path) {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	for ps := int64(1 << 12); ps <= 1<<16; ps <<= 1 {
		if _, err := f.ReadAt(b[:], ps+pageHeader); err == nil && binary.LittleEndian.Uint32(b[:]) == boltMagic {
			return true
		}
	}
	return false
}

// looksLikeBolt reports whether the file at path starts with a bbolt meta
// page: the page header, then the magic number, little-endian.
func looksLikeBolt(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [pageHeader + 4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(b[pageHeader:]) == boltMagic
}

// init checks what Open reads first: the root bucket's pages (the list of
// sessions, not the sessions' own), the meta bucket, and the meta record.
func (b *Backend) init() error {
	return b.View(func(btx backend.Tx) error {
		t := btx.(*viewTx).tx
		return guard(func() error {
			root := t.rootAt()
			var s shadow
			if err := s.init(&t.w, root).all(); err != nil {
				return errors.Wrapf(backend.Corrupt("", "root", nil, errors.Wrap(err, "damaged page graph")), "%s", b.path)
			}
			m, found, err := t.locate(root, bucketMeta)
			if err != nil {
				return errors.Wrapf(backend.Corrupt("", "root", bucketMeta, err), "%s", b.path)
			}
			if !found {
				if what := strataRoot(t.btx); what != "" {
					return errors.WithHint(errors.Wrapf(backend.Corrupt("", "root", nil, errors.Newf("the root page lists no meta record, yet holds %s", what)), "%s", b.path),
						"the root page is damaged: restore a backup")
				}
				return errors.WithHint(errors.Wrapf(backend.ErrNotStrata, "%s: a bbolt file without strata's meta record", b.path),
					"it was not written by strata")
			}
			var ms shadow
			if err := ms.init(&t.w, m).all(); err != nil {
				return errors.Wrapf(backend.Corrupt("", "meta", nil, errors.Wrap(err, "damaged page graph")), "%s", b.path)
			}
			mb := t.btx.Bucket(bucketMeta)
			if mb == nil {
				return errors.Wrapf(backend.Corrupt("", "root", bucketMeta, errors.New("bbolt does not find the meta bucket the pages hold")), "%s", b.path)
			}
			raw := mb.Get(keyVersion)
			if raw == nil {
				if old := mb.Get(keyFormatOld); old != nil {
					f, err := decodeOldMeta(old)
					if err != nil {
						return errors.Wrapf(backend.Corrupt("", "meta", keyFormatOld, err), "%s", b.path)
					}
					return tooOld(b.path, f)
				}
				return errors.WithHint(errors.Wrapf(backend.ErrNotStrata, "%s: a bbolt file without strata's meta record", b.path),
					"it was not written by strata")
			}
			rec, err := decodeMeta(raw)
			if err != nil {
				return errors.Wrapf(backend.Corrupt("", "meta", keyVersion, err), "%s", b.path)
			}
			switch {
			case rec.Format > FormatVersion:
				return errors.WithHint(errors.Wrapf(backend.ErrFormatTooNew, "%s has format %d; this strata reads format %d", b.path, rec.Format, FormatVersion),
					"open it with the newer strata that wrote it")
			case rec.Format < MinFormatVersion:
				return tooOld(b.path, rec.Format)
			}
			return nil
		})
	})
}

// strataRoot says what makes a root bucket without strata's meta record a
// strata file's damaged root page rather than another program's: a session
// (s/ID), or a record — bbolt's root holds buckets only, so a record there
// is a page of some other bucket, written over the root's or never
// replaced by it. "" when it holds neither. The root's pages are checked
// (shadow) before it is called.
func strataRoot(btx *bolt.Tx) string {
	c := btx.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch {
		case v != nil:
			return fmt.Sprintf("a record at key %q, where a bucket belongs", clip(k))
		case bytes.HasPrefix(k, sessionPrefix):
			return fmt.Sprintf("session %q", k[len(sessionPrefix):])
		}
	}
	return ""
}

func tooOld(path string, format int) error {
	return errors.WithHint(errors.Wrapf(backend.ErrFormatTooOld, "%s has format %d; this strata reads format %d", path, format, FormatVersion),
		"export its events with the strata that wrote it (strata dump --json --raw) and replay them into a new database")
}

// Path returns the database file's path.
func (b *Backend) Path() string { return b.path }

// Created reports whether Open made the file: Create, and no file at the
// path.
func (b *Backend) Created() bool { return b.created }

// DropEmpty removes the file Open made when it holds no session. It holds
// the file's lock while it looks and removes, so no other process stores
// a session meanwhile; an Open waiting for that lock finds the file gone
// and looks again.
func (b *Backend) DropEmpty() (bool, error) {
	if !b.created {
		return false, nil
	}
	if empty, err := backend.Empty(b); err != nil || !empty {
		return false, err
	}
	if err := os.Remove(b.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, errors.Wrapf(err, "boltfile: removing %s", b.path)
	}
	return true, nil
}

// ReadOnly reports whether the file was opened read-only.
func (b *Backend) ReadOnly() bool { return b.opts.ReadOnly }

// FileSize returns the size of the database file.
func (b *Backend) FileSize() (int64, error) {
	fi, err := os.Stat(b.path)
	if err != nil {
		return 0, errors.Wrap(err, "boltfile")
	}
	return fi.Size(), nil
}

// Close closes the file; transactions must have ended. It is safe to call
// more than once.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { b.closeErr = guard(b.db.Close) })
	return b.closeErr
}

// cacheFor returns the page cache of transaction id txid: the handle's,
// moved on to txid if it was older, or for a reader older than the
// handle's, one of its own.
func (b *Backend) cacheFor(txid uint64) *pageCache {
	for {
		c := b.cache.Load()
		switch {
		case c != nil && c.txid == txid:
			return c
		case c != nil && c.txid > txid:
			return newPageCache(txid)
		}
		n := newPageCache(txid)
		if b.cache.CompareAndSwap(c, n) {
			return n
		}
	}
}

// View runs fn in a read transaction.
func (b *Backend) View(fn func(backend.Tx) error) error {
	var btx *bolt.Tx
	if err := guard(func() error {
		var err error
		btx, err = b.db.Begin(false)
		return err
	}); err != nil {
		return errors.Wrapf(err, "boltfile: %s", b.path)
	}
	defer func() { _ = guard(btx.Rollback) }()
	t := &viewTx{tx: b.newTx(btx, uint64(btx.ID()))}
	return fn(t)
}

// Update runs fn in a write transaction and commits it when fn returns
// nil. A commit that fails at the disk's fsync, or with EIO, or with a
// panic inside bbolt, poisons the handle: that error is marked backend.ErrPoisoned, and every later Update
// returns ErrPoisoned without writing; reads go on. A commit that fails
// otherwise — a write that finds the disk full — leaves the handle as it
// was: the next Update succeeds once there is room.
func (b *Backend) Update(fn func(backend.Tx) error) (err error) {
	if b.opts.ReadOnly {
		return errors.Wrapf(backend.ErrReadOnly, "%s", b.path)
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	var btx *bolt.Tx
	if err := guard(func() error {
		var err error
		btx, err = b.db.Begin(true)
		return err
	}); err != nil {
		return errors.Wrapf(err, "boltfile: %s", b.path)
	}
	open := true
	defer func() {
		if open {
			_ = guard(btx.Rollback)
		}
	}()
	// Checked under bbolt's writer lock: no write begins on the state a
	// failed sync left.
	if p := b.poisoned.Load(); p != nil {
		return errors.WithHint(errors.Wrapf(backend.ErrPoisoned, "%s: %v", b.path, *p),
			"close the database and open it again; the write that failed may or may not be stored")
	}
	t := b.newTx(btx, uint64(btx.ID())-1)
	if err := fn(t); err != nil {
		return err
	}
	if t.broken != nil {
		return t.broken
	}
	err = hook("commit")
	if err == nil {
		open = false
		err = guard(btx.Commit)
		if err != nil {
			// bbolt rolled back already, unless it panicked.
			_ = guard(btx.Rollback)
		}
	}
	if err == nil {
		return nil
	}
	// The pages a failed commit wrote were free ones: a cache entry for a
	// free page (reached through damage) would be stale.
	b.cache.Store(nil)
	var why string
	switch {
	case syncFailed(err):
		why = "commit failed at the disk"
	case errors.Is(err, backend.ErrCorrupt):
		// A panic inside bbolt's commit: what it wrote is not known.
		why = "commit failed inside bbolt"
	default:
		return errors.Wrapf(err, "%s: commit", b.path)
	}
	b.poisoned.CompareAndSwap(nil, &err)
	return errmark.Mark(errors.Wrapf(err, "%s: %s", b.path, why), backend.ErrPoisoned)
}

// syncFailed reports whether err, returned by bbolt's commit, may come from
// an fsync or is an I/O error: then the commit's outcome is unknown. bbolt
// returns fdatasync's error as it is (a bare syscall.Errno on Linux, an
// *fs.PathError "sync" elsewhere) and the fsync of a file it grows as a
// "file sync error" string; a write or a truncate fails with an
// *fs.PathError before the meta page is written, so a full disk (ENOSPC
// there) leaves the handle usable once space is freed.
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
