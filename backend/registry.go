package backend

import (
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
)

// Options are what opening a backend takes: the same for every backend,
// each using what applies to it. A backend that makes no files ignores
// Mode; one that writes no creation time ignores Clock.
type Options struct {
	// Create makes the database when there is none.
	Create bool
	// ReadOnly opens the database for reading only.
	ReadOnly bool
	// LockTimeout bounds the wait for another process that holds the
	// database (a file's lock, a schema's migration); zero means the
	// backend's default.
	LockTimeout time.Duration
	// NoSync trades durability for speed: a crash can lose acknowledged
	// commits. For tests and bulk loads that can be redone.
	NoSync bool
	// Mode is a new file's permission bits; zero means 0600.
	Mode os.FileMode
	// Clock gives the creation time recorded in a new database; nil means
	// time.Now.
	Clock func() time.Time
}

// Driver opens the databases of one scheme: a backend package registers
// one in its init (Register), and package store's Open opens through it.
type Driver interface {
	// Open opens the database name names: a path, for FileScheme, else a
	// URL of the driver's scheme.
	Open(name string, opts Options) (Backend, error)
}

// DriverFunc is a Driver that is a function.
type DriverFunc func(name string, opts Options) (Backend, error)

// Open calls f.
func (f DriverFunc) Open(name string, opts Options) (Backend, error) { return f(name, opts) }

// Builder is a Driver that writes a new database at a path whole or not at
// all: Build makes it beside path, calls fill with it, and gives it the name
// path only once fill returned nil and it is durable — renamed over a file
// there when replace is true, else linked to path, which must not exist (an
// error that is fs.ErrExist). A failure leaves path as it was. The file
// backend's is what a copy and a backup of a database that is no file
// write.
type Builder interface {
	Build(path string, replace bool, fill func(Backend) error) error
}

// AtomicWriter is a Driver that writes a file of its own through write
// whole or not at all: readers of path see the old file or the whole new
// one, after a crash too. A backup of a file is written through it.
type AtomicWriter interface {
	WriteFileAtomic(path string, mode os.FileMode, write func(io.Writer) (int64, error)) (int64, error)
}

// KeyLimiter is a Backend with a limit on the keys of its tables (bytes):
// an event's ids and keys must fit in it.
type KeyLimiter interface {
	MaxKeyBytes() int
}

// Pather is a Backend held in one file, at Path.
type Pather interface {
	Path() string
}

// Versioner is a Backend that reports the version of its format (a file's
// layout, a schema's migrations).
type Versioner interface {
	FormatVersion() int
}

// Dropper is a Backend that knows whether its Open made the database — a
// file where there was none, a schema's tables where there were none — and
// can take that back: a command that made a database and failed before
// storing anything leaves nothing of its own behind.
type Dropper interface {
	// Created reports whether this Backend's Open made the database
	// (Options.Create).
	Created() bool
	// DropEmpty removes what Open made — the file, the tables — when
	// Created is true and the database holds no session, checked so that
	// no other process can store one meanwhile; else it removes nothing.
	// It reports whether it removed it. Only Close may follow it.
	DropEmpty() (dropped bool, err error)
}

// Empty reports whether be holds no session.
func Empty(be Backend) (bool, error) {
	empty := true
	err := be.View(func(tx Tx) error {
		return tx.Sessions(func(string) error {
			empty = false
			return errStop
		})
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return empty, err
}

// errStop ends a walk early.
var errStop = errors.New("backend: stop")

// FileSizer is a Backend that reports the size of its file.
type FileSizer interface {
	FileSize() (int64, error)
}

// TableSizer is a Backend that reports the bytes its tables take on the
// server.
type TableSizer interface {
	TableBytes() (int64, error)
}

// MappedReleaser is a read Tx over memory-mapped pages that can hand the
// pages it has read back to the kernel (they stay readable, read from the
// file again): a long read of a large file then does not hold it all in
// memory.
type MappedReleaser interface {
	ReleaseMapped()
}

// FileScheme is the scheme of a name that is a path, not a URL: the file
// backend's.
const FileScheme = "file"

// ErrNoDriver is returned by Open when no backend is registered for a
// name's scheme.
var ErrNoDriver = errors.New("store: no backend for the database's scheme")

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes d the driver of scheme (lower case, such as "postgres",
// or FileScheme for paths). It panics when d is nil or scheme has one: a
// backend registers once, in its init, as database/sql's drivers do.
func Register(scheme string, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d == nil {
		panic("backend: Register of a nil driver for " + scheme)
	}
	if _, dup := drivers[scheme]; dup {
		panic("backend: Register called twice for scheme " + scheme)
	}
	drivers[scheme] = d
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	s := make([]string, 0, len(drivers))
	for k := range drivers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Scheme returns the scheme of name: a URL's ("postgres" of
// postgres://…, in lower case), or FileScheme for a path.
func Scheme(name string) string {
	i := strings.Index(name, "://")
	if i <= 0 || !isScheme(name[:i]) {
		return FileScheme
	}
	return strings.ToLower(name[:i])
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' and '.').
func isScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Lookup returns the driver registered for name's scheme (Scheme), or an
// error marked ErrNoDriver naming the scheme and the package to import.
func Lookup(name string) (Driver, error) {
	scheme := Scheme(name)
	driversMu.RLock()
	d := drivers[scheme]
	driversMu.RUnlock()
	if d != nil {
		return d, nil
	}
	what := "a scheme " + scheme + "://"
	if scheme == FileScheme {
		what = "a file path"
	}
	registered := strings.Join(Schemes(), ", ")
	if registered == "" {
		registered = "none"
	}
	return nil, errors.WithHint(errors.Wrapf(ErrNoDriver, "%s (registered: %s)", what, registered),
		`import a backend for it: _ "github.com/strata-go/strata" links the bbolt file and PostgreSQL backends in`)
}
