package store_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// record returns the path of the bucket (from the root) and the key in the
// file of the record at key of session's bucket sub, and how many bytes of
// the value come before the record. In format 2 the events ("l0": key 0xFE
// seq), the state ("" and "state": key 0xFF) and the open calls (bucket
// "\xffopen") are in the session's bucket "s/"+session; in format 3 they
// are in the events bucket "e" under the session's number (key 0x00 of its
// bucket); in format 4 the state and open calls are in the hot bucket "h"
// under the number, and an event is in "e" once folded, or in the journal
// "j" (behind its session number and seq) before; in format 5 a cold
// session's are where format 2 puts them, and a hot one's as in format 4,
// but for the events it was appended while cold, in its own bucket. The
// rest is in the session's bucket either way.
func record(t *testing.T, tx *bolt.Tx, session, sub string, key []byte) (path []string, fileKey []byte, off int) {
	t.Helper()
	sb := "s/" + session
	b := tx.Bucket([]byte(sb))
	if b == nil {
		t.Fatalf("session %q not found in the file", session)
	}
	hot, prefix := []string{sb}, []byte(nil) // format 2
	if num := b.Get([]byte{0}); num != nil {
		if len(num) != 4 || tx.Bucket([]byte("e")) == nil {
			t.Fatalf("session %q: number %x, events bucket %v", session, num, tx.Bucket([]byte("e")) != nil)
		}
		hot, prefix = []string{"e"}, bytes.Clone(num)
		if b.Get([]byte{0xFF}) != nil {
			// Format 5, a cold session: everything in its bucket, as in
			// format 2.
			hot, prefix = []string{sb}, nil
		}
	}
	under := func(suffix ...byte) []byte {
		return append(append(bytes.Clone(prefix), suffix...), key...)
	}
	if tx.Bucket([]byte("h")) != nil && prefix != nil { // format 4
		switch {
		case sub == "l0":
			if k := append([]byte{0xFE}, key...); b.Get(k) != nil {
				return []string{sb}, k, 0 // format 5: appended while cold
			}
			if k := under(0xFE); tx.Bucket([]byte("e")).Get(k) != nil {
				return hot, k, 0
			}
			c := tx.Bucket([]byte("j")).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if len(v) >= 12 && bytes.Equal(v[:4], prefix) && bytes.Equal(v[4:12], key) {
					return []string{"j"}, bytes.Clone(k), 12
				}
			}
			return hot, under(0xFE), 0 // absent: a Put adds it to e
		case sub == "" && string(key) == "state":
			return []string{"h"}, append(bytes.Clone(prefix), 0x00), 0
		case sub == "open":
			return []string{"h"}, under('o'), 0
		}
	}
	switch {
	case sub == "l0":
		return hot, under(0xFE), 0
	case sub == "" && string(key) == "state":
		return hot, append(bytes.Clone(prefix), 0xFF), 0
	case sub == "open" && prefix != nil:
		return hot, under(0xFF, 'o'), 0
	case sub == "open":
		sub = "\xffopen"
	case sub == "":
		return []string{sb}, key, 0
	}
	if b.Bucket([]byte(sub)) == nil {
		t.Fatalf("session %q has no bucket %q", session, sub)
	}
	return []string{sb, sub}, key, 0
}

// bucketAt returns the bucket at path from tx's root.
func bucketAt(tx *bolt.Tx, path []string) *bolt.Bucket {
	b := tx.Bucket([]byte(path[0]))
	for _, name := range path[1:] {
		b = b.Bucket([]byte(name))
	}
	return b
}

// damage replaces the value at key of the session's bucket sub (or the
// session's own bucket if sub is "") with change(value) — nil deletes it —
// through bbolt directly, and returns a func that restores the original
// where it was.
func damage(t *testing.T, path, session, sub string, key []byte, change func([]byte) []byte) (restore func()) {
	t.Helper()
	var orig, fileKey []byte
	var where []string
	editBolt(t, path, func(tx *bolt.Tx) error {
		var off int
		where, fileKey, off = record(t, tx, session, sub, key)
		b := bucketAt(tx, where)
		orig = bytes.Clone(b.Get(fileKey))
		var rec []byte
		if orig != nil {
			rec = orig[off:]
		}
		if v := change(bytes.Clone(rec)); v != nil {
			return b.Put(fileKey, append(bytes.Clone(orig[:min(off, len(orig))]), v...))
		}
		return b.Delete(fileKey)
	})
	return func() {
		editBolt(t, path, func(tx *bolt.Tx) error {
			b := bucketAt(tx, where)
			if orig == nil {
				return b.Delete(fileKey)
			}
			return b.Put(fileKey, orig)
		})
	}
}

// valueOf returns the value at key of the session's bucket sub.
func valueOf(t *testing.T, path, session, sub string, key []byte) (v []byte) {
	t.Helper()
	editBolt(t, path, func(tx *bolt.Tx) error {
		where, key, off := record(t, tx, session, sub, key)
		if v = bytes.Clone(bucketAt(tx, where).Get(key)); v != nil {
			v = v[off:]
		}
		return nil
	})
	return v
}

// TestVerify_DetectsInconsistency makes records that each decode but no
// longer agree with each other: Verify reports every case, naming the
// session.
func TestVerify_DetectsInconsistency(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	mustAppend(t, db, "bystander", prefix...)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	seq2 := valueOf(t, path, "s", "l0", seqKey(2))
	openEntry := valueOf(t, path, "s", "open", []byte("call-1"))
	del := func([]byte) []byte { return nil }
	put := func(v []byte) func([]byte) []byte { return func([]byte) []byte { return v } }
	cases := []struct {
		name, sub string
		key       []byte
		change    func([]byte) []byte
		want      string
	}{
		{"an event deleted", "l0", seqKey(3), del, "seq 3 was expected"},
		{"the last event deleted", "l0", seqKey(6), del, "head 6, l0 ends at 5"},
		{"an event past the head", "l0", seqKey(7), put(seq2), "l0 key 7"},
		{"an event stored under another seq", "l0", seqKey(3), put(seq2), "record holds seq 2"},
		{"a ledger entry deleted", "open", []byte("call-1"), del, `ledger differs from a replay of the raw log: open "call-1"`},
		{"a ledger entry added", "open", []byte("call-9"), put(openEntry), `open key "call-9"`},
		{"a constraint deleted", "constr", []byte("active"), del, `constraint "active"`},
		{"the state deleted", "", []byte("state"), del, "state"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			restore := damage(t, path, "s", tc.sub, tc.key, tc.change)
			defer restore()
			ro, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			rep, err := ro.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				if p.Session != "s" {
					t.Errorf("a problem outside the damaged session: %s", p)
				}
				found = found || strings.Contains(p.What, tc.want)
			}
			if !found {
				t.Errorf("Verify did not report %q: %v", tc.want, rep.Problems)
			}
		})
	}
}

func flipAt(i int) func([]byte) []byte {
	return func(b []byte) []byte {
		if i < 0 {
			i += len(b)
		}
		b[i] ^= 0x10
		return b
	}
}

// TestVerify_DamagedEvent flips one byte of one stored event, at several
// places of its envelope: Verify names the session and the seq, reads of the
// damaged seq fail with ErrCorrupt (never return other data), and everything
// else still reads.
func TestVerify_DamagedEvent(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "victim", prefix...)
	mustAppend(t, db, "victim", tier.Event{Kind: tier.KindAssistant, Text: "after"})
	mustAppend(t, db, "bystander", prefix...)
	want := allStates(t, db)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const seq = 3
	places := map[string]int{
		"envelope version": 0, "record type": 1, "length": 3, "checksum": 7,
		"first payload byte": store.EnvelopeHeader, "middle": -8, "last byte": -1,
	}
	for name, at := range places {
		t.Run(name, func(t *testing.T) {
			restore := damage(t, path, "victim", "l0", seqKey(seq), flipAt(at))
			defer restore()
			ro, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()

			rep, err := ro.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				if p.Session != "victim" {
					t.Errorf("a problem outside the damaged session: %s", p)
					continue
				}
				if strings.Contains(p.What, fmt.Sprintf("l0 key %d", seq)) {
					found = true
				}
			}
			if !found {
				t.Errorf("Verify does not name session victim seq %d: %v", seq, rep.Problems)
			}

			err = ro.View(func(s *store.Snapshot) error {
				var got []tier.Event
				err := s.Events("victim", 1, 100, func(e tier.Event) error {
					got = append(got, e)
					return nil
				})
				var ce *store.CorruptError
				if !errors.Is(err, store.ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("Events = %v, want a *CorruptError that Is ErrCorrupt", err)
				}
				if ce.Session != "victim" || ce.Bucket != "l0" || ce.Key != fmt.Sprint(seq) {
					t.Errorf("CorruptError names session %q bucket %q key %q", ce.Session, ce.Bucket, ce.Key)
				}
				if !equalEvents(got, want["victim"].Events[:seq-1]) {
					t.Errorf("before failing, Events returned %d events that are not the first %d written", len(got), seq-1)
				}
				// The damage is local: the events after it, and another
				// session, still read.
				if err := s.Events("victim", seq+1, 100, func(tier.Event) error { return nil }); err != nil {
					t.Errorf("events after the damaged one: %v", err)
				}
				if d := sameState(want["bystander"], readSession(t, s, "bystander")); len(d) != 0 {
					t.Errorf("bystander: %v", d)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ro.Resume("victim", store.Latest); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("Resume over the damaged event = %v, want ErrCorrupt", err)
			}
		})
	}
	// Restored, the file verifies clean again (dbtest checks at cleanup).
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if d := sameState(want["victim"], state(t, ro, "victim")); len(d) != 0 {
		t.Errorf("after restoring: %v", d)
	}
}

// TestVerify_DamagedLedgerEntry damages a stored ledger entry: Verify and
// Snapshot.Ledger report it, and an append that touches it fails with
// ErrCorrupt, not as bad input.
func TestVerify_DamagedLedgerEntry(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	restore := damage(t, path, "s", "open", []byte("call-1"), flipAt(-1))
	db2, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db2.Verify(store.VerifyOptions{})
	if err != nil || rep.OK() {
		t.Errorf("Verify = %+v, %v; want a problem", rep, err)
	}
	for _, p := range rep.Problems {
		if p.Session != "s" || !strings.Contains(p.What, `open key "call-1"`) {
			t.Errorf("problem %s does not name the damaged entry", p)
		}
	}
	err = db2.View(func(s *store.Snapshot) error {
		_, err := s.Ledger("s")
		return err
	})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Ledger = %v, want ErrCorrupt", err)
	}
	_, err = db2.Append("s", tier.Event{Kind: tier.KindToolResult, ID: "call-1"})
	var ee *tier.EventError
	if !errors.Is(err, store.ErrCorrupt) || errors.As(err, &ee) {
		t.Errorf("Append over the damaged entry = %v, want ErrCorrupt", err)
	}
	// An append that does not touch it goes through.
	mustAppend(t, db2, "s", tier.Event{Kind: tier.KindAssistant, Text: "still writable"})
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	restore()
}

// TestAppend_DamagedSessionDoesNotFailOthers appends concurrently to a
// session whose state record is damaged and to healthy ones: the damaged
// session's appends fail with ErrCorrupt, every other append succeeds, even
// when they share a group commit.
func TestAppend_DamagedSessionDoesNotFailOthers(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "bad", prefix...)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	restore := damage(t, path, "bad", "", []byte("state"), flipAt(-1))
	db2, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const writers, appends = 16, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	var goodFailed, badOK int
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < appends; i++ {
				session := fmt.Sprintf("good-%d", g)
				if g%4 == 0 {
					session = "bad"
				}
				_, err := db2.Append(session, tier.Event{Kind: tier.KindAssistant, Text: "x"})
				mu.Lock()
				switch {
				case session == "bad" && err == nil:
					badOK++
				case session == "bad" && !errors.Is(err, store.ErrCorrupt):
					t.Errorf("append to the damaged session: %v, want ErrCorrupt", err)
				case session != "bad" && err != nil:
					goodFailed++
					if goodFailed == 1 {
						t.Errorf("append to a healthy session failed: %v", err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if goodFailed > 0 || badOK > 0 {
		t.Errorf("%d appends to healthy sessions failed, %d to the damaged one succeeded", goodFailed, badOK)
	}
	for g := 0; g < writers; g++ {
		if g%4 == 0 {
			continue
		}
		if info, err := db2.Info(fmt.Sprintf("good-%d", g)); err != nil || info.Head != appends {
			t.Errorf("good-%d: %+v %v", g, info, err)
		}
	}
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	restore()
}
