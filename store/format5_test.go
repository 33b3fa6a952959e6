package store_test

import (
	"path/filepath"
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
