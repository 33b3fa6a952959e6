package boltfile

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

func TestTx_RoundTrip(t *testing.T) {
	b, _ := newDB(t)
	mustUpdate(t, b, func(tx backend.Tx) error {
		if !tx.Writable() {
			t.Error("a write transaction is not writable")
		}
		if s, err := tx.Session("a"); s != nil || err != nil {
			t.Errorf("Session of none = %v, %v", s, err)
		}
		s, err := tx.CreateSession("a")
		if err != nil {
			return err
		}
		if s.ID() != "a" {
			t.Errorf("ID = %q", s.ID())
		}
		if _, err := tx.CreateSession("a"); err == nil {
			t.Error("CreateSession of an existing session: no error")
		}
		if _, err := tx.CreateSession(""); err == nil {
			t.Error("CreateSession(\"\"): no error")
		}
		if v, err := s.State(); v != nil || err != nil {
			t.Errorf("State before PutState = %q, %v", v, err)
		}
		// The same transaction reads what it wrote, through another
		// Session value too.
		if err := s.PutState([]byte("st")); err != nil {
			return err
		}
		if err := s.PutEvent(1, []byte("one")); err != nil {
			return err
		}
		if err := s.Put(backend.Roots, u64(1), []byte("root 1")); err != nil {
			return err
		}
		s2 := mustSession(t, tx, "a")
		if v, err := s2.State(); string(v) != "st" || err != nil {
			t.Errorf("State = %q, %v", v, err)
		}
		if v, err := s2.Event(1); string(v) != "one" || err != nil {
			t.Errorf("Event(1) = %q, %v", v, err)
		}
		if v, err := s2.Get(backend.Roots, u64(1)); string(v) != "root 1" || err != nil {
			t.Errorf("Get = %q, %v", v, err)
		}
		_, err = tx.CreateSession("b")
		return err
	})
	mustView(t, b, func(tx backend.Tx) error {
		if tx.Writable() {
			t.Error("a read transaction is writable")
		}
		var ids []string
		if err := tx.Sessions(func(id string) error { ids = append(ids, id); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []string{"a", "b"}) {
			t.Errorf("Sessions = %q", ids)
		}
		s := mustSession(t, tx, "a")
		if v, err := s.State(); string(v) != "st" || err != nil {
			t.Errorf("State = %q, %v", v, err)
		}
		if v, err := s.Event(1); string(v) != "one" || err != nil {
			t.Errorf("Event(1) = %q, %v", v, err)
		}
		if v, err := s.Event(2); v != nil || err != nil {
			t.Errorf("Event(2) = %q, %v", v, err)
		}
		if v, err := s.Get(backend.Roots, u64(2)); v != nil || err != nil {
			t.Errorf("Get of none = %q, %v", v, err)
		}
		if _, err := s.Get(0, u64(1)); err == nil {
			t.Error("Get of table 0: no error")
		}
		if err := s.PutState([]byte("x")); err == nil {
			t.Error("PutState in a read transaction: no error")
		}
		if v, err := mustSession(t, tx, "b").State(); v != nil || err != nil {
			t.Errorf("b's State = %q, %v", v, err)
		}
		return nil
	})
	// fn's error rolls back.
	errStop := errors.New("stop")
	if err := b.Update(func(tx backend.Tx) error {
		if _, err := tx.CreateSession("c"); err != nil {
			return err
		}
		return errStop
	}); !errors.Is(err, errStop) {
		t.Fatalf("Update = %v", err)
	}
	mustView(t, b, func(tx backend.Tx) error {
		if s, err := tx.Session("c"); s != nil || err != nil {
			t.Errorf("a rolled back session: %v, %v", s, err)
		}
		return nil
	})
}

// Values are returned without their trailer and capped: an append to one
// copies instead of writing into bbolt's read-only map. A value passed with
// spare capacity takes the trailer there.
func TestTx_Values(t *testing.T) {
	b, _ := newDB(t)
	buf := make([]byte, 3, 64)
	copy(buf, "abc")
	mustUpdate(t, b, func(tx backend.Tx) error {
		s, err := tx.CreateSession("s")
		if err != nil {
			return err
		}
		if err := s.PutEvent(1, buf); err != nil {
			return err
		}
		return s.Put(backend.Nodes, u64(1), nil) // an empty record
	})
	mustView(t, b, func(tx backend.Tx) error {
		s := mustSession(t, tx, "s")
		v, err := s.Event(1)
		if err != nil || string(v) != "abc" || cap(v) != len(v) {
			t.Fatalf("Event = %q (cap %d), %v", v, cap(v), err)
		}
		v = append(v, 'd') // must not fault
		if string(v) != "abcd" {
			t.Errorf("append = %q", v)
		}
		if v, err := s.Get(backend.Nodes, u64(1)); err != nil || v == nil || len(v) != 0 {
			t.Errorf("empty record = %q (nil %v), %v", v, v == nil, err)
		}
		return nil
	})
}

// TestTx_Ranges checks Scan, Last and Events against a model, on tables
// large enough to have branch pages, across commits, and in transactions
// that delete from the table they then read.
func TestTx_Ranges(t *testing.T) {
	b, _ := newDB(t)
	rng := rand.New(rand.NewSource(1))
	model := map[string]string{}
	const n = 3000
	fill(t, b, "s", n, 0)
	val := func(k []byte, gen int) string { return fmt.Sprintf("%x gen %d %060d", k, gen, gen) }
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := 0; round < rounds; round++ {
		mustUpdate(t, b, func(tx backend.Tx) error {
			s := mustSession(t, tx, "s")
			for i := 0; i < 400; i++ {
				k := u64(uint64(rng.Intn(2000)))
				if rng.Intn(3) == 0 {
					if err := s.Delete(backend.Nodes, k); err != nil {
						return err
					}
					delete(model, string(k))
					continue
				}
				v := val(k, round*1000+i)
				if err := s.Put(backend.Nodes, k, []byte(v)); err != nil {
					return err
				}
				model[string(k)] = v
			}
			// Read in the same transaction (it deleted) and after.
			checkRanges(t, s, model, rng)
			return nil
		})
		mustView(t, b, func(tx backend.Tx) error {
			checkRanges(t, mustSession(t, tx, "s"), model, rng)
			return nil
		})
	}
	mustView(t, b, func(tx backend.Tx) error {
		s := mustSession(t, tx, "s")
		for _, r := range [][2]uint64{{1, n}, {0, 5}, {n - 3, n + 10}, {7, 7}, {100, 2000}, {n + 1, n + 5}, {9, 8}} {
			var got []uint64
			err := s.Events(r[0], r[1], func(seq uint64, v []byte) (bool, error) {
				if !bytes.Equal(v, eventText("s", seq)) {
					t.Errorf("event %d = %q", seq, v)
				}
				got = append(got, seq)
				return true, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var want []uint64
			for seq := max(r[0], 1); seq <= min(r[1], n); seq++ {
				want = append(want, seq)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Events(%d, %d) = %d events %v…, want %d", r[0], r[1], len(got), got[:min(len(got), 3)], len(want))
			}
		}
		// Stopping early.
		var got []uint64
		if err := s.Events(10, n, func(seq uint64, _ []byte) (bool, error) {
			got = append(got, seq)
			return len(got) < 3, nil
		}); err != nil || !slices.Equal(got, []uint64{10, 11, 12}) {
			t.Errorf("Events stopped early = %v, %v", got, err)
		}
		errStop := errors.New("stop")
		if err := s.Events(1, n, func(uint64, []byte) (bool, error) { return true, errStop }); !errors.Is(err, errStop) {
			t.Errorf("Events = %v, want fn's error", err)
		}
		return nil
	})
}

func checkRanges(t *testing.T, s backend.Session, model map[string]string, rng *rand.Rand) {
	t.Helper()
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Scan all.
	var got []string
	if err := s.Scan(backend.Nodes, nil, func(k, v []byte) (bool, error) {
		if string(v) != model[string(k)] {
			t.Fatalf("Scan: %x = %q, want %q", k, v, model[string(k)])
		}
		got = append(got, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("Scan found %d keys, want %d", len(got), len(keys))
	}
	for i := 0; i < 20; i++ {
		from := u64(uint64(rng.Intn(2100)))
		// Scan from, a few.
		want := keys[sort.SearchStrings(keys, string(from)):]
		want = want[:min(len(want), 5)]
		got = got[:0]
		if err := s.Scan(backend.Nodes, from, func(k, _ []byte) (bool, error) {
			got = append(got, string(k))
			return len(got) < 5, nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Scan from %x = %x, want %x", from, got, want)
		}
		// Last below from.
		k, v, err := s.Last(backend.Nodes, from)
		if err != nil {
			t.Fatal(err)
		}
		j := sort.SearchStrings(keys, string(from))
		switch {
		case j == 0 && k != nil:
			t.Fatalf("Last below %x = %x, want none", from, k)
		case j > 0 && (string(k) != keys[j-1] || string(v) != model[keys[j-1]]):
			t.Fatalf("Last below %x = %x, want %x", from, k, keys[j-1])
		}
	}
	k, _, err := s.Last(backend.Nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 && string(k) != keys[len(keys)-1] || len(keys) == 0 && k != nil {
		t.Fatalf("Last = %x", k)
	}
	if k, _, err := s.Last(backend.Nodes, u64(0)); k != nil || err != nil {
		t.Fatalf("Last below 0 = %x, %v", k, err)
	}
}

// Tables are separate, and so are sessions; an empty table scans empty.
func TestTx_Tables(t *testing.T) {
	b, _ := newDB(t)
	mustUpdate(t, b, func(tx backend.Tx) error {
		for _, id := range []string{"x", "y"} {
			s, err := tx.CreateSession(id)
			if err != nil {
				return err
			}
			for tb := backend.Table(1); tb < backend.Tables; tb++ {
				if err := s.Put(tb, []byte("k"), []byte(id+" "+tb.String())); err != nil {
					return err
				}
			}
		}
		return nil
	})
	mustView(t, b, func(tx backend.Tx) error {
		for _, id := range []string{"x", "y"} {
			s := mustSession(t, tx, id)
			for tb := backend.Table(1); tb < backend.Tables; tb++ {
				if v, err := s.Get(tb, []byte("k")); err != nil || string(v) != id+" "+tb.String() {
					t.Errorf("%s %s = %q, %v", id, tb, v, err)
				}
			}
		}
		return nil
	})
	mustUpdate(t, b, func(tx backend.Tx) error {
		s := mustSession(t, tx, "x")
		if err := s.Delete(backend.Audit, []byte("k")); err != nil {
			return err
		}
		if err := s.Delete(backend.Audit, []byte("none")); err != nil {
			t.Errorf("Delete of a missing key: %v", err)
		}
		n := 0
		if err := s.Scan(backend.Audit, nil, func([]byte, []byte) (bool, error) { n++; return true, nil }); err != nil || n != 0 {
			t.Errorf("Scan of an emptied table: %d, %v", n, err)
		}
		if k, _, err := s.Last(backend.Audit, nil); k != nil || err != nil {
			t.Errorf("Last of an emptied table: %q, %v", k, err)
		}
		return nil
	})
}

// The same transaction reads a session it created, many records of it.
func TestTx_FreshSessionRanges(t *testing.T) {
	b, _ := newDB(t)
	mustUpdate(t, b, func(tx backend.Tx) error {
		s, err := tx.CreateSession("new")
		if err != nil {
			return err
		}
		for i := uint64(1); i <= 500; i++ {
			if err := s.PutEvent(i, eventText("new", i)); err != nil {
				return err
			}
			if err := s.Put(backend.Markers, u64(i), []byte("m")); err != nil {
				return err
			}
		}
		n := 0
		if err := s.Events(1, 500, func(uint64, []byte) (bool, error) { n++; return true, nil }); err != nil || n != 500 {
			t.Errorf("Events: %d, %v", n, err)
		}
		if k, _, err := s.Last(backend.Markers, u64(300)); err != nil || !bytes.Equal(k, u64(299)) {
			t.Errorf("Last = %x, %v", k, err)
		}
		return nil
	})
}

// Sessions lists many (the root bucket of many pages), in byte order,
// with those a write transaction made in it.
func TestTx_ManySessions(t *testing.T) {
	b, _ := newDB(t)
	var want []string
	mustUpdate(t, b, func(tx backend.Tx) error {
		for i := 0; i < 600; i += 2 {
			id := fmt.Sprintf("a session with a long name %04d", i)
			want = append(want, id)
			if _, err := tx.CreateSession(id); err != nil {
				return err
			}
		}
		return nil
	})
	list := func(tx backend.Tx) []string {
		var ids []string
		if err := tx.Sessions(func(id string) error { ids = append(ids, id); return nil }); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	mustView(t, b, func(tx backend.Tx) error {
		if got := list(tx); !slices.Equal(got, want) {
			t.Errorf("Sessions: %d, want %d", len(got), len(want))
		}
		return nil
	})
	mustUpdate(t, b, func(tx backend.Tx) error {
		for i := 1; i < 600; i += 50 {
			id := fmt.Sprintf("a session with a long name %04d", i)
			want = append(want, id)
			if _, err := tx.CreateSession(id); err != nil {
				return err
			}
		}
		sort.Strings(want)
		if got := list(tx); !slices.Equal(got, want) {
			t.Errorf("Sessions in the write: %d, want %d", len(got), len(want))
		}
		return nil
	})
	mustView(t, b, func(tx backend.Tx) error {
		if got := list(tx); !slices.Equal(got, want) {
			t.Errorf("Sessions after: %d, want %d", len(got), len(want))
		}
		return nil
	})
}

// Readers beside a writer: each reads a consistent state (the race
// detector watches the page cache shared between them).
func TestTx_Concurrent(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	b, _ := newDB(t)
	fill(t, b, "s", 1000, 100)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				err := b.View(func(tx backend.Tx) error {
					s, err := tx.Session("s")
					if err != nil {
						return err
					}
					st, err := s.State()
					if err != nil {
						return err
					}
					var head uint64
					fmt.Sscan(string(st), &head)
					n := uint64(0)
					if err := s.Events(1, ^uint64(0), func(seq uint64, _ []byte) (bool, error) { n = seq; return true, nil }); err != nil {
						return err
					}
					if head != 0 && n != head {
						return fmt.Errorf("state says head %d, the events end at %d", head, n)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for seq := uint64(1001); seq <= 1200; seq++ {
		mustUpdate(t, b, func(tx backend.Tx) error {
			s := mustSession(t, tx, "s")
			if err := s.PutEvent(seq, eventText("s", seq)); err != nil {
				return err
			}
			if err := s.Delete(backend.Nodes, u64(seq-1000)); err != nil {
				return err
			}
			return s.PutState([]byte(fmt.Sprint(seq)))
		})
	}
	close(done)
	for r := 0; r < 3; r++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The first reads of a long session — its state, its newest events, its
// last node — check a few of its pages, not all of them: what the handle
// checked is its page cache.
func TestTx_ReadsWalkWhatTheyRead(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	b, path := newDB(t)
	const n = 20000
	fill(t, b, "s", n, 2000)
	b.Close()
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pages := func() int {
		c := b.cache.Load()
		c.mu.RLock()
		defer c.mu.RUnlock()
		return len(c.ok)
	}
	atOpen := pages()
	var total int64
	mustView(t, b, func(tx backend.Tx) error {
		total = tx.(backend.Snapshotter).Size() / int64(os.Getpagesize())
		s := mustSession(t, tx, "s")
		if _, err := s.State(); err != nil {
			return err
		}
		k, _, err := s.Last(backend.Nodes, nil)
		if err != nil || !bytes.Equal(k, u64(2000)) {
			t.Fatalf("Last = %x, %v", k, err)
		}
		return s.Events(n-100, n, func(uint64, []byte) (bool, error) { return true, nil })
	})
	if got := pages() - atOpen; got > 30 || total < 500 {
		t.Errorf("the reads checked %d pages of %d", got, total)
	}
	t.Logf("Open checked %d pages, the reads %d more, of %d", atOpen, pages()-atOpen, total)
}
