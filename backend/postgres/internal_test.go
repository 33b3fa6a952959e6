package postgres

import (
	"io"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/pgtest"
)

// Every backend.Table has an SQL table of its own, made by a migration of
// this strata.
func TestSchema_EveryTableNamed(t *testing.T) {
	seen := map[string]backend.Table{sessionsTable: 0, eventsTable: 0, versionTable: 0}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		rt := recordTables[tb]
		if rt.name == "" {
			t.Fatalf("table %s has no SQL table in recordTables", tb)
		}
		if other, dup := seen[rt.name]; dup {
			t.Fatalf("tables %s and %s are both %s", tb, other, rt.name)
		}
		seen[rt.name] = tb
		if rt.since < 1 || rt.since > SchemaVersion {
			t.Fatalf("table %s is made by migration %d; the migrations are 1 to %d", tb, rt.since, SchemaVersion)
		}
	}
	for v := 1; v <= SchemaVersion; v++ {
		if len(migration(v)) == 0 {
			t.Fatalf("migration %d is empty", v)
		}
	}
}

func TestRetryable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{errors.Wrap(&pgconn.PgError{Code: "40001"}, "wrapped"), true},
		{errors.Wrap(errLockOrder, "session"), true},
		{io.ErrUnexpectedEOF, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{errors.Mark(io.ErrUnexpectedEOF, ErrCommitUnknown), false},
		{backend.Corrupt("s", "l0", nil, errors.New("x")), false},
		{errors.New("fn's own error"), false},
	}
	for _, tc := range cases {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// results is a round trip's results whose statement fail (0 the BEGIN)
// fails with err, and whose close fails with closeErr.
type results struct {
	pgx.BatchResults // the methods a round trip does not call
	fail, n          int
	err, closeErr    error
}

func (r *results) Close() error { return r.closeErr }

func (r *results) Exec() (pgconn.CommandTag, error) {
	defer func() { r.n++ }()
	if r.n == r.fail {
		return pgconn.CommandTag{}, r.err
	}
	if r.n == 3 {
		return pgconn.NewCommandTag("COMMIT"), nil
	}
	return pgconn.NewCommandTag("INSERT 0 1"), nil
}

// unsent is the error of a request that never reached the server.
type unsent struct{}

func (unsent) Error() string     { return "unsent" }
func (unsent) SafeToRetry() bool { return true }

// A round trip of BEGIN, two writes and the COMMIT whose connection fails
// at any of its results has an unknown outcome, and is not run again —
// the server may have run the COMMIT. A statement the server answered
// with an error (an ERROR rolls the transaction back; after a FATAL it
// runs nothing more), and a request never sent, stored nothing: those are
// known, and a lost connection runs again.
func TestResults_CommitUnknown(t *testing.T) {
	ended := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}
	cases := []struct {
		name    string
		fail    int
		err     error
		unknown bool
	}{
		{"connection lost at the begin's result", 0, io.ErrUnexpectedEOF, true},
		{"connection lost at a write's result", 2, io.ErrUnexpectedEOF, true},
		{"connection lost at the commit's result", 3, io.ErrUnexpectedEOF, true},
		{"the server ended the connection at a write", 1, ended, false},
		{"the server ended the connection at the commit", 3, ended, true},
		{"the server refused a write", 1, &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, false},
		{"the server refused the commit", 3, &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40001"}, false},
		{"nothing sent", 0, unsent{}, false},
	}
	for _, tc := range cases {
		tx := &tx{b: &Backend{where: "database d on h:1 schema s"}, begin: "BEGIN",
			pending: []stmt{{sql: "INSERT 1", session: "s", bucket: "l0"}, {sql: "INSERT 2", session: "s", bucket: "l0"}}}
		err := tx.results(&results{fail: tc.fail, err: tc.err}, nil, true)
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if got := errors.Is(err, ErrCommitUnknown); got != tc.unknown {
			t.Errorf("%s: %v: ErrCommitUnknown %v, want %v", tc.name, err, got, tc.unknown)
		}
		if tc.unknown && retryable(err) {
			t.Errorf("%s: %v: run again, though it may have committed", tc.name, err)
		}
		if !tc.unknown && retryable(tc.err) && !retryable(err) {
			t.Errorf("%s: %v: not run again", tc.name, err)
		}
	}
	// The server answered the COMMIT, then ended the connection (it
	// closes with the server's FATAL): committed.
	rt := &tx{b: &Backend{where: "w"}, begin: "BEGIN", pending: []stmt{{sql: "INSERT 1"}, {sql: "INSERT 2"}}}
	if err := rt.results(&results{fail: -1, closeErr: ended}, nil, true); err != nil {
		t.Errorf("a COMMIT answered, then the connection ended: %v, want committed", err)
	}
	// Without the COMMIT in it, a lost connection is a transaction that
	// never committed: run again.
	rt = &tx{b: &Backend{where: "w"}, begin: "BEGIN", pending: []stmt{{sql: "INSERT 1"}}}
	if err := rt.results(&results{fail: 1, err: io.ErrUnexpectedEOF}, nil, false); errors.Is(err, ErrCommitUnknown) || !retryable(err) {
		t.Errorf("a lost connection before the commit: %v, want a retryable error", err)
	}
}

// Two write transactions take two sessions' locks in opposite orders:
// the one that needs a lock below one it holds, held by the other, rolls
// back and runs again with both locks taken in order — no deadlock, and
// both commit.
func TestUpdate_LockOrder(t *testing.T) {
	t.Run("Session", func(t *testing.T) { testLockOrder(t, false) })
	t.Run("Prefetch", func(t *testing.T) { testLockOrder(t, true) })
}

// testLockOrder is TestUpdate_LockOrder, the second transaction taking
// the lock below the one it holds by Session or by Prefetch.
func testLockOrder(t *testing.T, prefetch bool) {
	url := pgtest.URL(t)
	open := func() *Backend {
		b, err := Open(url, Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	b1, b2 := open(), open()
	// lo's key is below hi's.
	lo, hi := "a", "b"
	if b1.lockKey(lo) > b1.lockKey(hi) {
		lo, hi = hi, lo
	}
	create := func(tx backend.Tx, id string) error {
		s, err := tx.Session(id)
		if err != nil || s != nil {
			return err
		}
		if s, err = tx.CreateSession(id); err != nil {
			return err
		}
		return s.PutState([]byte("0"))
	}
	if err := b1.Update(func(tx backend.Tx) error { return errors.CombineErrors(create(tx, lo), create(tx, hi)) }); err != nil {
		t.Fatal(err)
	}
	put := func(tx backend.Tx, id, v string) error {
		s, err := tx.Session(id)
		if err != nil {
			return err
		}
		return s.Put(backend.Audit, []byte(v), []byte(v))
	}
	loHeld, hiHeld := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var err1, err2 error
	runs2 := 0
	wg.Add(2)
	go func() { // lo, then hi
		defer wg.Done()
		first := true
		err1 = b1.Update(func(tx backend.Tx) error {
			if err := put(tx, lo, "t1"); err != nil {
				return err
			}
			if first {
				first = false
				close(loHeld)
				<-hiHeld
			}
			return put(tx, hi, "t1")
		})
	}()
	go func() { // hi, then lo: tried, held by t1
		defer wg.Done()
		err2 = b2.Update(func(tx backend.Tx) error {
			runs2++
			if runs2 == 1 {
				<-loHeld
			}
			if err := put(tx, hi, "t2"); err != nil {
				return err
			}
			if runs2 == 1 {
				close(hiHeld)
			}
			if prefetch {
				if err := tx.(backend.Prefetcher).Prefetch([]backend.Read{{Session: lo}, {Session: lo, Table: backend.Audit, Key: []byte("t2")}}); err != nil {
					return err
				}
			}
			return put(tx, lo, "t2")
		})
	}()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatalf("updates: %v; %v", err1, err2)
	}
	if runs2 < 2 {
		t.Fatalf("the second transaction ran %d time(s), want a retry", runs2)
	}
	for _, id := range []string{lo, hi} {
		if n := pgtest.QueryInt(t, url, `SELECT count(*) FROM strata_audit WHERE session = $1`, id); n != 2 {
			t.Fatalf("session %s holds %d records, want one of each transaction", id, n)
		}
	}
}
