package postgres

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/pgtest"
)

// openBackend opens a new backend in a schema of t's.
func openBackend(t *testing.T) (*Backend, string) {
	t.Helper()
	url := pgtest.URL(t)
	b, err := Open(url, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, url
}

// readAll is everything a transaction reads of session "s" that a
// Prefetch of prefetchAll can read ahead, as text.
func readAll(tx backend.Tx) (string, error) {
	var out bytes.Buffer
	s, err := tx.Session("s")
	if err != nil || s == nil {
		return "", fmt.Errorf("session s: %v, %v", s, err)
	}
	st, err := s.State()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&out, "state %q\n", st)
	for _, k := range []string{"k1", "k2", "absent"} {
		v, err := s.Get(backend.Nodes, []byte(k))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "get %s %q\n", k, v)
	}
	err = s.Scan(backend.Roots, nil, func(k, v []byte) (bool, error) {
		fmt.Fprintf(&out, "scan %q %q\n", k, v)
		return true, nil
	})
	if err != nil {
		return "", err
	}
	for _, below := range [][]byte{nil, []byte("r3"), {}} {
		k, v, err := s.Last(backend.Roots, below)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "last below %q: %q %q\n", below, k, v)
	}
	err = s.Events(2, 4, func(seq uint64, v []byte) (bool, error) {
		fmt.Fprintf(&out, "event %d %q\n", seq, v)
		return true, nil
	})
	return out.String(), err
}

// prefetchAll reads ahead what readAll reads, and more.
var prefetchAll = []backend.Read{
	{Session: "s"}, {Session: "absent"}, {Session: "absent", Table: backend.Nodes, Key: []byte("k1")},
	{Session: "s", Table: backend.Nodes, Key: []byte("k1")}, {Session: "s", Table: backend.Nodes, Key: []byte("k2")},
	{Session: "s", Table: backend.Nodes, Key: []byte("k1")}, {Session: "s", Table: backend.Nodes, Key: []byte("absent")},
	{Session: "s", Table: backend.Roots, Scan: true}, {Session: "s", Table: backend.Roots, Last: true},
	{Session: "s", Table: backend.Roots, Key: []byte("r3"), Last: true}, {Session: "s", Table: backend.Roots, Key: []byte{}, Last: true},
	{Session: "s", From: 2, To: 4}, {Session: "s", From: 5, To: 1}, {Session: "", Table: backend.Nodes},
}

// fill makes session "s": a state, two nodes, three roots, five events.
func fill(t *testing.T, b *Backend) {
	t.Helper()
	err := b.Update(func(tx backend.Tx) error {
		s, err := tx.CreateSession("s")
		if err != nil {
			return err
		}
		if err := s.PutState([]byte("state")); err != nil {
			return err
		}
		for _, k := range []string{"k1", "k2"} {
			if err := s.Put(backend.Nodes, []byte(k), []byte("node "+k)); err != nil {
				return err
			}
		}
		for _, k := range []string{"r1", "r2", "r3"} {
			if err := s.Put(backend.Roots, []byte(k), []byte("root "+k)); err != nil {
				return err
			}
		}
		for seq := uint64(1); seq <= 5; seq++ {
			if err := s.PutEvent(seq, fmt.Appendf(nil, "event %d", seq)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// What a transaction reads after a Prefetch is what it reads without one,
// in a read and in a write transaction; a Prefetch of a session that does
// not exist, or of an id the backend refuses, reads nothing and breaks
// nothing.
func TestPrefetch_ReadsWhatTheCallsRead(t *testing.T) {
	b, _ := openBackend(t)
	fill(t, b)
	var want string
	if err := b.View(func(tx backend.Tx) (err error) { want, err = readAll(tx); return err }); err != nil {
		t.Fatal(err)
	}
	for _, write := range []bool{false, true} {
		run := b.View
		if write {
			run = b.Update
		}
		err := run(func(tx backend.Tx) error {
			if err := tx.(backend.Prefetcher).Prefetch(prefetchAll); err != nil {
				return err
			}
			if s, err := tx.Session("absent"); s != nil || err != nil {
				return fmt.Errorf("session absent: %v, %v", s, err)
			}
			if _, err := tx.Session(""); err == nil {
				return errors.New("an empty id was taken")
			}
			got, err := readAll(tx)
			if err == nil && got != want {
				err = fmt.Errorf("after Prefetch:\n%s\nwithout:\n%s", got, want)
			}
			return err
		})
		if err != nil {
			t.Fatalf("write %v: %v", write, err)
		}
	}
}

// A write after a Prefetch is read back: Get, Scan, Last and Events see
// it, and a Delete.
func TestPrefetch_WritesAreReadBack(t *testing.T) {
	b, _ := openBackend(t)
	fill(t, b)
	err := b.Update(func(tx backend.Tx) error {
		if err := tx.(backend.Prefetcher).Prefetch(prefetchAll); err != nil {
			return err
		}
		s, err := tx.Session("s")
		if err != nil {
			return err
		}
		if err := s.Put(backend.Nodes, []byte("k1"), []byte("new k1")); err != nil {
			return err
		}
		if err := s.Delete(backend.Nodes, []byte("k2")); err != nil {
			return err
		}
		if err := s.Put(backend.Roots, []byte("r4"), []byte("root r4")); err != nil {
			return err
		}
		if err := s.PutEvent(6, []byte("event 6")); err != nil {
			return err
		}
		if v, err := s.Get(backend.Nodes, []byte("k1")); err != nil || string(v) != "new k1" {
			return fmt.Errorf("k1: %q, %v", v, err)
		}
		if v, err := s.Get(backend.Nodes, []byte("k2")); err != nil || v != nil {
			return fmt.Errorf("k2 deleted: %q, %v", v, err)
		}
		var keys []string
		if err := s.Scan(backend.Roots, nil, func(k, _ []byte) (bool, error) { keys = append(keys, string(k)); return true, nil }); err != nil {
			return err
		}
		if fmt.Sprint(keys) != "[r1 r2 r3 r4]" {
			return fmt.Errorf("roots %v", keys)
		}
		if k, _, err := s.Last(backend.Roots, nil); err != nil || string(k) != "r4" {
			return fmt.Errorf("last root %q, %v", k, err)
		}
		var seqs []uint64
		if err := s.Events(2, 6, func(seq uint64, _ []byte) (bool, error) { seqs = append(seqs, seq); return true, nil }); err != nil {
			return err
		}
		if fmt.Sprint(seqs) != "[2 3 4 5 6]" {
			return fmt.Errorf("events %v", seqs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A record changed by SQL is damage when it is read after a Prefetch, as
// without one, and the Prefetch itself does not fail.
func TestPrefetch_DamageIsTheReadsError(t *testing.T) {
	b, url := openBackend(t)
	fill(t, b)
	pgtest.Exec(t, url, `UPDATE strata_nodes SET value = 'changed' WHERE key = 'k1'`,
		`UPDATE strata_events SET value = 'changed' WHERE seq = 3`)
	err := b.View(func(tx backend.Tx) error {
		if err := tx.(backend.Prefetcher).Prefetch(prefetchAll); err != nil {
			return fmt.Errorf("prefetch: %w", err)
		}
		s, err := tx.Session("s")
		if err != nil {
			return err
		}
		if _, err := s.Get(backend.Nodes, []byte("k1")); !errors.Is(err, backend.ErrCorrupt) {
			return fmt.Errorf("k1: %v, want damage", err)
		}
		if v, err := s.Get(backend.Nodes, []byte("k2")); err != nil || string(v) != "node k2" {
			return fmt.Errorf("k2: %q, %v", v, err)
		}
		err = s.Events(2, 4, func(uint64, []byte) (bool, error) { return true, nil })
		if !errors.Is(err, backend.ErrCorrupt) {
			return fmt.Errorf("events: %v, want damage", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// After a Prefetch, readAll makes no round trip, and a second Prefetch of
// the same reads sends none; a write forgets what was read of its table,
// and the next Prefetch of it reads it again.
func TestPrefetch_ReadsOnce(t *testing.T) {
	b, _ := openBackend(t)
	fill(t, b)
	err := b.Update(func(tx backend.Tx) error {
		pf := tx.(backend.Prefetcher)
		if err := pf.Prefetch(prefetchAll); err != nil {
			return err
		}
		before := b.trips.Load()
		if _, err := readAll(tx); err != nil {
			return err
		}
		if err := pf.Prefetch(prefetchAll); err != nil {
			return err
		}
		if n := b.trips.Load() - before; n != 0 {
			return fmt.Errorf("%d round trips after the Prefetch, want none", n)
		}
		s, err := tx.Session("s")
		if err != nil {
			return err
		}
		if err := s.Put(backend.Roots, []byte("r4"), []byte("root r4")); err != nil {
			return err
		}
		if err := pf.Prefetch(prefetchAll); err != nil {
			return err
		}
		if n := b.trips.Load() - before; n != 1 {
			return fmt.Errorf("%d round trips after a write to the roots, want 1 (the roots read again)", n)
		}
		var keys []string
		if err := s.Scan(backend.Roots, nil, func(k, _ []byte) (bool, error) { keys = append(keys, string(k)); return true, nil }); err != nil {
			return err
		}
		if fmt.Sprint(keys) != "[r1 r2 r3 r4]" || b.trips.Load()-before != 1 {
			return fmt.Errorf("roots %v after %d round trips", keys, b.trips.Load()-before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A read longer than its first page reads the same rows after a Prefetch
// as without one — the page Prefetch read, then the pages after it — and
// makes one round trip fewer: the Prefetch read its first page as the call
// reads it.
func TestPrefetch_PagesPastTheFirst(t *testing.T) {
	b, _ := openBackend(t)
	const events, roots = 2*eventsPage + 5, 2*scanPage + 3
	err := b.Update(func(tx backend.Tx) error {
		s, err := tx.CreateSession("s")
		if err != nil {
			return err
		}
		for seq := uint64(1); seq <= events; seq++ {
			if err := s.PutEvent(seq, fmt.Appendf(nil, "event %d", seq)); err != nil {
				return err
			}
		}
		for i := range roots {
			if err := s.Put(backend.Roots, fmt.Appendf(nil, "r%03d", i), fmt.Appendf(nil, "root %d", i)); err != nil {
				return err
			}
		}
		return s.PutState([]byte("state"))
	})
	if err != nil {
		t.Fatal(err)
	}
	reads := []backend.Read{{Session: "s", From: 1, To: events}, {Session: "s", Table: backend.Roots, Scan: true}}
	// read returns what Events and Scan read of s, and the round trips
	// each made.
	read := func(prefetch bool) (got string, eventTrips, scanTrips int64) {
		err := b.View(func(tx backend.Tx) error {
			if prefetch {
				if err := tx.(backend.Prefetcher).Prefetch(reads); err != nil {
					return err
				}
			}
			s, err := tx.Session("s")
			if err != nil {
				return err
			}
			var out bytes.Buffer
			before := b.trips.Load()
			err = s.Events(1, events, func(seq uint64, v []byte) (bool, error) {
				fmt.Fprintf(&out, "%d %s\n", seq, v)
				return true, nil
			})
			if err != nil {
				return err
			}
			eventTrips = b.trips.Load() - before
			before = b.trips.Load()
			err = s.Scan(backend.Roots, nil, func(k, v []byte) (bool, error) {
				fmt.Fprintf(&out, "%s %s\n", k, v)
				return true, nil
			})
			scanTrips = b.trips.Load() - before
			got = out.String()
			return err
		})
		if err != nil {
			t.Fatalf("prefetch %v: %v", prefetch, err)
		}
		return got, eventTrips, scanTrips
	}
	want, wantEvents, wantScan := read(false)
	if n := strings.Count(want, "\n"); n != events+roots {
		t.Fatalf("%d rows read without a Prefetch, want %d", n, events+roots)
	}
	got, gotEvents, gotScan := read(true)
	if got != want {
		t.Errorf("after a Prefetch the reads differ:\n%s\nwithout:\n%s", got, want)
	}
	if gotEvents != wantEvents-1 || gotScan != wantScan-1 {
		t.Errorf("round trips of Events and Scan after a Prefetch %d and %d, without %d and %d: want one fewer each",
			gotEvents, gotScan, wantEvents, wantScan)
	}
}
