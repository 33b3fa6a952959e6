package postgres

import (
	"io"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
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
