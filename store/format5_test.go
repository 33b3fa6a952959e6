package store_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Format 5 (schema.go) is format 4 with the texts of the ledger — a
// disposition's reason, a constraint's or an artifact's text — kept only in
// the event that made the entry: the record names that event by seq.

// policyText is a constraint of kilobytes, as the policy a tau-bench
// session starts with.
var policyText = strings.Repeat("Before any action that changes a booking, list it and ask. ", 90)

// ledgerEvents make one entry of every class that carries a text.
func ledgerEvents() []tier.Event {
	return []tier.Event{
		{Kind: tier.KindConstraint, Key: "policy", Text: policyText},                                 // 1
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash"},                                            // 2
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "approach/a", Text: "exit 1: boom"}, // 3
		{Kind: tier.KindRejected, Key: "approach/b", Text: "too slow"},                               // 4
		{Kind: tier.KindArtifact, Key: "main.go", Text: "package main"},                              // 5
		{Kind: tier.KindSuperseded, Key: "approach/c", By: "approach/d", Text: "replaced"},           // 6
		{Kind: tier.KindUser, Text: "go on"},                                                         // 7
	}
}

// rawLedgerRecord returns the stored record at key of the ledger bucket
// name of session s in the (closed) file at path.
func rawLedgerRecord(t *testing.T, path, s, name, key string) []byte {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var raw []byte
	err = b.View(func(tx *bolt.Tx) error {
		sb := tx.Bucket([]byte("s/" + s))
		if sb == nil || sb.Bucket([]byte(name)) == nil {
			return errors.Newf("no bucket s/%s/%s", s, name)
		}
		raw = append([]byte(nil), sb.Bucket([]byte(name)).Get([]byte(key))...)
		return nil
	})
	if err != nil || raw == nil {
		t.Fatalf("record %s/%s: %v", name, key, err)
	}
	return raw
}

// putLedgerRecord overwrites that record with raw.
func putLedgerRecord(t *testing.T, path, s, name, key string, raw []byte) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("s/"+s)).Bucket([]byte(name)).Put([]byte(key), raw)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFormat5_LedgerTextsLiveInTheirEvents: format 5's records hold no
// text and name their event; the ledger read back, and the resumed
// context, carry the texts as format 4 does, where the records hold them.
func TestFormat5_LedgerTextsLiveInTheirEvents(t *testing.T) {
	var ledgers [2]*tier.Ledger
	var texts [2]string
	for i, f := range []int{4, 5} {
		path := filepath.Join(t.TempDir(), "strata.db")
		db, err := store.Open(path, store.Options{Create: true, NoSync: true, Format: f, Clock: testClock()})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, db, "s", ledgerEvents()...)
		if ledgers[i], err = ledgerIn(db, "s"); err != nil {
			t.Fatal(err)
		}
		ctx, err := db.Resume("s", 0)
		if err != nil {
			t.Fatal(err)
		}
		texts[i] = string(ctx.Text())
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		var c tier.Constraint
		if err := store.DecodeLedgerRecord(rawLedgerRecord(t, path, "s", "constr", "policy"), &c); err != nil {
			t.Fatal(err)
		}
		var d tier.Disposition
		if err := store.DecodeLedgerRecord(rawLedgerRecord(t, path, "s", "disp", "approach/a"), &d); err != nil {
			t.Fatal(err)
		}
		var a tier.Artifact
		if err := store.DecodeLedgerRecord(rawLedgerRecord(t, path, "s", "art", "main.go"), &a); err != nil {
			t.Fatal(err)
		}
		if c.Seq != 1 || d.Seq != 3 || a.Seq != 5 {
			t.Errorf("format %d: records name events %d, %d, %d; want 1, 3, 5", f, c.Seq, d.Seq, a.Seq)
		}
		stored := c.Text != "" || d.Reason != "" || a.Text != ""
		if inRecord := f < 5; stored != inRecord {
			t.Errorf("format %d: records hold texts %v, want %v (constraint of %d bytes, reason %q, artifact %q)",
				f, stored, inRecord, len(c.Text), d.Reason, a.Text)
		}
	}
	if d := ledgers[0].Diff(ledgers[1]); len(d) != 0 {
		t.Errorf("the ledgers of formats 4 and 5 differ: %v", d)
	}
	l := ledgers[1]
	if l.Constraints["policy"].Text != policyText || l.Dispositions["approach/a"].Reason != "exit 1: boom" ||
		l.Dispositions["approach/c"].By != "approach/d" || l.Artifacts["main.go"].Text != "package main" {
		t.Errorf("format 5 ledger: %+v", l)
	}
	if texts[0] != texts[1] || !strings.Contains(texts[1], policyText[:120]) {
		t.Errorf("resumed contexts differ between formats 4 and 5, or lack the policy:\n%s\n---\n%s", texts[0], texts[1])
	}
}

// ledgerIn reads session's ledger in one read transaction.
func ledgerIn(db *store.DB, session string) (l *tier.Ledger, err error) {
	err = db.View(func(s *store.Snapshot) error {
		l, err = s.Ledger(session)
		return err
	})
	return l, err
}

// problems joins a Verify report's problems, one per line.
func problems(rep store.Report) string {
	var b strings.Builder
	for _, p := range rep.Problems {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// TestFormat5_LedgerRecordDamage: a format 5 record that names the wrong
// event, no event, or holds a text is damage: the ledger read fails with
// ErrCorrupt naming the bucket and key, and Verify reports it.
func TestFormat5_LedgerRecordDamage(t *testing.T) {
	cases := []struct {
		name, bucket, key string
		rec               any
	}{
		{"constraint naming a tool call", "constr", "policy", &tier.Constraint{Key: "policy", Seq: 2}},
		{"constraint naming another key's constraint", "constr", "other", &tier.Constraint{Key: "other", Seq: 1}},
		{"constraint naming no event", "constr", "policy", &tier.Constraint{Key: "policy"}},
		{"constraint naming an event past the head", "constr", "policy", &tier.Constraint{Key: "policy", Seq: 99}},
		{"constraint holding its text", "constr", "policy", &tier.Constraint{Key: "policy", Seq: 1, Text: "forged"}},
		{"rejection naming the superseding event", "disp", "approach/b", &tier.Disposition{Key: "approach/b", State: tier.KindRejected, Seq: 6}},
		{"supersession with another successor", "disp", "approach/c", &tier.Disposition{Key: "approach/c", State: tier.KindSuperseded, By: "approach/x", Seq: 6}},
		{"failure naming a rejection", "disp", "approach/a", &tier.Disposition{Key: "approach/a", State: tier.KindFailed, Seq: 4}},
		{"artifact naming the constraint", "art", "main.go", &tier.Artifact{Key: "main.go", Seq: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			db, err := store.Open(path, store.Options{Create: true, NoSync: true, Format: 5, Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, db, "s", ledgerEvents()...)
			db.Close()
			raw, err := store.EncodeLedgerRecord(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			putLedgerRecord(t, path, "s", tc.bucket, tc.key, raw)

			db, err = store.Open(path, store.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = ledgerIn(db, "s")
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Bucket != tc.bucket || ce.Key != strconv.Quote(tc.key) {
				t.Fatalf("ledger read: %v, want a CorruptError naming %s/%s", err, tc.bucket, tc.key)
			}
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(problems(rep), tc.key) {
				t.Errorf("Verify does not name %s:\n%s", tc.key, problems(rep))
			}
		})
	}
}

// cold5 is what a format 5 session's own bucket holds of what format 4
// puts elsewhere.
type cold5 struct {
	num      uint32 // when numbered: a hot session's
	numbered bool
	events   []uint64 // 0xFE <seq>
	state    bool     // 0xFF
	open     []string // the keys of the 0xFF "open" bucket; nil: no bucket
	bucket   bool     // the open bucket is there
}

// readCold5 reads session id's bucket of the closed file at path.
func readCold5(t *testing.T, path, id string) cold5 {
	t.Helper()
	var c cold5
	viewBolt(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("s/" + id))
		if b == nil {
			t.Fatalf("no bucket for session %q", id)
		}
		if n := b.Get([]byte{0}); len(n) == 4 {
			c.num, c.numbered = binary.BigEndian.Uint32(n), true
		}
		_ = b.ForEach(func(k, v []byte) error {
			if len(k) == 9 && k[0] == 0xFE {
				c.events = append(c.events, binary.BigEndian.Uint64(k[1:]))
			}
			return nil
		})
		c.state = b.Get([]byte{0xFF}) != nil
		if o := b.Bucket([]byte("\xffopen")); o != nil {
			c.bucket = true
			c.open = keysOf(o)
		}
		return nil
	})
	return c
}

// hotKeysOf lists the keys of h of session number n, without the number.
func hotKeysOf(l layout4, n uint32) (out []string) {
	for _, k := range l.hot {
		if len(k) >= 4 && binary.BigEndian.Uint32([]byte(k)) == n {
			out = append(out, k[4:])
		}
	}
	return out
}

// TestFormat5_ColdAndHot follows one session through format 5's layout,
// reading the file through bbolt at each step, beside a second session
// that only ever appends runs: while a session appends runs of events it
// is cold — its events, state and open calls in its own bucket as in
// format 2, nothing of it in h, e or j; its first small append turns it
// hot — state and open calls move to h, e gets its id key, the events stay
// — and from then on it is format 4's: the journal, folds into e (the
// first one finds its older events in its own bucket), runs straight to e
// when the journal is empty. Every read merges the three places, before
// and after a reopen, and Verify finds nothing.
func TestFormat5_ColdAndHot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	open := func() *store.DB {
		db, err := store.Open(path, store.Options{Create: true, NoSync: true, Format: 5, JournalEvents: 4})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	m := model4{}
	m.gen(t, db, "a", 10) // a run: cold; call-10 is open
	m.gen(t, db, "b", 9)
	mustClose(t, db)

	for _, id := range []string{"a", "b"} {
		c := readCold5(t, path, id)
		if !slices.Equal(c.events, seqRange(1, uint64(len(m[id])))) || !c.state || !c.bucket || c.numbered {
			t.Errorf("cold %q: its bucket holds events %v, state %v, open bucket %v, a number %v", id, c.events, c.state, c.bucket, c.numbered)
		}
	}
	if l := readLayout4(t, path); len(l.hot) != 0 || len(l.events) != 0 || len(l.ids) != 0 || len(l.journal) != 0 {
		t.Errorf("two cold sessions: h %q, e %v, ids %v, journal %d entries", l.hot, l.events, l.ids, len(l.journal))
	}
	viewBolt(t, path, func(tx *bolt.Tx) error {
		if next := tx.Bucket([]byte("meta")).Get([]byte("next")); len(next) != 8 || binary.BigEndian.Uint32(next) != 0 {
			t.Errorf("meta/next %x: a number taken by a cold session", next)
		}
		return nil
	})
	if c := readCold5(t, path, "a"); !slices.Equal(c.open, []string{"call-10"}) {
		t.Errorf("cold a: open calls %q, want call-10", c.open)
	}

	db = open()
	m.add(t, db, "a", tier.Event{Kind: tier.KindUser, Text: "a/11"}) // small: a turns hot; call-10 stays open
	m.gen(t, db, "a", 1)
	mustClose(t, db)
	c, l := readCold5(t, path, "a"), readLayout4(t, path)
	if !slices.Equal(c.events, seqRange(1, 10)) || c.state || c.bucket {
		t.Errorf("hot a: its bucket holds events %v, state %v, open bucket %v", c.events, c.state, c.bucket)
	}
	if hk := hotKeysOf(l, c.num); !slices.Equal(hk, []string{"\x00", "\x01", "\x02", "ocall-10"}) {
		t.Errorf("hot a: h holds %q, want the state, the journal key, the head when it turned hot and call-10", hk)
	}
	viewBolt(t, path, func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("h")).Get(append(binary.BigEndian.AppendUint32(nil, c.num), 0x00)); v == nil {
			t.Error("hot a: no state in h")
		}
		if v := tx.Bucket([]byte("h")).Get(append(binary.BigEndian.AppendUint32(nil, c.num), 0x02)); len(v) != 8 || binary.BigEndian.Uint64(v) != 10 {
			t.Errorf("hot a: h records head %x when it turned hot, want 10", v)
		}
		return nil
	})
	if _, seqs := l.journalOf(c.num); l.ids[c.num] != "a" || !slices.Equal(seqs, []uint64{11, 12}) || len(l.events[c.num]) != 0 {
		t.Errorf("hot a: id key %q, journal seqs %v, e %v", l.ids[c.num], seqs, l.events[c.num])
	}

	db = open()
	checkReads4(t, db, m)
	m.gen(t, db, "a", 2) // the journal reaches 4: the commit folds it
	m.gen(t, db, "a", 8) // a run, the journal empty: straight to e
	m.gen(t, db, "b", 8) // b is still cold
	m.gen(t, db, "a", 1)
	checkReads4(t, db, m)
	mustClose(t, db)
	c, l = readCold5(t, path, "a"), readLayout4(t, path)
	if _, seqs := l.journalOf(c.num); !slices.Equal(c.events, seqRange(1, 10)) || !slices.Equal(l.events[c.num], seqRange(11, 22)) || !slices.Equal(seqs, []uint64{23}) {
		t.Errorf("a after the fold: its bucket %v, e %v, journal %v; want 1..10, 11..22, 23", c.events, l.events[c.num], seqs)
	}
	if b := readCold5(t, path, "b"); !slices.Equal(b.events, seqRange(1, 17)) || !b.state || b.numbered || len(l.ids) != 1 {
		t.Errorf("cold b: its bucket holds %v, state %v, a number %v; ids in e %v", b.events, b.state, b.numbered, l.ids)
	}

	db = open()
	defer mustClose(t, db)
	checkReads4(t, db, m)
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("Verify: %v %v", rep.Problems, err)
	}
}

// TestFormat5_ColdSessionDamage: stray records of the number the next
// session to turn hot will take (in h, e or j), a cold session with a
// number, a cold session without its state, a hot one without its state or
// its record of the head it turned hot at: Verify names each, reads of the
// session fail with ErrCorrupt rather than guess, and a small append to the
// cold session with stray records of its next number keeps it cold.
func TestFormat5_ColdSessionDamage(t *testing.T) {
	fixture := func(t *testing.T) (string, uint32, uint32) {
		path := filepath.Join(t.TempDir(), "strata.db")
		db, err := store.Open(path, store.Options{Create: true, NoSync: true, Format: 5, JournalEvents: 100})
		if err != nil {
			t.Fatal(err)
		}
		m := model4{}
		m.gen(t, db, "cold", 10)
		m.gen(t, db, "hot", 10)
		m.gen(t, db, "hot", 1)
		mustClose(t, db)
		if c := readCold5(t, path, "cold"); c.numbered {
			t.Fatalf("cold session with number %d", c.num)
		}
		hot := readCold5(t, path, "hot").num
		return path, hot + 1, hot // the next number, the hot session's
	}
	num := func(n uint32, rest ...byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), rest...) }
	cases := []struct {
		name    string
		damage  func(tx *bolt.Tx, next, hot uint32) error
		verify  string // what Verify reports
		session string // whose reads fail
		warm    bool   // a small append to "cold" keeps it cold
	}{
		{"a state in h of the next number", func(tx *bolt.Tx, next, _ uint32) error {
			return tx.Bucket([]byte("h")).Put(num(next, 0x00), tx.Bucket([]byte("s/cold")).Get([]byte{0xFF}))
		}, `hot bucket: key 00000000000000 of session number 1, which no session has`, "", true},
		{"an id key in e of the next number", func(tx *bolt.Tx, next, _ uint32) error {
			return tx.Bucket([]byte("e")).Put(num(next, 0xFF, 0x00), []byte("cold"))
		}, `of session number 1, which no session has`, "", true},
		{"a journal entry of the next number", func(tx *bolt.Tx, next, _ uint32) error {
			j := tx.Bucket([]byte("j"))
			g, _ := j.NextSequence()
			return j.Put(binary.BigEndian.AppendUint64(nil, g), num(next, 0, 0, 0, 0, 0, 0, 0, 11, 0x90))
		}, `of session number 1, which no session has`, "", true},
		{"a cold session with a number", func(tx *bolt.Tx, _, _ uint32) error {
			return tx.Bucket([]byte("s/cold")).Put([]byte{0}, num(7))
		}, `a state in the session's bucket, which only a session without a number (cold) has`, "cold", false},
		{"a cold session without its state", func(tx *bolt.Tx, _, _ uint32) error {
			return tx.Bucket([]byte("s/cold")).Delete([]byte{0xFF})
		}, "cold", "cold", false},
		{"a hot session without its state", func(tx *bolt.Tx, _, hot uint32) error {
			return tx.Bucket([]byte("h")).Delete(num(hot, 0x00))
		}, "hot", "hot", false},
		{"a hot session without its head when it turned hot", func(tx *bolt.Tx, _, hot uint32) error {
			return tx.Bucket([]byte("h")).Delete(num(hot, 0x02))
		}, "no record", "", false},
		{"a hot session with another head when it turned hot", func(tx *bolt.Tx, _, hot uint32) error {
			return tx.Bucket([]byte("h")).Put(num(hot, 0x02), binary.BigEndian.AppendUint64(nil, 7))
		}, "turned hot at head 7, its last event in its own bucket is 10", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, next, hot := fixture(t)
			b, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Update(func(tx *bolt.Tx) error { return tc.damage(tx, next, hot) }); err != nil {
				t.Fatal(err)
			}
			b.Close()
			// Replace the key in the expected text with the real one.
			want := strings.ReplaceAll(tc.verify, "00000000000000", fmt.Sprintf("%x", num(next, 0x00)))
			if ps := verifyPath(t, path); !strings.Contains(fmt.Sprint(ps), want) {
				t.Errorf("Verify: %v, want a problem containing %q", ps, want)
			}
			db, err := store.Open(path, store.Options{NoSync: true, JournalEvents: 100})
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, db)
			if tc.session != "" {
				err := db.View(func(s *store.Snapshot) error { _, err := s.Info(tc.session); return err })
				if !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("Info(%q): %v, want ErrCorrupt", tc.session, err)
				}
			}
			if tc.warm {
				if _, err := db.Append("cold", tier.Event{Kind: tier.KindUser, Text: "hi"}); err != nil {
					t.Errorf("a small append to cold: %v", err)
				}
				if _, err := db.Append("hot", tier.Event{Kind: tier.KindUser, Text: "hi"}); err != nil {
					t.Errorf("another session's append: %v", err)
				}
			}
		})
	}
}
