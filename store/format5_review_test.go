package store_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// patchPageID overwrites the id in the header of page pg of the file at
// path (closed): bbolt's FastCheck panics on it, the page walk refuses it.
func patchPageID(t *testing.T, path string, pg uint64, psize int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, pg+7), int64(pg)*int64(psize)); err != nil {
		t.Fatal(err)
	}
}

// sessionRoot returns the root page of session id's bucket in the closed
// file at path, and the page size.
func sessionRoot(t *testing.T, path, id string) (root uint64, psize int) {
	t.Helper()
	viewBolt(t, path, func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("s/" + id)).Root())
		psize = tx.DB().Info().PageSize
		return nil
	})
	return root, psize
}

// openFormat opens (creating it if needed) the file at path in format f,
// NoSync, with the given journal size.
func openFormat(t *testing.T, path string, f, journal int) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{Create: true, NoSync: true, Format: f, JournalEvents: journal})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestFormat5_WarmReadsNoUnwalkedPage: a bucket inside a cold session's
// open bucket, with a damaged page. The page walk does not go inside (the
// open bucket holds values), and warm deleting the open bucket would read
// it — a panic inside the write transaction, failing the whole group
// commit (a cycle there would recurse beyond guard). canWarm finds the
// bucket first: the small append goes to the session's own bucket, which
// stays cold, and the other session's append is unharmed.
func TestFormat5_WarmReadsNoUnwalkedPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 100)
	m := model4{}
	m.gen(t, db, "a", 10) // a run: cold, call-10 open
	m.gen(t, db, "b", 10)
	mustClose(t, db)
	editBolt(t, path, func(tx *bolt.Tx) error {
		zz, err := tx.Bucket([]byte("s/a")).Bucket([]byte("\xffopen")).CreateBucket([]byte("zz"))
		if err != nil {
			return err
		}
		return zz.Put([]byte("k"), bytes.Repeat([]byte("x"), 3000)) // a page of its own
	})
	var root uint64
	var psize int
	viewBolt(t, path, func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("s/a")).Bucket([]byte("\xffopen")).Bucket([]byte("zz")).Root())
		psize = tx.DB().Info().PageSize
		return nil
	})
	if root == 0 {
		t.Fatal("zz is inline")
	}
	patchPageID(t, path, root, psize)

	db = openFormat(t, path, 5, 100)
	defer mustClose(t, db)
	checkReads4(t, db, m) // a reads fine: the walk did not look inside
	res := store.WriteGroup(db,
		store.GroupWrite{Session: "b", Events: []tier.Event{ev("b small")}},
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a small: warms")}},
	)
	if res[0].Err != nil {
		t.Errorf("b's append failed with a's damage: %v", res[0].Err)
	}
	if res[1].Err != nil {
		t.Errorf("a's append: %v, want it in a's own bucket, a staying cold", res[1].Err)
	}
	mustClose(t, db)
	if c := readCold5(t, path, "a"); !c.state || c.numbered {
		t.Errorf("a turned hot over a bucket whose pages no walk checked")
	}
	db = openFormat(t, path, 5, 100)
}

// TestFormat5_DamagedSessionBucketDoesNotStopFolds: a damaged page in the
// bucket of a hot session with nothing in e. Its journal entries follow
// the head h recorded when it turned hot (coldHead): the fold does not read
// its bucket, and folds on as format 4 does.
func TestFormat5_DamagedSessionBucketDoesNotStopFolds(t *testing.T) {
	for _, f := range []int{4, 5} {
		t.Run(fmt.Sprint("format", f), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			db := openFormat(t, path, f, 100)
			m := model4{}
			m.gen(t, db, "a", 1) // small: journal (format 5: hot at once, nothing in e)
			m.gen(t, db, "b", 1)
			mustClose(t, db)
			root, psize := sessionRoot(t, path, "a")
			patchPageID(t, path, root, psize)

			db = openFormat(t, path, f, 4)
			defer mustClose(t, db)
			for range 12 {
				m.gen(t, db, "b", 1)
			}
			_, entries, _, err := store.JournalState(db)
			if err != nil {
				t.Fatal(err)
			}
			if entries >= 4 {
				t.Errorf("format %d: the journal never folds (%d entries): a's damaged bucket stops every fold", f, entries)
			}
		})
	}
}

// TestFormat5_DamagedNextNumber: meta's record of the next session number
// damaged to one in use. Format 4 finds the number's keys in h or e and
// refuses the new session. Format 5 gives numbers only to sessions turning
// hot, and its record carries a checksum (encodeNext): no session takes a
// number from it — new and cold sessions stay cold, appending in their own
// buckets whatever the size — and Verify reports the record.
func TestFormat5_DamagedNextNumber(t *testing.T) {
	for _, f := range []int{4, 5} {
		t.Run(fmt.Sprint("format", f), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			db := openFormat(t, path, f, 100)
			m := model4{}
			m.gen(t, db, "h", 1)  // small: hot, number 0
			m.gen(t, db, "a", 10) // a run: format 5 keeps a cold, without a number
			mustClose(t, db)
			editBolt(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("next"), []byte{0, 0, 0, 0}) // h's number
			})
			db = openFormat(t, path, f, 100)
			defer mustClose(t, db)
			if f == 4 {
				if _, err := db.Append("c", tier.Event{Kind: tier.KindUser, Text: "new"}); !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("format 4: a new session took h's number: %v", err)
				}
			} else {
				m.add(t, db, "c", tier.Event{Kind: tier.KindUser, Text: "new"}) // stays cold
			}
			m.add(t, db, "a", tier.Event{Kind: tier.KindUser, Text: "a small"}) // 4: a has its number; 5: stays cold
			m.gen(t, db, "a", 10)                                               // a run: no number needed
			m.gen(t, db, "h", 1)
			if f == 5 {
				m.gen(t, db, "r", 9) // a new session's run: cold, no number needed
			}
			checkReads4(t, db, m)
			if f == 5 {
				mustClose(t, db)
				for _, id := range []string{"a", "c", "r"} {
					if c := readCold5(t, path, id); !c.state || c.numbered {
						t.Errorf("format 5: %s took a number from a damaged record", id)
					}
				}
				if ps := verifyPath(t, path); !strings.Contains(fmt.Sprint(ps), "meta: next session number") {
					t.Errorf("Verify: %v", ps)
				}
				db = openFormat(t, path, f, 100)
			}
		})
	}
}

// TestFormat5_GroupWarmCommitFold: one group commit that warms a cold
// session, commits a compaction of it, appends again small and large, and
// folds — with ledger entries made while cold, in the journal, and in e:
// the ledger equals a replay of the raw log, and Verify is clean, before
// and after a reopen.
func TestFormat5_GroupWarmCommitFold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 3)
	evs := func(es ...tier.Event) []tier.Event {
		for i := range es {
			es[i].Time = t0.UnixNano()
		}
		return es
	}
	run := evs(
		tier.Event{Kind: tier.KindConstraint, Key: "policy", Text: policyText},
		tier.Event{Kind: tier.KindUser, Text: "u1"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash"},
		tier.Event{Kind: tier.KindArtifact, Key: "f.go", Text: "v1"},
		tier.Event{Kind: tier.KindRejected, Key: "x", Text: "slow"},
		tier.Event{Kind: tier.KindAssistant, Text: "a"},
		tier.Event{Kind: tier.KindUser, Text: "u2"},
		tier.Event{Kind: tier.KindAssistant, Text: "b"},
	)
	mustAppend(t, db, "x", run...) // cold
	p, err := db.PlanSpan("x", store.SpanPolicy{Events: 4}, 100000)
	if err != nil {
		t.Fatal(err)
	}
	res := store.WriteGroup(db,
		store.GroupWrite{Session: "x", Events: evs(tier.Event{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "y", Text: "boom"})},
		store.GroupWrite{Plan: p, Summary: store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}},
		store.GroupWrite{Session: "x", Events: evs(tier.Event{Kind: tier.KindWithdrawn, Key: "policy"}, tier.Event{Kind: tier.KindArtifact, Key: "f.go", Text: "v2"})},
		store.GroupWrite{Session: "new", Events: evs(tier.Event{Kind: tier.KindConstraint, Key: "k", Text: "kt"})},
		store.GroupWrite{Session: "x", Events: evs(tier.Event{Kind: tier.KindSuperseded, Key: "x", By: "z", Text: "replaced"}, tier.Event{Kind: tier.KindUser, Text: "u3"}, tier.Event{Kind: tier.KindUser, Text: "u4"},
			tier.Event{Kind: tier.KindUser, Text: "u5"}, tier.Event{Kind: tier.KindUser, Text: "u6"}, tier.Event{Kind: tier.KindUser, Text: "u7"}, tier.Event{Kind: tier.KindUser, Text: "u8"}, tier.Event{Kind: tier.KindConstraint, Key: "p2", Text: "t2"})},
	)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("write %d: %v", i, r.Err)
		}
	}
	mustAppend(t, db, "x", tier.Event{Kind: tier.KindRejected, Key: "f.go", Text: "bad"})
	for _, reopen := range []bool{false, true} {
		if reopen {
			mustClose(t, db)
			db = openFormat(t, path, 5, 3)
		}
		for _, id := range []string{"x", "new"} {
			var all []tier.Event
			if err := db.View(func(s *store.Snapshot) error {
				return s.Events(id, 1, 1<<40, func(e tier.Event) error { all = append(all, e); return nil })
			}); err != nil {
				t.Fatal(err)
			}
			l, err := ledgerIn(db, id)
			if err != nil {
				t.Fatal(err)
			}
			if d := l.Diff(replayLedger(t, all)); len(d) != 0 {
				t.Errorf("%s: ledger differs from replay: %v", id, d)
			}
		}
		rep, err := db.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Errorf("Verify: %v %v", rep.Problems, err)
		}
	}
	mustClose(t, db)
}

// TestFormat5_DamagedColdLeafDoesNotStopFolds: the newest cold event of a
// hot session with nothing in e damaged to an empty key, on a leaf the
// page walk reads only the header of. The fold takes the session's cold
// head from h and reads nothing of its bucket: appends to another session
// go on, folding.
func TestFormat5_DamagedColdLeafDoesNotStopFolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 100)
	m := model4{}
	m.gen(t, db, "a", 10) // cold: 1..10 in its bucket
	m.gen(t, db, "a", 1)  // hot: 11 in the journal, nothing in e
	m.gen(t, db, "b", 1)
	mustClose(t, db)
	root, psize := sessionRoot(t, path, "a")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, psize)
	if _, err := f.ReadAt(page, int64(root)*int64(psize)); err != nil {
		t.Fatal(err)
	}
	flags, count := binary.LittleEndian.Uint16(page[8:]), int(binary.LittleEndian.Uint16(page[10:]))
	if flags != 0x02 {
		t.Fatalf("s/a's root page is not a leaf (flags %#x)", flags)
	}
	off := 16 + (count-1)*16 + 8 // the last element's ksize
	if ks := binary.LittleEndian.Uint32(page[off:]); ks != 9 {
		t.Fatalf("last element's key is %d bytes, want an event's 9", ks)
	}
	if _, err := f.WriteAt([]byte{0, 0, 0, 0}, int64(root)*int64(psize)+int64(off)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	db = openFormat(t, path, 5, 4)
	defer mustClose(t, db)
	var errs []error
	for range 6 {
		if _, err := db.Append("b", tier.Event{Kind: tier.KindUser, Text: "b"}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) != 0 {
		t.Errorf("%d of 6 appends to b failed on a's damage, first: %v", len(errs), errs[0])
	}
}

// TestFormat5_BucketInsideOpenBucket: a bucket inside a cold session's
// open bucket (pages sound). Verify reports it; a small append, which
// would turn the session hot and move the bucket to h as an empty value,
// goes to the session's own bucket instead, and the ledger still reads.
func TestFormat5_BucketInsideOpenBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 100)
	m := model4{}
	m.gen(t, db, "a", 10)
	mustClose(t, db)
	editBolt(t, path, func(tx *bolt.Tx) error {
		_, err := tx.Bucket([]byte("s/a")).Bucket([]byte("\xffopen")).CreateBucket([]byte("zz"))
		return err
	})
	if ps := verifyPath(t, path); len(ps) == 0 {
		t.Errorf("Verify is clean with a bucket inside a's open bucket")
	}
	db = openFormat(t, path, 5, 100)
	if _, err := db.Append("a", tier.Event{Kind: tier.KindUser, Text: "warm"}); err != nil {
		t.Errorf("the small append: %v", err)
	}
	if _, err := ledgerIn(db, "a"); err != nil {
		t.Errorf("ledger: %v", err)
	}
	mustClose(t, db)
	if c := readCold5(t, path, "a"); !c.state || c.numbered {
		t.Errorf("a turned hot, moving a bucket into h")
	}
}

// TestFormat5_MissingIDKeyDoesNotStopFolds: TestFormat4_MissingIDKey's
// damage on format 5, a hot session with nothing in e whose id key is
// gone: the journal folds on.
func TestFormat5_MissingIDKeyDoesNotStopFolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := openFormat(t, path, 5, 100)
	m := model4{}
	m.gen(t, db, "a", 10)
	m.gen(t, db, "a", 1) // hot, nothing in e
	m.gen(t, db, "b", 1)
	mustClose(t, db)
	var num []byte
	viewBolt(t, path, func(tx *bolt.Tx) error {
		num = append([]byte(nil), tx.Bucket([]byte("s/a")).Get([]byte{0})...)
		return nil
	})
	editBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("e")).Delete(append(num, 0xFF, 0x00))
	})
	db = openFormat(t, path, 5, 4)
	for range 20 {
		m.gen(t, db, "a", 1)
		m.gen(t, db, "b", 1)
	}
	checkReads4(t, db, m)
	mustClose(t, db)
	if l := readLayout4(t, path); l.jseq > 8 {
		t.Errorf("journal sequence %d with JournalEvents 4: the journal never folds", l.jseq)
	}
}

// TestVerify_MarkerUnderAnotherKey: a damaged key in the markers bucket
// moves a marker to another id. Verify reports it (it read the record by
// its key and took the id the record holds, so it saw every marker), and
// a resume of the id the key now says is ErrCorrupt, not the other
// marker's frame. Found by the random damage test (format 5, 1 case in
// 4,052): Resume of the marker failed with "not found" while Verify was
// clean.
func TestVerify_MarkerUnderAnotherKey(t *testing.T) {
	for _, f := range []int{2, 5} {
		t.Run(fmt.Sprint("format", f), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			db := openFormat(t, path, f, 100)
			mustAppend(t, db, "s",
				tier.Event{Kind: tier.KindUser, Text: "go"},
				tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
				tier.Event{Kind: tier.KindUser, Text: "again"})
			p, err := db.PlanSpan("s", store.SpanPolicy{Events: 3}, 1000)
			if err != nil {
				t.Fatal(err)
			}
			res, err := db.Commit(p, store.Summary{Narrative: "x rejected", Claims: p.Required.Claims(), Summarizer: "test"})
			if err != nil {
				t.Fatal(err)
			}
			mustClose(t, db)
			id := res.Marker
			editBolt(t, path, func(tx *bolt.Tx) error {
				m := tx.Bucket([]byte("s/s")).Bucket([]byte("markers"))
				v := bytes.Clone(m.Get(binary.BigEndian.AppendUint64(nil, id)))
				if v == nil {
					return errors.Newf("no marker %d", id)
				}
				if err := m.Delete(binary.BigEndian.AppendUint64(nil, id)); err != nil {
					return err
				}
				return m.Put(binary.BigEndian.AppendUint64(nil, id+8), v)
			})
			if ps := verifyPath(t, path); !strings.Contains(fmt.Sprint(ps), fmt.Sprintf("record holds marker %d", id)) {
				t.Errorf("Verify: %v", ps)
			}
			db = openFormat(t, path, f, 100)
			defer mustClose(t, db)
			if _, err := db.Resume("s", id+8); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("Resume(%d): %v, want ErrCorrupt", id+8, err)
			}
		})
	}
}
