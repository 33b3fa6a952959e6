package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	crdb "github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestFormat4_FoldChecksEntryHeaders: the 12-byte header of a journal
// entry (session number, seq) is outside the record's checksum. A damaged
// header must not make the fold write an entry over an intact event — of
// another session (which would then read back another session's event
// without an error) or of its own: the fold checks that each session's
// entries run from the seq after its last event in e up to its head, and
// folds nothing otherwise; Verify names the damage.
//
// fixture4: a (0) 1..8 in e, 9, 10 in j (keys 2, 4); b (1) 1..3 in j
// (keys 1, 3, 5); c (2) 1..8 in e.
func TestFormat4_FoldChecksEntryHeaders(t *testing.T) {
	setHeader := func(g uint64, num *uint32, seq *uint64) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			j := tx.Bucket([]byte("j"))
			v := append([]byte(nil), j.Get(seqKey(g))...)
			if num != nil {
				binary.BigEndian.PutUint32(v, *num)
			}
			if seq != nil {
				binary.BigEndian.PutUint64(v[4:], *seq)
			}
			return j.Put(seqKey(g), v)
		}
	}
	two, three := uint32(2), uint64(3)

	t.Run("another session's event", func(t *testing.T) {
		path, m := fixture4(t)
		// b's entry (key 1, b seq 1) now names session c (number 2).
		editBolt(t, path, setHeader(1, &two, nil))
		db := open4(t, path, 4)
		// Before the fold, c reads back right.
		readOrCorrupt(t, db, m, "c")
		m.gen(t, db, "a", 1) // the commit would fold (sequence 5 >= 4)
		if err := readOrCorrupt(t, db, m, "c"); err != nil {
			t.Errorf("c, whose events are all in e, no longer reads: %v", err)
		}
		mustClose(t, db)
		if l := readLayout4(t, path); l.jseq < 5 {
			t.Errorf("the journal folded (sequence %d) with an entry out of its session's run", l.jseq)
		}
		var forC []string
		for _, p := range verifyPath(t, path) {
			if p.Session == "c" || strings.Contains(p.What, `"c"`) {
				forC = append(forC, p.String())
			}
		}
		if len(forC) == 0 {
			t.Errorf("Verify names no problem of session c, whose event 1 the fold replaced")
		}
	})

	t.Run("the same session's older event", func(t *testing.T) {
		path, m := fixture4(t)
		// a's entry (key 2, a seq 9) now says seq 3.
		editBolt(t, path, setHeader(2, nil, &three))
		db := open4(t, path, 4)
		// Before the fold, a's events 1..8 read back intact.
		err := db.View(func(s *store.Snapshot) error {
			return s.Events("a", 1, 8, func(tier.Event) error { return nil })
		})
		if err != nil {
			t.Fatalf("before the fold, a's 1..8: %v", err)
		}
		m.gen(t, db, "b", 1) // folds
		err = db.View(func(s *store.Snapshot) error {
			return s.Events("a", 1, 8, func(tier.Event) error { return nil })
		})
		if err != nil {
			t.Errorf("after the fold, a's intact events 1..8 are lost: %v", err)
		}
		mustClose(t, db)
	})
}

// TestFormat4_DamagedPointerDoesNotStopAppends: a hot-bucket key <n> 0x01
// whose leaf element says "bucket" (one bit) reads as absent, and a Delete
// or Put of it fails. The fold checks every pointer it would delete and
// folds nothing, so the other sessions' appends — straight to e, to the
// journal, of new sessions — go on.
func TestFormat4_DamagedPointerDoesNotStopAppends(t *testing.T) {
	path, _ := fixture4(t)
	editBolt(t, path, pointerAsBucket)
	db := open4(t, path, 4)
	defer db.Close()
	failed := 0
	for _, a := range []struct {
		id string
		n  int
	}{{"c", 8}, {"c", 8}, {"new", 8}, {"new2", 1}, {"b", 1}} {
		evs := make([]tier.Event, a.n)
		for i := range evs {
			evs[i] = tier.Event{Kind: tier.KindUser, Text: "x"}
		}
		if _, err := db.Append(a.id, evs...); err != nil {
			failed++
			t.Logf("Append(%q, %d events): %v (ErrCorrupt: %v)", a.id, a.n, err, errors.Is(err, store.ErrCorrupt))
		}
	}
	if failed > 0 {
		t.Errorf("%d of 5 appends failed: the fold's error fails every commit", failed)
	}
}

// TestFormat4_MissingIDKey: a session's id key in e (<n> 0xFF 0x00) gone
// — as a leaf whose element count lost a bit drops its last key — is
// reported by Verify, and does not stop the journal from folding (the
// fold asks the hot bucket whether the session is there).
func TestFormat4_MissingIDKey(t *testing.T) {
	path, m := fixture4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("e")).Delete(key3(0, []byte{0xFF, 0x00})) // a's id
	})
	found := false
	for _, p := range verifyPath(t, path) {
		found = found || strings.Contains(p.What, `session "a" has no id key`)
	}
	if !found {
		t.Errorf("Verify does not report a's missing id key")
	}
	db := open4(t, path, 4)
	for range 20 {
		m.gen(t, db, "a", 1)
		m.gen(t, db, "b", 1)
	}
	checkReads4(t, db, m)
	mustClose(t, db)
	l := readLayout4(t, path)
	if l.jseq > 8 {
		t.Errorf("journal sequence %d with JournalEvents 4: the journal never folds", l.jseq)
	}
	if ps := verifyPath(t, path); len(ps) == 0 {
		t.Errorf("Verify is clean, and the journal cannot fold")
	}
}

// TestFormat4_SequenceBelowTheLastKey: the journal's sequence (in j's
// bucket header, in the root's leaf) damaged below its last key would make
// the next append write over an entry. The append raises the sequence to
// the last key first: every small append goes on, with the default
// journal too, where the sequence is far below a fold.
func TestFormat4_SequenceBelowTheLastKey(t *testing.T) {
	path, m := fixture4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("j")).SetSequence(3) // last key is 5
	})
	db := open4(t, path, 0) // DefaultJournalEvents
	defer db.Close()
	m.gen(t, db, "c", 8) // straight to e: accepted, and its commit does not fold
	refused := 0
	for i := range 50 {
		for _, id := range []string{"a", "b", "c", "new"} {
			if _, err := db.Append(id, tier.Event{Kind: tier.KindUser, Text: "x"}); err != nil {
				if i == 0 {
					t.Logf("Append(%q): %v", id, err)
				}
				refused++
			}
		}
	}
	if refused > 0 {
		t.Errorf("%d of 200 small appends refused, and nothing ever repairs the journal", refused)
	}
}

// TestFormat4_DamagedPointerFailsItsAppendAlone: with a's pointer
// <0> 0x01 holding a bucket, a's append is refused as damaged before it
// writes (a Put there would fail half-way and roll back the whole group
// commit), and b's append in the same commit goes in.
func TestFormat4_DamagedPointerFailsItsAppendAlone(t *testing.T) {
	path, _ := fixture4(t)
	editBolt(t, path, pointerAsBucket)
	db := open4(t, path, 100)
	defer db.Close()
	now := int64(1)
	res := store.WriteGroup(db,
		store.GroupWrite{Session: "b", Events: []tier.Event{{Kind: tier.KindUser, Text: "b", Time: now}}},
		store.GroupWrite{Session: "a", Events: []tier.Event{{Kind: tier.KindUser, Text: "a", Time: now}}},
	)
	if res[0].Err != nil {
		t.Errorf("b's append failed with a's damage: %v (a's: %v)", res[0].Err, res[1].Err)
	}
	if !errors.Is(res[1].Err, store.ErrCorrupt) {
		t.Errorf("a's append = %v, want ErrCorrupt", res[1].Err)
	}
}

// TestFormat4_NextNumberLeftoverInHot: format 4 keeps the state, the
// journal pointer and the open calls in h. A leftover key of meta's next
// number there (here an open call copied from a's) would become part of a
// new session's ledger; making the session refuses the number as in use.
func TestFormat4_NextNumberLeftoverInHot(t *testing.T) {
	path, _ := fixture4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		h := tx.Bucket([]byte("h"))
		v := append([]byte(nil), h.Get(key3(0, []byte("ocall-10")))...)
		if v == nil {
			t.Fatalf("fixture: a has no open call-10")
		}
		return h.Put(key3(3, []byte("ocall-10")), v) // 3: meta's next number
	})
	db := open4(t, path, 100)
	defer db.Close()
	_, err := db.Append("d", tier.Event{Kind: tier.KindUser, Text: "hello"})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "next session number 3 is in use") {
		t.Fatalf("first append to d = %v, want ErrCorrupt: the number is in use", err)
	}
	// The other sessions go on.
	if _, err := db.Append("a", tier.Event{Kind: tier.KindUser, Text: "still here"}); err != nil {
		t.Errorf("append to a: %v", err)
	}
}

// TestFormat4_DeletedPointerHeals: a's journal pointer <0> 0x01 lost (one
// key of h) makes a's newest events unreadable ("event missing"); its
// entries are all in their run, so the next fold moves them to e and drops
// the pointers: a reads whole again, and the journal goes on folding.
func TestFormat4_DeletedPointerHeals(t *testing.T) {
	path, m := fixture4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("h")).Delete(key3(0, []byte{1}))
	})
	db := open4(t, path, 4)
	for range 30 {
		m.gen(t, db, "b", 1)
		m.gen(t, db, "c", 1)
	}
	var got []tier.Event
	err := db.View(func(s *store.Snapshot) error {
		return s.Events("a", 1, uint64(len(m["a"])), func(e tier.Event) error {
			got = append(got, e)
			return nil
		})
	})
	mustClose(t, db)
	if err != nil {
		t.Errorf("a's events 1..10 after 60 appends to other sessions: %v", err)
	} else if d := sameEvents(got, m["a"]); d != "" {
		t.Errorf("a reads back wrong: %s", d)
	}
	if l := readLayout4(t, path); l.jseq > 8 {
		t.Errorf("journal sequence %d with JournalEvents 4: nothing folds again", l.jseq)
	}
	if ps := verifyPath(t, path); len(ps) != 0 {
		t.Errorf("Verify after the folds: %v", ps)
	}
}

// TestFormat4_SequenceAtTheTop: the journal's sequence damaged to the top
// of uint64 (eight 0xFF bytes in j's bucket header) would make the next
// key wrap round to 0, 1, 2 — over other sessions' entries, or before the
// appending session's own first entry, where its reads never look. Verify
// reports it; an append sets the sequence back to the last key first, so
// every append goes on and every session reads back whole.
// fixture4: a 9, 10 at keys 2, 4; b 1..3 at keys 1, 3, 5.
func TestFormat4_SequenceAtTheTop(t *testing.T) {
	for _, id := range []string{"c", "a"} { // c: no entries yet; a: entries before
		t.Run(id, func(t *testing.T) {
			path, m := fixture4(t)
			editBolt(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("j")).SetSequence(^uint64(0))
			})
			found := false
			for _, p := range verifyPath(t, path) {
				found = found || strings.Contains(p.What, "journal: sequence 18446744073709551615 is past any a journal reaches")
			}
			if !found {
				t.Errorf("Verify does not report the sequence")
			}
			db := open4(t, path, 100)
			m.gen(t, db, id, 3) // small: to the journal
			checkReads4(t, db, m)
			mustClose(t, db)
			if l := readLayout4(t, path); l.jseq != 8 {
				t.Errorf("journal sequence %d after the append, want 8 (5 and 3 more)", l.jseq)
			}
		})
	}
}

// TestFormat4_LastKeyAtTheTop: a journal key damaged to the top of uint64
// (b's seq 3 moved from key 5): no key is left after it for an append, so
// an append to the journal fails alone with ErrCorrupt, and nothing is
// written over; the undamaged sessions read back whole.
func TestFormat4_LastKeyAtTheTop(t *testing.T) {
	path, m := fixture4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		j := tx.Bucket([]byte("j"))
		v := append([]byte(nil), j.Get(seqKey(5))...)
		if err := j.Delete(seqKey(5)); err != nil {
			return err
		}
		return j.Put(seqKey(^uint64(0)), v)
	})
	db := open4(t, path, 100)
	_, err := db.Append("c", gen4("c", 9), gen4("c", 10), gen4("c", 11))
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "last key past any a journal reaches") {
		t.Errorf("append to c = %v, want ErrCorrupt naming the last key", err)
	}
	delete(m, "b") // its seq 3 is the damaged entry: read to 2 below
	checkReads4(t, db, m)
	mustClose(t, db)
	if l := readLayout4(t, path); len(l.journal) != 5 {
		t.Errorf("%d journal entries after the refused append, want 5", len(l.journal))
	}
}

// TestCorruptError_Is: errors.Is(err, ErrCorrupt) holds for a
// *CorruptError with the standard library's errors as with
// cockroachdb/errors, also wrapped; errors.As finds it.
func TestCorruptError_Is(t *testing.T) {
	path, _ := fixture4(t)
	editBolt(t, path, pointerAsBucket)
	db := open4(t, path, 100)
	defer db.Close()
	_, err := db.Append("a", tier.Event{Kind: tier.KindUser, Text: "x"})
	for _, e := range []error{err, fmt.Errorf("outer: %w", err)} {
		if !errors.Is(e, store.ErrCorrupt) || !crdb.Is(e, store.ErrCorrupt) {
			t.Errorf("errors.Is(%v, ErrCorrupt): std %v, cockroachdb %v", e, errors.Is(e, store.ErrCorrupt), crdb.Is(e, store.ErrCorrupt))
		}
		var ce *store.CorruptError
		if !errors.As(e, &ce) || ce.Session != "a" {
			t.Errorf("errors.As(%v) = %v", e, ce)
		}
	}
}

// pointerAsBucket damages fixture4's file: a's journal pointer <0> 0x01
// holds a bucket (its leaf element's flags say so: one bit), which a Get
// reads as absent and a Put or Delete refuses.
func pointerAsBucket(tx *bolt.Tx) error {
	h := tx.Bucket([]byte("h"))
	if err := h.Delete(key3(0, []byte{1})); err != nil {
		return err
	}
	_, err := h.CreateBucket(key3(0, []byte{1}))
	return err
}
