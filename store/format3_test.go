package store_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// key3 joins the parts of a key of format 3's events bucket: the session's
// number n (4 bytes big-endian), then the rest.
func key3(n uint32, rest ...[]byte) []byte {
	k := binary.BigEndian.AppendUint32(nil, n)
	for _, r := range rest {
		k = append(k, r...)
	}
	return k
}

// viewBolt reads the file at path through bbolt directly, read-only.
func viewBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.View(fn); err != nil {
		t.Fatal(err)
	}
}

// keysOf lists the keys of b, each as a string, in order.
func keysOf(b *bolt.Bucket) (out []string) {
	_ = b.ForEach(func(k, _ []byte) error {
		out = append(out, string(k))
		return nil
	})
	return out
}

// verifyPath returns what Verify reports of the file at path, opened
// read-only.
func verifyPath(t *testing.T, path string) []store.Problem {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Problems
}

// TestFormat3_Layout writes two sessions and reads the file through bbolt:
// the session numbers and meta/next, every event, state and open call in
// "e" under the session's number (a resolved call gone), and sessions'
// buckets that hold only their number and the other ledger buckets.
func TestFormat3_Layout(t *testing.T) {
	db := dbtest.Open(t, store.Options{Format: 3})
	mustAppend(t, db, "a", prefix...) // call-1 and handle-1 left open
	mustAppend(t, db, "b",
		tier.Event{Kind: tier.KindUser, Text: "b"},
		tier.Event{Kind: tier.KindToolCall, ID: "done", Name: "ls"},
		tier.Event{Kind: tier.KindToolResult, ID: "done"},
		tier.Event{Kind: tier.KindToolCall, ID: "call-b", Name: "bash"})
	mustAppend(t, db, "a", tier.Event{Kind: tier.KindAssistant, Text: "after b"})
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	heads := map[uint32]uint64{0: 7, 1: 4}
	open := map[uint32][]string{0: {"call-1", "handle-1"}, 1: {"call-b"}}
	viewBolt(t, path, func(tx *bolt.Tx) error {
		if got, want := keysOf(tx.Cursor().Bucket()), []string{"e", "meta", "s/a", "s/b"}; !slices.Equal(got, want) {
			t.Errorf("root keys %q, want %q", got, want)
		}
		if next := tx.Bucket([]byte("meta")).Get([]byte("next")); !bytes.Equal(next, []byte{0, 0, 0, 2}) {
			t.Errorf("meta/next = %x, want 00000002", next)
		}
		for i, id := range []string{"a", "b"} {
			if num := tx.Bucket([]byte("s/" + id)).Get([]byte{0}); !bytes.Equal(num, key3(uint32(i))) {
				t.Errorf("session %q has number %x, want %d", id, num, i)
			}
		}
		// The events bucket holds exactly each session's events 1..head,
		// its state, its id and its open calls, in that order.
		var want []string
		for n := uint32(0); n < 2; n++ {
			for seq := uint64(1); seq <= heads[n]; seq++ {
				want = append(want, string(key3(n, []byte{0xFE}, seqKey(seq))))
			}
			want = append(want, string(key3(n, []byte{0xFF})), string(key3(n, []byte{0xFF, 0})))
			for _, id := range open[n] {
				want = append(want, string(key3(n, []byte{0xFF, 'o'}, []byte(id))))
			}
		}
		e := tx.Bucket([]byte("e"))
		if got := keysOf(e); !slices.Equal(got, want) {
			t.Errorf("events bucket keys\n%x\nwant\n%x", got, want)
		}
		if st := e.Get(key3(0, []byte{0xFF})); len(st) == 0 {
			t.Errorf("session a's state is empty")
		}
		if id := e.Get(key3(1, []byte{0xFF, 0})); string(id) != "b" {
			t.Errorf("session 1's id is %q, want b", id)
		}
		// A session's bucket: its number and the ledger buckets but open.
		want = []string{"\x00", "art", "audit", "ckpts", "ckvalid", "constr", "disp", "markers", "nodes", "roots"}
		for _, id := range []string{"a", "b"} {
			b := tx.Bucket([]byte("s/" + id))
			if got := keysOf(b); !slices.Equal(got, want) {
				t.Errorf("s/%s keys %q, want %q", id, got, want) // e.g. an open bucket, or events
			}
		}
		return nil
	})
	// Reopened, the store reads it all back, verifies clean, and numbers
	// a new session after the others.
	db2, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db2)
	if st := state(t, db2, "a"); len(st.Events) != 7 || st.Events[6].Text != "after b" || len(st.Ledger.Open) != 2 {
		t.Errorf("a reads back %d events, open %v", len(st.Events), st.Ledger.Open)
	}
	if st := state(t, db2, "b"); len(st.Events) != 4 || len(st.Ledger.Open) != 1 || st.Ledger.Open["call-b"].Seq != 4 {
		t.Errorf("b reads back %d events, open %v", len(st.Events), st.Ledger.Open)
	}
	mustAppend(t, db2, "c", tier.Event{Kind: tier.KindUser})
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	viewBolt(t, path, func(tx *bolt.Tx) error {
		if num := tx.Bucket([]byte("s/c")).Get([]byte{0}); !bytes.Equal(num, key3(2)) {
			t.Errorf("session c has number %x, want 2", num)
		}
		if next := tx.Bucket([]byte("meta")).Get([]byte("next")); !bytes.Equal(next, key3(3)) {
			t.Errorf("meta/next = %x, want 3", next)
		}
		return nil
	})
}

// TestFormat3_VerifyFindsStrayKeys damages the events bucket and the
// sessions' numbers through bbolt, one fresh file per case: Verify reports
// each; a session without a sound number fails reads with ErrCorrupt,
// while the other session still reads.
func TestFormat3_VerifyFindsStrayKeys(t *testing.T) {
	ev := func(tx *bolt.Tx) []byte { return tx.Bucket([]byte("e")).Get(key3(0, []byte{0xFE}, seqKey(1))) }
	put := func(k []byte) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error { return tx.Bucket([]byte("e")).Put(k, ev(tx)) }
	}
	setNum := func(id string, v []byte) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			if v == nil {
				return tx.Bucket([]byte("s/" + id)).Delete([]byte{0})
			}
			return tx.Bucket([]byte("s/"+id)).Put([]byte{0}, v)
		}
	}
	cases := []struct {
		name    string
		edit    func(*bolt.Tx) error
		want    string
		session string // the session whose reads fail, and whose problem it is
	}{
		{"an unknown session number", put(key3(7, []byte{0xFE}, seqKey(1))), "session number 7, which no session has", ""},
		{"a key shorter than a number", put([]byte{0, 0, 1}), "key 000001 is no session's", ""},
		{"a bad shape", put(key3(0, []byte{0x01}, []byte("x"))), "key 000000000178 is neither an event's", ""},
		{"an event key of 4-byte seq", put(key3(0, []byte{0xFE, 0, 0, 0, 9})), "is neither an event's, a state's nor an open call's", ""},
		{"an open call without an id", put(key3(1, []byte{0xFF, 'o'})), "key 00000001ff6f is neither", ""},
		{"a nested bucket", func(tx *bolt.Tx) error {
			_, err := tx.Bucket([]byte("e")).CreateBucket(key3(1, []byte{0xFF, 'o'}, []byte("nested")))
			return err
		}, "holds a bucket", ""},
		{"two sessions with one number", setNum("b", key3(0)), `sessions "a" and "b" have the same number 0`, ""},
		{"a number naming another session", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("e")).Put(key3(0, []byte{0xFF, 0}), []byte("b"))
		}, `names session "b", the number is "a"'s`, ""},
		{"a state left in the session's bucket", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("s/b")).Put([]byte{0xFF}, []byte("x"))
		}, "session bucket: unexpected key ff", "b"},
		{"a number deleted", setNum("a", nil), "session number of 0 bytes", "a"},
		{"a number of 3 bytes", setNum("a", []byte{0, 0, 0}), "session number of 3 bytes", "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := twoSessions3(t)
			if ps := verifyPath(t, path); len(ps) != 0 {
				t.Fatalf("before the damage: %v", ps)
			}
			editBolt(t, path, tc.edit)
			found := false
			for _, p := range verifyPath(t, path) {
				found = found || p.Session == tc.session && strings.Contains(p.What, tc.want)
			}
			if !found {
				t.Errorf("Verify did not report %q (session %q): %v", tc.want, tc.session, verifyPath(t, path))
			}
			if tc.session == "" || tc.session == "b" {
				return // nothing a read of a session looks at
			}
			db, err := store.Open(path, store.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.View(func(s *store.Snapshot) error {
				if _, err := s.Info(tc.session); !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("Info = %v, want ErrCorrupt", err)
				}
				err := s.Events(tc.session, 1, 10, func(tier.Event) error { return nil })
				if !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("Events = %v, want ErrCorrupt", err)
				}
				if _, err := s.Ledger(tc.session); !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("Ledger = %v, want ErrCorrupt", err)
				}
				if st := readSession(t, s, "b"); len(st.Events) != len(prefix) {
					t.Errorf("the other session reads %d events", len(st.Events))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Append(tc.session, tier.Event{Kind: tier.KindUser}); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("Append = %v, want ErrCorrupt", err)
			}
			mustAppend(t, db, "b", tier.Event{Kind: tier.KindUser})
		})
	}
}

// TestFormat3_OlderFormatsStillWork makes a file of format 1 and of format
// 2, appends, reopens (the file keeps its format) and appends again: the
// events and ledger read back, Verify is clean, and the file has its own
// layout, with nothing of format 3's.
func TestFormat3_OlderFormatsStillWork(t *testing.T) {
	for _, f := range []int{1, 2} {
		t.Run(fmt.Sprintf("format %d", f), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			db, err := store.Open(path, store.Options{Format: f, Create: true, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, db, "s", prefix...)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = store.Open(path, store.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolResult, ID: "call-1"})
			st := state(t, db, "s")
			if st.Info.Head != 7 || len(st.Events) != 7 || st.Events[6].Kind != tier.KindToolResult {
				t.Errorf("head %d, %d events read back", st.Info.Head, len(st.Events))
			}
			if _, ok := st.Ledger.Open["handle-1"]; !ok || len(st.Ledger.Open) != 1 || len(st.Ledger.Constraints) != 1 {
				t.Errorf("ledger open %v constraints %v", st.Ledger.Open, st.Ledger.Constraints)
			}
			mustVerify(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			viewBolt(t, path, func(tx *bolt.Tx) error {
				if tx.Bucket([]byte("e")) != nil || tx.Bucket([]byte("meta")).Get([]byte("next")) != nil {
					t.Errorf("a format %d file with format 3's events bucket or meta/next", f)
				}
				var want, events []string
				for seq := uint64(1); seq <= 7; seq++ {
					want = append(want, string(seqKey(seq)))
				}
				b, state, openName := tx.Bucket([]byte("s/s")), []byte{0xFF}, "\xffopen"
				if f == 1 {
					b, state, openName = tx.Bucket([]byte("sessions")).Bucket([]byte("s")), []byte("state"), "open"
					events = keysOf(b.Bucket([]byte("l0")))
				} else {
					c := b.Cursor()
					for k, _ := c.Seek([]byte{0xFE}); k != nil && k[0] == 0xFE; k, _ = c.Next() {
						events = append(events, string(k[1:]))
					}
				}
				if !slices.Equal(events, want) {
					t.Errorf("event keys %x, want %x", events, want)
				}
				if b.Get(state) == nil || b.Bucket([]byte(openName)).Get([]byte("handle-1")) == nil || b.Get([]byte{0}) != nil {
					t.Errorf("the session's bucket lacks its state or open/handle-1, or has a number")
				}
				return nil
			})
		})
	}
}

// TestFormat3_MaxIDAtLimit appends a call whose id is MaxIDBytesLimit bytes
// long: stored under its 6-byte prefix, its key in "e" is exactly bbolt's
// largest, and it reads back whole. (Open's refusal of a larger MaxIDBytes
// is TestOpen_BadOptions'.)
func TestFormat3_MaxIDAtLimit(t *testing.T) {
	db := dbtest.Open(t, store.Options{Format: 3, MaxIDBytes: store.MaxIDBytesLimit, NoSync: true})
	id := strings.Repeat("k", store.MaxIDBytesLimit)
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolCall, ID: id, Name: "bash"})
	if o, ok := state(t, db, "s").Ledger.Open[id]; !ok || o.ID != id || o.Seq != 1 {
		t.Errorf("the call does not read back: %v %d", ok, o.Seq)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	viewBolt(t, path, func(tx *bolt.Tx) error {
		k := key3(0, []byte{0xFF, 'o'}, []byte(id))
		if len(k) != bolt.MaxKeySize || tx.Bucket([]byte("e")).Get(k) == nil {
			t.Errorf("no open call at a key of %d bytes", len(k))
		}
		return nil
	})
}

// twoSessions3 makes a format-3 file of sessions "a" and "b", the prefix
// events each, closed.
func twoSessions3(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := store.Open(path, store.Options{Format: 3, Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "a", prefix...)
	mustAppend(t, db, "b", prefix...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFormat3_StaleNextNumber: meta's next session number pointing at a
// session's own number is reported by Verify, and an append that would
// make a session fails with ErrCorrupt instead of writing over that
// session's records — the others go on.
func TestFormat3_StaleNextNumber(t *testing.T) {
	path := twoSessions3(t)
	editBolt(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("next"), key3(0)) })
	found := false
	for _, p := range verifyPath(t, path) {
		found = found || strings.Contains(p.What, `the next session number 0 is not above session "a"'s 0`)
	}
	if !found {
		t.Errorf("Verify did not report the stale number: %v", verifyPath(t, path))
	}
	db, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Append("c", tier.Event{Kind: tier.KindUser, Text: "new"}); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Append to a new session = %v, want ErrCorrupt naming the number in use", err)
	}
	if _, err := db.Append("b", tier.Event{Kind: tier.KindUser, Text: "more"}); err != nil {
		t.Errorf("Append to b: %v", err)
	}
	if info, err := db.Info("a"); err != nil || info.Head != uint64(len(prefix)) {
		t.Errorf("session a: %+v, %v; want head %d", info, err, len(prefix))
	}
}
