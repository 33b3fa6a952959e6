package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-go/strata/backend"
)

// Options tunes Open.
type Options struct {
	// Create runs the migrations on a schema that holds no strata tables
	// yet. Without it such a schema is backend.ErrNotExist. A schema of an
	// older version is migrated by every open that may write, Create or
	// not.
	Create bool
	// ReadOnly refuses every write, runs no migration (a schema that is
	// not at SchemaVersion is refused), and opens every connection with
	// default_transaction_read_only on.
	ReadOnly bool
	// LockTimeout is how long Open waits for another process that is
	// migrating the same schema (the migration's advisory lock) before
	// it returns backend.ErrLocked; 0 means 1 s.
	LockTimeout time.Duration
	// NoSync opens every connection with synchronous_commit off: a commit
	// returns before its WAL is flushed, and a crash of the server (not of
	// this process) can lose the last commits acknowledged — never a part
	// of one. For tests and bulk loads that can be redone. Without it,
	// connections run with synchronous_commit on, unless the URL sets it.
	NoSync bool
}

// DefaultConnectTimeout bounds the connection to the server when the URL
// sets no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// MaxKeyBytes is the longest key a table takes: with the session id, a
// key must fit in one entry of a B-tree index (about a third of an 8 KiB
// page).
const MaxKeyBytes = 2048

// MaxSessionBytes is the longest session id.
const MaxSessionBytes = 256

// Backend is strata's backend in a PostgreSQL schema, over a pool of
// connections (pgxpool). It implements backend.Backend and
// backend.Checker; it is safe for concurrent use, and many processes may
// use the same schema at once.
type Backend struct {
	pool     *pgxpool.Pool
	opts     Options
	where    string // "database D on HOST:PORT schema S", for errors
	schema   string
	lockBase uint64       // the FNV-1a state after the schema's part of a lock key
	created  bool         // Open made strata's tables (backend.Dropper)
	trips    atomic.Int64 // round trips of transactions, for the tests that count them
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Checker    = (*Backend)(nil)
	_ backend.KeyLimiter = (*Backend)(nil)
	_ backend.Dropper    = (*Backend)(nil)
	_ backend.Versioner  = (*Backend)(nil)
	_ backend.TableSizer = (*Backend)(nil)
)

// schemes are the URL schemes of a PostgreSQL database, in lower case: the
// driver registers each, and IsURL knows a URL by them in any case, as
// backend.Scheme reads a scheme.
var schemes = []string{"postgres", "postgresql"}

// IsURL reports whether s names a PostgreSQL database, as Open takes it: a
// postgres:// or postgresql:// URL, the scheme in any case
// (PostgreSQL://…), as the backend registry finds its driver.
func IsURL(s string) bool { return slices.Contains(schemes, backend.Scheme(s)) }

// connString returns url with its scheme in lower case, where it is a URL:
// pgx reads a URL only by a lower-case scheme.
func connString(url string) string {
	if !IsURL(url) {
		return url
	}
	i := strings.Index(url, "://")
	return strings.ToLower(url[:i]) + url[i:]
}

// Open connects to the PostgreSQL database that url names — a postgres://
// or postgresql:// URL, or pgx's key=value form, with pgx's parameters
// (pool_max_conns among them) and the PG* environment variables for what
// it leaves out — and uses strata's tables in the connection's current
// schema (the first of search_path that exists; search_path=NAME in the
// URL picks another).
//
// The schema is migrated to SchemaVersion under an advisory lock, unless
// opts.ReadOnly: a schema without strata's tables is backend.ErrNotExist
// unless opts.Create; one of a newer version is backend.ErrFormatTooNew;
// a read-only open of an older one is backend.ErrFormatTooOld.
func Open(url string, opts Options) (*Backend, error) {
	if opts.Create && opts.ReadOnly {
		return nil, errors.New("postgres: creating and read-only together")
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	cfg, err := pgxpool.ParseConfig(connString(url))
	if err != nil {
		return nil, errors.WithHint(errors.Wrap(err, "postgres: the database URL"),
			"give a URL such as postgres://USER@HOST:PORT/DATABASE?sslmode=disable")
	}
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	params := cc.RuntimeParams
	if params["application_name"] == "" {
		params["application_name"] = "strata"
	}
	switch {
	case opts.NoSync:
		params["synchronous_commit"] = "off"
	case params["synchronous_commit"] == "":
		params["synchronous_commit"] = "on"
	}
	if opts.ReadOnly {
		params["default_transaction_read_only"] = "on"
	}
	where := fmt.Sprintf("database %s on %s:%d", cc.Database, cc.Host, cc.Port)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, errors.Wrapf(err, "postgres: %s", where)
	}
	b := &Backend{pool: pool, opts: opts, where: where}
	if err := b.open(); err != nil {
		pool.Close()
		return nil, err
	}
	return b, nil
}

// schemaState is what a schema holds of strata's.
type schemaState struct {
	schema, database string
	hasVersion       bool // the version table
	hasSessions      bool
	version          int
}

// connectHint says what to check when a connection failed with err: what
// the server refused (the database, the role or its password, a parameter
// of the URL), or else whether it is there at all.
func connectHint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "3D000": // invalid_catalog_name
			return "the server has no such database: create it (createdb NAME), or name another in the URL"
		case "28000", "28P01": // invalid_authorization_specification, invalid_password
			return "check the user and its password (the URL, PGUSER and PGPASSWORD, or ~/.pgpass) and the server's pg_hba.conf"
		case "42704": // undefined_object: a parameter the server does not know
			return "the URL sets a parameter the server does not know: take it out"
		}
	}
	return "check the URL, and that the server accepts connections (pg_isready -h HOST -p PORT)"
}

// readSchema reads what the current schema holds, on conn.
func readSchema(ctx context.Context, conn *pgxpool.Conn) (schemaState, error) {
	var s schemaState
	var schema *string
	if err := conn.QueryRow(ctx, sqlHasSchema).Scan(&schema, &s.database, &s.hasVersion, &s.hasSessions); err != nil {
		return s, err
	}
	if schema != nil {
		s.schema = *schema
	}
	if s.hasVersion {
		var v *int32
		if err := conn.QueryRow(ctx, sqlVersion).Scan(&v); err != nil {
			return s, err
		}
		if v != nil {
			s.version = int(*v)
		}
	}
	return s, nil
}

// open checks the schema, and migrates it unless read-only.
func (b *Backend) open() error {
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return errors.WithHint(errors.Wrapf(err, "postgres: connecting to %s", b.where), connectHint(err))
	}
	defer conn.Release()
	s, err := readSchema(ctx, conn)
	if err != nil {
		return errors.Wrapf(err, "postgres: %s: reading the schema", b.where)
	}
	if s.schema == "" {
		var path string
		_ = conn.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&path) // only for the message
		return errors.WithHint(errors.Newf("postgres: %s: no schema of the search_path (%s) exists", b.where, path),
			"create it (CREATE SCHEMA name), or name an existing one with search_path=NAME in the URL")
	}
	b.setSchema(s.schema)
	if err := b.checkVersion(s); err != nil || s.version == SchemaVersion || b.opts.ReadOnly {
		return err
	}
	return b.migrate(ctx, conn)
}

func (b *Backend) setSchema(schema string) {
	b.schema = schema
	b.where = fmt.Sprintf("%s schema %s", b.where, schema)
	h := fnv.New64a()
	h.Write([]byte("strata\x00" + schema + "\x00"))
	b.lockBase = h.Sum64()
}

// checkVersion refuses a schema this open cannot use as it is: newer, not
// strata's, without strata's tables and not to be created, or older on a
// read-only open.
func (b *Backend) checkVersion(s schemaState) error {
	switch {
	case s.hasVersion && s.version > SchemaVersion:
		return errors.WithHint(errors.Wrapf(backend.ErrFormatTooNew, "postgres: %s has schema version %d; this strata reads version %d", b.where, s.version, SchemaVersion),
			"open it with the newer strata that migrated it")
	case !s.hasVersion && s.hasSessions, s.hasVersion && s.version == 0:
		return errors.WithHint(errors.Wrapf(backend.ErrNotStrata, "postgres: %s holds a %s table without strata's schema version", b.where, sessionsTable),
			"it was not made by strata, or its strata_schema_version table was emptied; use another schema (search_path=NAME in the URL)")
	case !s.hasVersion && b.opts.ReadOnly:
		return errors.WithHint(errors.Wrapf(backend.ErrNotExist, "postgres: %s holds no strata tables", b.where),
			"a command that writes, such as strata replay --db URL, creates them; check the database and search_path in the URL")
	case !s.hasVersion && !b.opts.Create:
		return errors.WithHint(errors.Wrapf(backend.ErrNotExist, "postgres: %s holds no strata tables", b.where),
			"a command that creates a database, such as strata replay --db URL, creates them")
	case s.hasVersion && s.version < SchemaVersion && b.opts.ReadOnly:
		return errors.WithHint(errors.Wrapf(backend.ErrFormatTooOld, "postgres: %s has schema version %d; this strata reads version %d", b.where, s.version, SchemaVersion),
			"open it once with a command that writes (such as strata replay --db URL), which migrates it")
	}
	return nil
}

// migrate runs the migrations the schema lacks, in one transaction, and
// records each in the version table. It holds the schema's advisory lock
// (session-level) around that transaction, and reads the schema again in
// it: a transaction begun after the lock is taken sees the catalog as the
// process that held it last left it.
func (b *Backend) migrate(ctx context.Context, conn *pgxpool.Conn) (err error) {
	fail := func(err error, what string) error { return errors.Wrapf(err, "postgres: %s: %s", b.where, what) }
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", max(b.opts.LockTimeout.Milliseconds(), 1))); err != nil {
		return fail(err, "migrating")
	}
	key := b.lockKey("\x00migrations")
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
	if _, rerr := conn.Exec(ctx, "RESET lock_timeout"); err == nil && rerr != nil {
		err = rerr
	}
	if code(err) == "55P03" {
		return errors.WithHint(errors.Wrapf(backend.ErrLocked, "postgres: %s: another process is migrating its schema (waited %s)", b.where, b.opts.LockTimeout),
			"wait for it, or give a longer --timeout")
	}
	if err != nil {
		return fail(err, "migrating")
	}
	defer func() {
		if _, uerr := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			_ = conn.Conn().Close(ctx) // and with it the lock
		}
	}()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fail(err, "migrating")
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	// Under the lock: what another process migrated meanwhile.
	s, err := readSchema(ctx, conn)
	if err != nil {
		return fail(err, "reading the schema")
	}
	if err := b.checkVersion(s); err != nil {
		return err
	}
	for v := s.version + 1; v <= SchemaVersion; v++ {
		for _, stmt := range migration(v) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fail(err, fmt.Sprintf("migration %d", v))
			}
		}
		if _, err := tx.Exec(ctx, sqlMigrated, v, "strata"); err != nil {
			return fail(err, fmt.Sprintf("migration %d", v))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err, "migrating")
	}
	b.created = s.version == 0
	return nil
}

// Created reports whether Open made strata's tables: Create, in a schema
// that held none. (Open never makes the schema itself.)
func (b *Backend) Created() bool { return b.created }

// DropEmpty drops the tables Open made when they hold no session, in one
// transaction that first locks every one of them (ACCESS EXCLUSIVE, within
// LockTimeout): no other process's transaction can store a session between
// the look and the drop. Tables it did not make are never dropped.
func (b *Backend) DropEmpty() (dropped bool, err error) {
	if !b.created {
		return false, nil
	}
	ctx := context.Background()
	fail := func(err error) (bool, error) {
		return false, errors.Wrapf(err, "postgres: %s: dropping the tables it made", b.where)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tables := strings.Join(tableNames(), ", ")
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", max(b.opts.LockTimeout.Milliseconds(), 1))); err != nil {
		return fail(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+tables+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return fail(err)
	}
	var held bool
	if err := tx.QueryRow(ctx, sqlHeld).Scan(&held); err != nil {
		return fail(err)
	}
	if held {
		return false, nil
	}
	if _, err := tx.Exec(ctx, "DROP TABLE "+tables); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return true, nil
}

// lockKey is the advisory lock of session id in this schema: 64 bits of
// FNV-1a over the schema and the id. Two ids that share a key share a
// lock, which only serializes their writers.
func (b *Backend) lockKey(id string) int64 {
	h := b.lockBase
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return int64(h)
}

// Where names the database and schema, as errors do: "database D on
// HOST:PORT schema S". It holds no password.
func (b *Backend) Where() string { return b.where }

// ReadOnly reports whether the backend was opened read-only.
func (b *Backend) ReadOnly() bool { return b.opts.ReadOnly }

// MaxKeyBytes returns MaxKeyBytes, for store.New: it bounds the ids and
// keys of events.
func (b *Backend) MaxKeyBytes() int { return MaxKeyBytes }

// FormatVersion returns the schema version, SchemaVersion.
func (b *Backend) FormatVersion() int { return SchemaVersion }

// TableBytes returns the size of strata's tables in the schema, their
// indexes and TOAST included (pg_total_relation_size): what the database
// takes on the server.
func (b *Backend) TableBytes() (int64, error) {
	var n int64
	err := b.pool.QueryRow(context.Background(), sqlTableBytes, b.schema, tableNames()).Scan(&n)
	return n, errors.Wrapf(err, "postgres: %s: the tables' size", b.where)
}

// Close closes the pool's connections; transactions must have ended.
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

// code returns the SQLSTATE of a server's error, or "".
func code(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Retries of a write transaction (Update).
const (
	maxAttempts = 10
	backoffBase = 2 * time.Millisecond
	backoffMax  = 500 * time.Millisecond
)

// retryable reports whether a write transaction that failed with err,
// before its COMMIT was sent, may run again: a serialization failure or a
// deadlock (SQLSTATE 40001, 40P01), a lock it must take in order, or a
// lost connection — a transaction that never committed.
func retryable(err error) bool {
	if errors.Is(err, errLockOrder) {
		return true
	}
	if errors.Is(err, ErrCommitUnknown) || errors.Is(err, backend.ErrCorrupt) {
		return false
	}
	if c := code(err); c == "40001" || c == "40P01" {
		return true
	}
	return lost(err)
}

// lost reports whether err is the loss of the connection: it failed, or
// the server ended it or is shutting down (SQLSTATE class 08, 57P01,
// 57P02, 57P03).
func lost(err error) bool {
	switch c := code(err); {
	case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03":
		return true
	case c != "":
		return false
	}
	return connFailed(err)
}

// connFailed reports whether err is the failure of a connection (not an
// error the server reported).
func connFailed(err error) bool {
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "failed to receive message") || strings.Contains(msg, "failed to write")
}

// backoff is the wait before attempt n+1 (n ≥ 1): exponential, with full
// jitter over its upper half.
func backoff(n int) time.Duration {
	d := min(backoffBase<<(n-1), backoffMax)
	return d/2 + rand.N(d/2+1)
}

// View runs fn in a read transaction: REPEATABLE READ, READ ONLY, one
// snapshot for everything fn reads.
func (b *Backend) View(fn func(backend.Tx) error) error {
	t, err := b.begin(false, nil)
	if err != nil {
		return err
	}
	defer t.end()
	return fn(t)
}

// Update runs fn in a write transaction (READ COMMITTED, with the
// advisory lock of every session it touches held to its end, tx.go) and
// commits it when fn returns nil. A transaction rolled back by a conflict
// with another writer — a serialization failure, a deadlock, a lock it
// must take in order — or by a failed connection runs fn again, after a
// short jittered wait, up to 10 times in all: fn must be re-runnable (see
// backend.Backend). A commit whose outcome is not known — the connection
// failed after COMMIT was sent — is not run again: its error is marked
// ErrCommitUnknown.
func (b *Backend) Update(fn func(backend.Tx) error) error {
	if b.opts.ReadOnly {
		return errors.Wrapf(backend.ErrReadOnly, "%s", b.where)
	}
	var locks []int64 // the locks an attempt needed: the next takes them first
	for n := 1; ; n++ {
		err := b.attempt(fn, &locks)
		if err == nil || !retryable(err) {
			return err
		}
		if n == maxAttempts {
			return errors.WithHint(errors.Wrapf(err, "postgres: %s: a write transaction failed %d times", b.where, n),
				"the server is unreachable or the sessions are contended: try again")
		}
		time.Sleep(backoff(n))
	}
}

// attempt runs fn once in a write transaction that first takes locks.
func (b *Backend) attempt(fn func(backend.Tx) error, locks *[]int64) error {
	t, err := b.begin(true, *locks)
	if err != nil {
		return err
	}
	defer t.end()
	ferr := fn(t)
	*locks = t.needed()
	if t.broken != nil {
		return t.broken
	}
	if ferr != nil {
		return ferr
	}
	return t.commit()
}

// begin starts a transaction on a connection of the pool; its BEGIN is
// sent with its first statement.
func (b *Backend) begin(writable bool, locks []int64) (*tx, error) {
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, errors.Wrapf(err, "postgres: %s", b.where)
	}
	t := &tx{b: b, ctx: ctx, conn: conn, writable: writable}
	if writable {
		t.begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
		for _, k := range locks {
			t.queueLock(k)
		}
	} else {
		t.begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	}
	return t, nil
}
