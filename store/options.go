package store

import (
	"os"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// Options configures Open. The zero value of each field means its default;
// DefaultOptions spells them out.
type Options struct {
	// Create creates the file if it does not exist (in PostgreSQL,
	// strata's tables in a schema that has none). Without it, a missing
	// file is ErrNotExist. An existing zero-length file is ErrEmptyFile
	// either way.
	Create bool

	// ReadOnly opens the database with a shared lock and refuses writes.
	// In PostgreSQL it runs no migration and opens read-only connections.
	ReadOnly bool

	// LockTimeout bounds the wait for the file lock. bbolt waits forever by
	// default; strata never does: zero means DefaultLockTimeout. A writer
	// holds the lock exclusively, so a reader waits for it too, and gets
	// ErrLocked when the timeout passes. In PostgreSQL it bounds the wait
	// for another process that is migrating the schema.
	LockTimeout time.Duration

	// NoSync skips fsync on commit and when the file grows. THIS IS UNSAFE:
	// an acknowledged append can be lost, or the file damaged, by a crash or
	// power loss. For tests and bulk loads that can be redone. In
	// PostgreSQL it sets synchronous_commit off: a crash of the server can
	// lose the last appends it acknowledged, never damage the database.
	NoSync bool

	// MaxEventBytes and MaxIDBytes bound an event; zero means
	// tier.DefaultMaxEventBytes and tier.DefaultMaxIDBytes. An id or key is
	// part of a bbolt key, so MaxIDBytes can be at most MaxIDBytesLimit,
	// and MaxEventBytes at most MaxEventBytesLimit: Open refuses larger
	// values with ErrBadOptions. In PostgreSQL an id or key is part of an
	// index entry: MaxIDBytes is at most postgres.MaxKeyBytes, its default.
	MaxEventBytes int
	MaxIDBytes    int

	// MaxBatch caps how many Append calls one group commit carries; zero
	// means 256.
	MaxBatch int

	// CommitWait is how long a compaction's Commit (or Refuse) made while
	// appends are in flight waits, when nothing else is queued, for another
	// write to share its transaction and fsync: a pipeline that appends
	// on one goroutine and compacts on another pays one commit where it
	// would pay two. Once such a wait has found company, a Commit made
	// within CommitWait of the last append waits too (the appender is
	// between two appends); one that found none stops that until the next
	// wait does. A caller that appends and commits on one goroutine does
	// not wait (at most once, right after a pipeline on the same DB).
	// Zero means DefaultCommitWait; a negative value turns it off.
	CommitWait time.Duration

	// GroupWait is how long a group commit waits for the next append when
	// it holds fewer appends than were active at the last commit (a
	// compaction's commit is not an appender): appenders that
	// commit, come back and append again then share one commit rather
	// than split into a commit of the first one back and one of the rest.
	// Each arrival restarts the wait; the wait is never longer than a
	// quarter of the last commit's duration, and a single appender never
	// waits. Zero means DefaultGroupWait; a negative value turns it off.
	GroupWait time.Duration

	// Clock gives the time recorded on events without one; nil means
	// time.Now.
	Clock func() time.Time

	// Mode is the file mode for a created file; zero means 0600.
	Mode os.FileMode
}

// MaxIDBytesLimit is the largest Options.MaxIDBytes: bbolt's key limit
// (32 KiB) less room for a key's prefix.
const MaxIDBytesLimit = 32<<10 - 6

// MaxEventBytesLimit is the largest Options.MaxEventBytes: an event must fit
// in one stored record (at most 64 MiB) with room to spare.
const MaxEventBytesLimit = maxRecordBytes / 2

// DefaultLockTimeout is the lock wait when Options.LockTimeout is zero.
const DefaultLockTimeout = time.Second

// DefaultOptions opens an existing database for writing, waiting at most
// DefaultLockTimeout for the lock, with fsync on every commit.
var DefaultOptions = Options{
	LockTimeout:   DefaultLockTimeout,
	MaxEventBytes: tier.DefaultMaxEventBytes,
	MaxIDBytes:    tier.DefaultMaxIDBytes,
	MaxBatch:      256,
	CommitWait:    DefaultCommitWait,
	GroupWait:     DefaultGroupWait,
	Mode:          0o600,
}

// DefaultCommitWait is Options.CommitWait's default: the time an appending
// goroutine takes to come back with its next append, several times over.
const DefaultCommitWait = time.Millisecond

// DefaultGroupWait is Options.GroupWait's default: several times the gap
// between two appenders coming back from one group commit, and a small
// part of an fsync'd commit.
const DefaultGroupWait = 200 * time.Microsecond

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = tier.DefaultMaxEventBytes
	}
	if o.MaxIDBytes <= 0 {
		o.MaxIDBytes = tier.DefaultMaxIDBytes
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.CommitWait == 0 {
		o.CommitWait = DefaultCommitWait
	}
	if o.GroupWait == 0 {
		o.GroupWait = DefaultGroupWait
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	return o
}

func (o Options) limits() tier.Limits {
	return tier.Limits{MaxEventBytes: o.MaxEventBytes, MaxIDBytes: o.MaxIDBytes}
}

// check refuses contradictory options and limits past what a backend or
// the codec can store, which would fail whole group commits later.
func (o Options) check() error {
	if o.Create && o.ReadOnly {
		return errors.Wrap(ErrBadOptions, "Create and ReadOnly together")
	}
	if o.MaxIDBytes > MaxIDBytesLimit {
		return errors.Wrapf(ErrBadOptions, "MaxIDBytes %d is over the limit %d (bbolt's key limit less a 6-byte prefix)", o.MaxIDBytes, MaxIDBytesLimit)
	}
	if o.MaxEventBytes > MaxEventBytesLimit {
		return errors.Wrapf(ErrBadOptions, "MaxEventBytes %d is over %d", o.MaxEventBytes, MaxEventBytesLimit)
	}
	return nil
}
