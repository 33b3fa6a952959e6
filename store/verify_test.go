package store_test

import (
	"bytes"
	"encoding/binary"
	stderrors "errors"
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

// trailer is the size of the check the bbolt backend keeps after every
// value it stores (backend/boltfile: a CRC32C of the record's place and
// payload, then a version byte).
const trailer = 5

// record returns the path of the bucket (from the root) and the key in the
// file of the record at key of session's place: "l0" (the events: key 0xFE
// and the seq, in the session's bucket "s/"+session), "state" (key 0xFF
// there) or a table, a bucket inside the session's by its name ("open" is
// "\xffopen").
func record(t *testing.T, tx *bolt.Tx, session, place string, key []byte) (path []string, fileKey []byte) {
	t.Helper()
	sb := "s/" + session
	b := tx.Bucket([]byte(sb))
	if b == nil {
		t.Fatalf("session %q not found in the file", session)
	}
	switch place {
	case "l0":
		return []string{sb}, append([]byte{0xFE}, key...)
	case "state":
		return []string{sb}, []byte{0xFF}
	case "open":
		place = "\xffopen"
	}
	if b.Bucket([]byte(place)) == nil {
		t.Fatalf("session %q has no bucket %q", session, place)
	}
	return []string{sb, place}, key
}

// bucketAt returns the bucket at path from tx's root.
func bucketAt(tx *bolt.Tx, path []string) *bolt.Bucket {
	b := tx.Bucket([]byte(path[0]))
	for _, name := range path[1:] {
		b = b.Bucket([]byte(name))
	}
	return b
}

// damage replaces the value stored at key of session's place (see record)
// — its payload and the backend's trailer — with change(value), nil
// deleting it, through bbolt directly, and returns a func that restores the
// original where it was.
func damage(t *testing.T, path, session, place string, key []byte, change func([]byte) []byte) (restore func()) {
	t.Helper()
	var orig, fileKey []byte
	var where []string
	editBolt(t, path, func(tx *bolt.Tx) error {
		where, fileKey = record(t, tx, session, place, key)
		b := bucketAt(tx, where)
		orig = bytes.Clone(b.Get(fileKey))
		if v := change(bytes.Clone(orig)); v != nil {
			return b.Put(fileKey, v)
		}
		return b.Delete(fileKey)
	})
	return restorer(t, path, where, fileKey, orig)
}

// restorer returns a func that puts orig back at fileKey of the bucket at
// where, or deletes the key when orig is nil.
func restorer(t *testing.T, path string, where []string, fileKey, orig []byte) func() {
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

// forge stores payload at key of session's place through the store's
// backend, which seals it as its own — a record that passes the backend's
// check and must be caught by the store's — and returns a func that
// restores the original.
func forge(t *testing.T, path, session, place string, key, payload []byte) (restore func()) {
	t.Helper()
	var orig, fileKey []byte
	var where []string
	editBolt(t, path, func(tx *bolt.Tx) error {
		where, fileKey = record(t, tx, session, place, key)
		orig = bytes.Clone(bucketAt(tx, where).Get(fileKey))
		return nil
	})
	db, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = store.PutRecord(db, session, place, key, payload)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return restorer(t, path, where, fileKey, orig)
}

// valueOf returns the payload of the record at key of session's place: the
// record as the store encoded it.
func valueOf(t *testing.T, path, session, place string, key []byte) (v []byte) {
	t.Helper()
	editBolt(t, path, func(tx *bolt.Tx) error {
		where, key := record(t, tx, session, place, key)
		v = bytes.Clone(bucketAt(tx, where).Get(key))
		return nil
	})
	if len(v) < trailer {
		t.Fatalf("session %q %s key %x: a value of %d bytes", session, place, key, len(v))
	}
	n := len(v) - trailer
	return v[:n:n] // a write may use the spare capacity: not the trailer's bytes
}

// TestVerify_DetectsInconsistency makes records that each decode but no
// longer agree with each other: Verify reports every case, naming the
// session.
func TestVerify_DetectsInconsistency(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	mustAppend(t, db, "bystander", prefix...)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	seq2 := valueOf(t, path, "s", "l0", seqKey(2))
	openEntry := valueOf(t, path, "s", "open", []byte("call-1"))
	cases := []struct {
		name, place string
		key         []byte
		forge       []byte // nil: the record is deleted
		want        string
	}{
		{"an event deleted", "l0", seqKey(3), nil, "seq 3 was expected"},
		{"the last event deleted", "l0", seqKey(6), nil, "head 6, l0 ends at 5"},
		{"an event past the head", "l0", seqKey(7), seq2, "l0 key 7"},
		{"an event stored under another seq", "l0", seqKey(3), seq2, "record holds seq 2"},
		{"a ledger entry deleted", "open", []byte("call-1"), nil, `ledger differs from a replay of the raw log: open "call-1"`},
		{"a ledger entry added", "open", []byte("call-9"), openEntry, `open key "call-9"`},
		{"a constraint deleted", "constr", []byte("active"), nil, `constraint "active"`},
		{"the state deleted", "state", nil, nil, "state"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var restore func()
			if tc.forge != nil {
				restore = forge(t, path, "s", tc.place, tc.key, tc.forge)
			} else {
				restore = damage(t, path, "s", tc.place, tc.key, func([]byte) []byte { return nil })
			}
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
// places of its payload and of the backend's trailer: Verify names the session and the seq, reads of the
// damaged seq fail with ErrCorrupt (never return other data), and everything
// else still reads.
func TestVerify_DamagedEvent(t *testing.T) {
	dbtest.FileOnly(t)
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
		"first payload byte": 0, "middle": -(trailer + 8), "last payload byte": -(trailer + 1),
		"checksum": -trailer, "trailer version": -1,
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
	dbtest.FileOnly(t)
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
	// The standard library's errors see it too, wrapped or not.
	for _, e := range []error{err, fmt.Errorf("outer: %w", err)} {
		var ce *store.CorruptError
		if !stderrors.Is(e, store.ErrCorrupt) || !stderrors.As(e, &ce) || ce.Session != "s" {
			t.Errorf("errors.Is(%v, ErrCorrupt) = %v, errors.As = %v", e, stderrors.Is(e, store.ErrCorrupt), ce)
		}
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
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "bad", prefix...)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	restore := damage(t, path, "bad", "state", nil, flipAt(-1))
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

// TestResume_MarkerUnderAnotherID: a marker's record stored under another
// id — a damaged key that the backend's check passes — is damage: Verify
// reports the id the record holds, and a resume of the id the key says is
// ErrCorrupt, never the other marker's frame.
func TestResume_MarkerUnderAnotherID(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		tier.Event{Kind: tier.KindUser, Text: "again"})
	p, err := db.PlanSpan("s", 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(p, store.Summary{Narrative: "x rejected", Claims: p.Required.Claims(), Summarizer: "test"})
	if err != nil {
		t.Fatal(err)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	id := res.Marker
	forge(t, path, "s", "markers", seqKey(id+8), valueOf(t, path, "s", "markers", seqKey(id)))
	damage(t, path, "s", "markers", seqKey(id), func([]byte) []byte { return nil })
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rep, err := ro.Verify(store.VerifyOptions{})
	if err != nil || !strings.Contains(fmt.Sprint(rep.Problems), fmt.Sprintf("record holds marker %d", id)) {
		t.Errorf("Verify: %v %v, want the marker under another id", rep.Problems, err)
	}
	if _, err := ro.Resume("s", id+8); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Resume(%d): %v, want ErrCorrupt", id+8, err)
	}
}

// TestResume_MissingNamedRecordIsDamage: a record that a root, a marker or
// a checkpoint names, gone from the file, is damage at the record that
// names it — a CorruptError, never "not found" as if the caller had asked
// for something that does not exist.
func TestResume_MissingNamedRecordIsDamage(t *testing.T) {
	dbtest.FileOnly(t)
	cases := []struct {
		name, place string
		key         func(res store.CommitResult) []byte
		compact     bool
		names       string // the CorruptError's bucket
	}{
		{"the last root's marker", "markers", func(res store.CommitResult) []byte { return seqKey(res.Marker) }, true, "roots"},
		{"the marker's node", "nodes", func(res store.CommitResult) []byte { return seqKey(res.Node.ID) }, true, "markers"},
		{"the indexed checkpoint", "ckpts", func(store.CommitResult) []byte { return seqKey(1) }, false, "ckvalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
			mustAppend(t, db, "s", prefix...)
			var res store.CommitResult
			if tc.compact {
				p, err := db.PlanSpan("s", 3, 1000)
				if err != nil {
					t.Fatal(err)
				}
				if res, err = db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			path := db.Path()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			damage(t, path, "s", tc.place, tc.key(res), func([]byte) []byte { return nil })
			ro, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			_, err = ro.Resume("s", store.Latest)
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Session != "s" || ce.Bucket != tc.names || !strings.Contains(err.Error(), tc.name+" is missing") {
				t.Errorf("Resume with %s missing = %v, want a CorruptError in %s saying %s is missing", tc.name, err, tc.names, tc.name)
			}
			if errors.Is(err, store.ErrNotFound) || stderrors.Is(err, store.ErrNotFound) {
				t.Errorf("Resume with %s missing = %v: ErrNotFound, as if the caller had asked for what is not there", tc.name, err)
			}
		})
	}
}

// SessionSummary reads no raw event but the newest: a damaged event inside
// the log leaves a listing of the sessions working, while SessionStats,
// which reads the log whole, names the damage. Undamaged, the two agree
// but for the raw log's size.
func TestSessionSummary_ReadsNoRawLog(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "after"})
	var full, sum store.SessionStats
	if err := db.View(func(s *store.Snapshot) (err error) {
		if full, err = s.SessionStats("s"); err != nil {
			return err
		}
		sum, err = s.SessionSummary("s")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if full.RawBytes == 0 || sum.RawBytes != 0 || sum.BytesPerEvent != 0 {
		t.Fatalf("raw bytes: stats %d, summary %d (per event %v)", full.RawBytes, sum.RawBytes, sum.BytesPerEvent)
	}
	full.RawBytes, full.BytesPerEvent = 0, 0
	if fmt.Sprint(full) != fmt.Sprint(sum) {
		t.Errorf("summary differs from stats:\n got %+v\nwant %+v", sum, full)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	defer damage(t, path, "s", "l0", seqKey(3), flipAt(0))()
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.View(func(s *store.Snapshot) error {
		got, err := s.SessionSummary("s")
		if err != nil || fmt.Sprint(got) != fmt.Sprint(sum) {
			t.Errorf("summary of a log damaged at seq 3: %+v, %v", got, err)
		}
		if _, err := s.SessionStats("s"); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("stats of a log damaged at seq 3: %v, want ErrCorrupt", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
