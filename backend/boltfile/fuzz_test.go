package boltfile

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/strata-go/strata/backend"
)

// TestDamage_RandomBytes flips random bytes of a database file — and in
// every other file, points a branch element at a random page — and reads
// and writes everything it can: any error is allowed, a hang or a crash is
// not (the test binary would die). BOLTFILE_FLIPS sets how many damaged
// files (default 12).
func TestDamage_RandomBytes(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	files := 12
	if v, err := strconv.Atoi(os.Getenv("BOLTFILE_FLIPS")); err == nil {
		files = v
	}
	if testing.Short() {
		files = 4
	}
	b, clean := newDB(t)
	fill(t, b, "s", 6000, 3000)
	fill(t, b, "t", 20, 20)
	mustUpdate(t, b, func(tx backend.Tx) error {
		s := mustSession(t, tx, "s")
		for i := uint64(1); i <= 3000; i += 3 {
			if err := s.Delete(backend.Nodes, u64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	b.Close()
	raw, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(int64(files)))
	dir := t.TempDir()
	opened, failed := 0, 0
	defer func() { t.Logf("%d damaged files: %d opens, %d reads and writes that failed", files, opened, failed) }()
	ps := os.Getpagesize()
	var branches []int // the branch pages the file's buckets reach
	b, err = Open(clean, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	mustView(t, b, func(tx backend.Tx) error {
		c := &checker{t: tx.(*viewTx).tx, report: func(s, what string) { t.Fatal(s, what) }}
		c.pages()
		for pg := 2; pg < len(raw)/ps; pg++ {
			if c.seen[pg/64]&(1<<(pg%64)) != 0 && le16(raw[pg*ps+8:]) == branchFlag {
				branches = append(branches, pg)
			}
		}
		return nil
	})
	b.Close()
	if len(branches) < 4 {
		t.Fatalf("%d branch pages", len(branches))
	}
	for i := 0; i < files; i++ {
		damaged := append([]byte(nil), raw...)
		if i%2 == 1 {
			// A child id of a branch page pointing anywhere in the file:
			// at an ancestor, another bucket's page, a free one.
			pg := branches[rng.Intn(len(branches))]
			n := le16(raw[pg*ps+10:])
			off := pg*ps + pageHeader + rng.Intn(n)*elementSize + 8
			binary.LittleEndian.PutUint64(damaged[off:], uint64(2+rng.Intn(len(raw)/ps-2)))
		}
		for n := rng.Intn(4); n > 0; n-- {
			// Mostly page headers and element tables, where a flip
			// changes the graph; some anywhere.
			pg := 2 + rng.Intn(len(raw)/ps-2)
			off := pg*ps + rng.Intn(16+16*8)
			if rng.Intn(3) == 0 {
				off = pg*ps + rng.Intn(ps)
			}
			damaged[off] ^= byte(1 << rng.Intn(8))
		}
		path := filepath.Join(dir, strconv.Itoa(i)+".db")
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = within(t, "reads of "+path, func() error {
			o, e := readEverything(path)
			opened += o
			failed += e
			return nil
		})
		os.Remove(path)
	}
}

// readEverything reads all it can of the file at path, then writes to it
// and checks it; it counts the opens that succeeded and the operations that
// failed.
func readEverything(path string) (opened, failed int) {
	count := func(err error) {
		if err != nil {
			failed++
		}
	}
	for _, ro := range []bool{true, false} {
		b, err := Open(path, Options{ReadOnly: ro, NoSync: true})
		if err != nil {
			return opened, failed
		}
		opened++
		var ids []string
		_ = b.View(func(tx backend.Tx) error {
			count(tx.Sessions(func(id string) error { ids = append(ids, id); return nil }))
			for _, id := range ids {
				s, err := tx.Session(id)
				if count(err); err != nil || s == nil {
					continue
				}
				_, err = s.State()
				count(err)
				count(s.Events(0, ^uint64(0), func(uint64, []byte) (bool, error) { return true, nil }))
				_, err = s.Event(1500)
				count(err)
				for tb := backend.Table(1); tb < backend.Tables; tb++ {
					count(s.Scan(tb, nil, func([]byte, []byte) (bool, error) { return true, nil }))
					_, _, err = s.Last(tb, nil)
					count(err)
					_, _, err = s.Last(tb, u64(400))
					count(err)
					_, err = s.Get(tb, u64(401))
					count(err)
				}
			}
			_, _ = b.Check(tx, func(string, string) {})
			return nil
		})
		if !ro {
			for _, id := range ids {
				count(b.Update(func(tx backend.Tx) error {
					s, err := tx.Session(id)
					if err != nil || s == nil {
						return err
					}
					if err := s.PutEvent(5000, []byte("more")); err != nil {
						return err
					}
					for k := uint64(398); k < 404; k++ {
						if err := s.Delete(backend.Nodes, u64(k)); err != nil {
							return err
						}
					}
					if err := s.Put(backend.Roots, u64(7), []byte("r")); err != nil {
						return err
					}
					return s.Scan(backend.Nodes, nil, func([]byte, []byte) (bool, error) { return true, nil })
				}))
			}
			_ = b.View(func(tx backend.Tx) error { _, _ = b.Check(tx, func(string, string) {}); return nil })
		}
		b.Close()
	}
	return opened, failed
}
