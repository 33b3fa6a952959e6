package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	stderrors "errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	cerrors "github.com/cockroachdb/errors"
	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
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

var damageCases = flag.Int("strata.damage-cases", 16, "random data-page damages of TestDamage_Files (on top of the fixed cases)")

var damageSeed = flag.Int64("strata.damage-seed", 0, "the seed of TestDamage_Files' random damages (0: from the clock; the seed is logged)")

// Environment of the damage child: the damaged file and the pristine one.
const (
	damageChildEnv = "STRATA_TEST_DAMAGE_CHILD_DB"
	damageOrigEnv  = "STRATA_TEST_DAMAGE_ORIG_DB"
)

// TestDamage_Child is not a test: it is the child process of
// TestDamage_Files. It opens the damaged file read-only, verifies it, reads
// back every event, node and resumed context and compares each with the
// pristine copy, and prints one verdict line:
//
//	open-typed CLASS | open-untyped ERR | read VERIFY-PROBLEMS READ-ERRORS WRONG-VALUES
func TestDamage_Child(t *testing.T) {
	path := os.Getenv(damageChildEnv)
	if path == "" {
		t.Skip("helper process for TestDamage_Files")
	}
	db, err := store.Open(path, store.Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		for _, c := range []struct {
			name string
			err  error
		}{{"corrupt", store.ErrCorrupt}, {"not-strata", store.ErrNotStrata}, {"empty", store.ErrEmptyFile}, {"too-new", store.ErrFormatTooNew}, {"too-old", store.ErrFormatTooOld}} {
			if cerrors.Is(err, c.err) {
				fmt.Printf("verdict open-typed %s\n", c.name)
				os.Exit(0)
			}
		}
		fmt.Printf("verdict open-untyped %q\n", err.Error())
		os.Exit(0)
	}
	problems := 0
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		problems++ // Verify could not run: damage found
	}
	problems += len(rep.Problems)

	orig, err := store.Open(os.Getenv(damageOrigEnv), store.Options{ReadOnly: true})
	if err != nil {
		fmt.Printf("error: pristine copy: %v\n", err)
		os.Exit(2)
	}
	readErrs, wrong := 0, []string{}
	var firstErrs []string
	readErr := func(what string, err error) {
		readErrs++
		if len(firstErrs) < 3 {
			firstErrs = append(firstErrs, strings.ReplaceAll(fmt.Sprintf("%s: %v", what, err), " ", "_"))
		}
	}
	_ = orig.View(func(o *store.Snapshot) error {
		return db.View(func(d *store.Snapshot) error {
			ids, _ := o.Sessions()
			for _, id := range ids {
				oi, _ := o.Info(id)
				di, err := d.Info(id)
				if err != nil {
					readErr("info", err)
					continue
				}
				if di != oi {
					wrong = append(wrong, fmt.Sprintf("%s info", id))
				}
				for seq := uint64(1); seq <= oi.Head; seq++ {
					var oe, de []tier.Event
					_ = o.Events(id, seq, seq, func(e tier.Event) error { oe = append(oe, e); return nil })
					if err := d.Events(id, seq, seq, func(e tier.Event) error { de = append(de, e); return nil }); err != nil {
						readErr("event", err)
						continue
					}
					if !reflect.DeepEqual(oe, de) {
						wrong = append(wrong, fmt.Sprintf("%s seq %d", id, seq))
					}
				}
				_ = o.Nodes(id, func(n tier.Node) error {
					dn, err := d.Node(id, n.ID)
					if err != nil {
						readErr("node", err)
					} else if !reflect.DeepEqual(n, dn) {
						wrong = append(wrong, fmt.Sprintf("%s node %d", id, n.ID))
					}
					return nil
				})
				oc, _ := o.Resume(id, store.Latest)
				dc, err := d.Resume(id, store.Latest)
				if err != nil {
					readErr("resume", err)
				} else if !bytes.Equal(oc.Text(), dc.Text()) {
					wrong = append(wrong, fmt.Sprintf("%s resume", id))
				}
			}
			return nil
		})
	})
	fmt.Printf("verdict read %d %d %d %s %s\n", problems, readErrs, len(wrong), strings.Join(wrong, ","), strings.Join(firstErrs, " "))
	os.Exit(0)
}

// damageCase is one damaged file.
type damageCase struct {
	name   string
	data   []byte
	edit   func(t *testing.T, path string) // after writing data
	region string                          // what was damaged, for the tally
}

// damageSource builds the pristine database: three sessions, compacted
// by extractive and lossy summarizers, with folds (and digests in beta).
func damageSource(t *testing.T) (path string, full []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "pristine.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	lossy, _ := compaction.NewLossy(compaction.DropNegatives)
	for i, s := range []string{"alpha", "beta", "gamma"} {
		var sum compaction.Summarizer = compaction.Extractive{}
		if i == 2 {
			sum = lossy
		}
		policy := compaction.Policy{EveryTurns: 2, Fold: 2}
		if i == 1 {
			policy.MaxRoots = 2 // digests, and the facts nodes over a prefix record
		}
		c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		log := injectLog(12)
		for j := range log {
			log[j].Text += strings.Repeat(fmt.Sprintf(" %s-%d", s, j), 20)
		}
		for len(log) > 0 {
			n := min(len(log), 5)
			mustAppend(t, db, s, log[:n]...)
			log = log[n:]
			if _, err := c.Run(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	full, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, full
}

func damageCasesFor(t *testing.T, full []byte, rng *rand.Rand, random int) []damageCase {
	const page = 4096
	pages := len(full) / page
	var cases []damageCase
	add := func(name, region string, data []byte) {
		cases = append(cases, damageCase{name: name, region: region, data: data})
	}
	add("zero-length", "file", nil)
	for p := 1; p < pages; p++ {
		if p > 16 && p%8 != 0 && p != pages-1 {
			continue
		}
		add(fmt.Sprintf("truncated at page %d of %d", p, pages), "truncation", bytes.Clone(full[:p*page]))
	}
	add("truncated mid-page", "truncation", bytes.Clone(full[:len(full)/2+100]))
	flip := func(off int, bit uint) []byte {
		b := bytes.Clone(full)
		b[off] ^= 1 << bit
		return b
	}
	for m := 0; m < 2; m++ {
		for _, off := range []int{0, 8, 16, 20, 24, 32, 48, 56, 64, 72} { // page id, flags, magic, version, page size, root, freelist, pgid, txid, checksum
			add(fmt.Sprintf("meta page %d bit flip at %d", m, off), "meta", flip(m*page+off, uint(rng.Intn(8))))
		}
		b := bytes.Clone(full)
		rng.Read(b[m*page : m*page+128])
		add(fmt.Sprintf("meta page %d random bytes", m), "meta", b)
	}
	both := bytes.Clone(full)
	both[20] ^= 1
	both[page+20] ^= 1
	add("both meta pages damaged", "meta", both)
	// The freelist page's overflow count: tx.Check counts up to it, and
	// 0xFFFFFFFF never ends.
	m := 0
	if binary.LittleEndian.Uint64(full[page+64:]) > binary.LittleEndian.Uint64(full[64:]) {
		m = 1
	}
	over := bytes.Clone(full)
	binary.LittleEndian.PutUint32(over[int(binary.LittleEndian.Uint64(full[m*page+48:]))*page+12:], 0xFFFFFFFF)
	add("freelist page overflow", "data", over)
	for i := 0; i < random; i++ {
		off := 2*page + rng.Intn(len(full)-2*page)
		switch i % 3 {
		case 0:
			add(fmt.Sprintf("data bit flip at %d", off), "data", flip(off, uint(rng.Intn(8))))
		case 1:
			b := bytes.Clone(full)
			n := 1 + rng.Intn(64)
			rng.Read(b[off:min(off+n, len(b))])
			add(fmt.Sprintf("data random %d bytes at %d", n, off), "data", b)
		case 2:
			b := bytes.Clone(full)
			p := off / page * page
			clear(b[p : p+page])
			add(fmt.Sprintf("data page %d zeroed", p/page), "data", b)
		}
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 3*page)...)
	rng.Read(png[8:])
	add("foreign: a PNG", "foreign", png)
	add("foreign: text", "foreign", bytes.Repeat([]byte("not a database\n"), 2000))
	add("foreign: SQLite header", "foreign", append([]byte("SQLite format 3\x00"), make([]byte, 2*page)...))
	if exe, err := os.ReadFile(os.Args[0]); err == nil {
		add("foreign: an executable", "foreign", exe[:min(len(exe), 64<<10)])
	}
	for _, f := range []int{boltfile.MinFormatVersion - 1, boltfile.FormatVersion + 1} {
		cases = append(cases, damageCase{name: fmt.Sprintf("format version %d", f), region: "format", data: bytes.Clone(full), edit: func(t *testing.T, p string) {
			editBolt(t, p, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("version"), metaRecord(t, f)) })
		}})
	}
	cases = append(cases, damageCase{name: "foreign: bbolt without strata's buckets", region: "foreign", edit: func(t *testing.T, p string) {
		os.Remove(p)
		writeBolt(t, p, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("other"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})
	}})
	return cases
}

// TestDamage_Files damages copies of a database in every way we know —
// zero length, truncation at page boundaries, bit flips and random bytes on
// the meta pages and on data pages, zeroed pages, foreign files, a format
// too new or too old — and has a child process open, verify and read each
// against the pristine copy. Each case must end in a typed error at Open, or problems
// found by Verify, or (damage to unused space) a clean read of exactly the
// data written; never a crash, never a hang, never a value that differs
// from what was written without an error. -strata.damage-cases=N sets the
// number of random data-page damages.
func TestDamage_Files(t *testing.T) {
	t.Parallel()
	random := *damageCases
	if testing.Short() {
		random = min(random, 10)
	}
	seed := *damageSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (-strata.damage-seed to repeat)", seed)
	rng := rand.New(rand.NewSource(seed))
	origPath, full := damageSource(t)
	cases := damageCasesFor(t, full, rng, random)
	dir := t.TempDir()

	type outcome struct{ kind, detail string }
	results := make([]outcome, len(cases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	began := time.Now()
	for i := range cases {
		tc := &cases[i]
		p := filepath.Join(dir, fmt.Sprintf("case-%d.db", i))
		if tc.data != nil || tc.edit == nil {
			if err := os.WriteFile(p, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if tc.edit != nil {
			tc.edit(t, p)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			k, d := runDamageChild(p, origPath, tc.region)
			results[i] = outcome{k, d}
		}()
	}
	wg.Wait()

	tally := map[string]int{}
	regions := map[string]map[string]int{}
	for i, r := range results {
		tc := cases[i]
		tally[r.kind]++
		if regions[tc.region] == nil {
			regions[tc.region] = map[string]int{}
		}
		regions[tc.region][r.kind]++
		switch r.kind {
		case "open-typed", "found-by-verify", "clean", "previous-transaction":
		default:
			t.Errorf("%s: %s %s", tc.name, r.kind, r.detail)
		}
		if tc.region == "format" && (r.kind != "open-typed" || (r.detail != "too-new" && r.detail != "too-old")) {
			t.Errorf("%s: %s %s, want the format refused as too new or too old", tc.name, r.kind, r.detail)
		}
		if r.kind == "clean" && tc.region != "data" && tc.region != "truncation" {
			t.Errorf("%s: damage to the %s went unnoticed", tc.name, tc.region)
		}
	}
	t.Logf("%d cases in %v: %d typed errors at open, %d found by Verify, %d meta pages damaged so that bbolt read the previous transaction (reported by Verify), %d harmless (damage to unused space: every read equal to the original), %d untyped open errors, %d silent wrong values, %d crashes of the child, %d hangs",
		len(cases), time.Since(began).Round(time.Millisecond), tally["open-typed"], tally["found-by-verify"], tally["previous-transaction"], tally["clean"],
		tally["open-untyped"], tally["wrong-value"], tally["crash"], tally["hang"])
	for _, reg := range []string{"file", "truncation", "meta", "data", "foreign", "format"} {
		t.Logf("  %-10s %v", reg, regions[reg])
	}
}

// metaRecord returns a meta record of the given format, as the bbolt
// backend stores it at meta/version: msgpack {"f": format, "c": creator},
// then the backend's trailer — the CRC32C of the record's place (no
// session, the meta code 0xF0, the key) and payload, big-endian, and the
// trailer's version 1.
func metaRecord(t *testing.T, format int) []byte {
	t.Helper()
	payload, err := msgpack.Marshal(&struct {
		Format    int    `msgpack:"f"`
		CreatedBy string `msgpack:"c"`
	}{format, "strata-test"})
	if err != nil {
		t.Fatal(err)
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	key := []byte("version")
	place := append([]byte{0, 0xF0, byte(len(key))}, key...) // uvarint lengths: both under 128
	crc := crc32.Update(crc32.Checksum(place, tab), tab, payload)
	return append(binary.BigEndian.AppendUint32(payload, crc), 1)
}

// runDamageChild runs the child on path and classifies its verdict.
func runDamageChild(path, orig, region string) (kind, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDamage_Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), damageChildEnv+"="+path, damageOrigEnv+"="+orig)
	// On a hang, SIGQUIT: the child prints where every goroutine is.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		tail := stderr.String()
		if i := strings.Index(tail, "TestDamage_Child"); i > 3000 {
			tail = tail[i-3000:]
		}
		return "hang", "no verdict in 60s: " + tail[:min(len(tail), 6000)]
	}
	var verdict string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "verdict ") {
			verdict = strings.TrimPrefix(l, "verdict ")
		}
	}
	var ee *exec.ExitError
	if verdict == "" || errors.As(err, &ee) {
		tail := stderr.String()
		if i := strings.Index(tail, "goroutine "); i > 0 {
			tail = tail[:min(200, i)] + " … " + tail[i:] // the message, then the faulting goroutine
		}
		if len(tail) > 2500 {
			tail = tail[:2500]
		}
		return "crash", fmt.Sprintf("%v: %s %s", err, out.String(), tail)
	}
	f := strings.Fields(verdict)
	switch f[0] {
	case "open-typed":
		return "open-typed", f[1]
	case "open-untyped":
		return "open-untyped", verdict
	case "read":
		var problems, readErrs, wrong int
		fmt.Sscan(strings.Join(f[1:4], " "), &problems, &readErrs, &wrong)
		switch {
		case wrong > 0 && problems == 0:
			return "wrong-value", verdict
		case wrong > 0 && region == "meta":
			// bbolt fell back to the other meta page: every read is the
			// database as of the transaction before, and Verify says so.
			return "previous-transaction", verdict
		case wrong > 0:
			return "wrong-value", "(Verify reported problems, but reads returned wrong data without an error) " + verdict
		case problems > 0:
			return "found-by-verify", verdict
		case readErrs > 0:
			return "read-error-verify-clean", verdict
		}
		return "clean", verdict
	}
	return "crash", "unparsable verdict " + verdict
}

// TestVerify_SizeCounters: a state whose size counters the raw log
// contradicts — up to head, to the compacted prefix's end, to the last
// refused span's end — is a problem Verify reports, naming the counter.
func TestVerify_SizeCounters(t *testing.T) {
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "deploy"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "make deploy"},
		tier.Event{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "no credentials"},
		tier.Event{Kind: tier.KindAssistant, Text: "it failed"},
	)
	p, err := db.PlanSpan("s", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	if p, err = db.PlanSpan("s", 3, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Summarizer: "t"}); !errors.Is(err, marker.ErrMarkerInvalid) {
		t.Fatalf("the summary without the failed call: %v, want refused", err)
	}
	// The counters as the raw log gives them: up to seq 4, 1 and 3.
	var want [3]uint64
	var n uint64
	err = db.View(func(s *store.Snapshot) error {
		return s.Events("s", 1, 4, func(e tier.Event) error {
			n += uint64(checkpoint.EventTextLen(&e))
			switch e.Seq {
			case 4:
				want[0] = n
			case 1:
				want[1] = n
			case 3:
				want[2] = n
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		counter string
		edit    func(head, compacted, refused *uint64)
		want    string
	}{
		{"head", func(h, _, _ *uint64) { *h++ }, "up to head (seq 4)"},
		{"compacted", func(_, c, _ *uint64) { *c-- }, "up to the compacted prefix's end (seq 1)"},
		{"refused", func(_, _, r *uint64) { *r = 0 }, "up to the last refused span's end (seq 3)"},
	} {
		t.Run(tc.counter, func(t *testing.T) {
			if err := store.EditSizes(db, "s", tc.edit); err != nil {
				t.Fatal(err)
			}
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, tc.want) || !strings.Contains(rep.Problems[0].What, "bytes in a resumed context") {
				t.Errorf("Verify found %v, want one problem naming %q", rep.Problems, tc.want)
			}
			// Undone, the state verifies again.
			if err := store.EditSizes(db, "s", func(h, c, r *uint64) { *h, *c, *r = want[0], want[1], want[2] }); err != nil {
				t.Fatal(err)
			}
			if rep, err := db.Verify(store.VerifyOptions{}); err != nil || !rep.OK() {
				t.Errorf("restored: %v %v", err, rep.Problems)
			}
		})
	}
}

// TestVerify_RecordedFactsCheckedAgainstTheRawLog: a root whose recorded
// facts differ from what its raw span requires — what the next digest
// would extend — is reported by Verify.
func TestVerify_RecordedFactsCheckedAgainstTheRawLog(t *testing.T) {
	db := digestFixtureIn(t, dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()}), 4)
	d, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(d, store.Summary{Narrative: "n", Claims: d.Required.Claims(), Summarizer: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
	if err := store.SpoilFacts(db, "s", res.Node.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || strings.Contains(p.String(), "recorded facts differ")
	}
	if !found {
		t.Errorf("Verify reports %v, want the digest's recorded facts", rep.Problems)
	}
}
