package boltfile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend"
)

// wantCorrupt fails the test unless err is a CorruptError of session and
// its message says reason.
func wantCorrupt(t *testing.T, what string, err error, session, reason string) {
	t.Helper()
	var ce *backend.CorruptError
	switch {
	case !errors.Is(err, backend.ErrCorrupt) || !errors.As(err, &ce):
		t.Errorf("%s = %v, want a CorruptError", what, err)
	case ce.Session != session:
		t.Errorf("%s = %v, want it to name session %q", what, err, session)
	case !strings.Contains(err.Error(), reason):
		t.Errorf("%s = %v, want it to say %q", what, err, reason)
	}
}

// graphFile makes a closed database with session s of 6,000 events and
// 3,000 nodes — branch pages in its bucket and in its nodes table — and a
// small session t.
func graphFile(t *testing.T) string {
	t.Helper()
	b, path := newDB(t)
	fill(t, b, "s", 6000, 3000)
	fill(t, b, "t", 5, 5)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// keySeq returns the seq of event key k.
func keySeq(t *testing.T, k []byte) uint64 {
	t.Helper()
	if len(k) != eventKeyLen || k[0] != eventPrefix {
		t.Fatalf("key %x is not an event's", k)
	}
	return binary.BigEndian.Uint64(k[1:])
}

// TestDamage_Cycles points an element of a branch page of session s's
// bucket, or of its nodes table, at the page itself, at an ancestor, or
// past the end of the file, and reads every way: each read that reaches it
// is a CorruptError naming the session, none hangs, and session t stays
// readable.
func TestDamage_Cycles(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	clean := graphFile(t)
	sessRoot := rootOf(t, clean, "s/s")
	nodesRoot := rootOf(t, clean, "s/s", "nodes")
	topRoot := rootOf(t, clean)
	// The damage goes in the last branch page of the rightmost path's
	// lowest branch level with a few elements, below its parent (the
	// bucket's root) when the tree is deep enough.
	lowBranch := func(root uint64) (id, parent uint64, p page) {
		id, parent = root, root
		for {
			b := readPage(t, clean, id, branchFlag)
			p = page{id: id, b: b, n: le16(b[10:])}
			c := readPage(t, clean, p.child(p.n-1), -1)
			if le16(c[8:]) != branchFlag {
				return id, parent, p
			}
			id, parent = p.child(p.n-1), id
		}
	}
	sID, sParent, s := lowBranch(sessRoot)
	nID, nParent, nodes := lowBranch(nodesRoot)
	if s.n < 3 || nodes.n < 3 || sID == sParent || nID == nParent {
		t.Fatalf("the session's low branch page has %d elements (page %d, parent %d), its nodes' %d (page %d, parent %d)",
			s.n, sID, sParent, nodes.n, nID, nParent)
	}
	// Keys routed to the middle element and to the last.
	seqMid, seqLast := keySeq(t, s.key(s.n/2))+1, keySeq(t, s.key(s.n-1))+1
	nodeMid, nodeLast := append([]byte(nil), nodes.key(nodes.n/2)...), u64(3000)

	type damage struct {
		name   string
		page   uint64 // the branch page changed
		elem   func(n int) int
		child  uint64 // what the element points at
		reason string
		fail   []string // the reads that reach the damage
	}
	mid := func(n int) int { return n / 2 }
	last := func(n int) int { return n - 1 }
	cases := []damage{
		{"session/self", sID, mid, sID, "reached twice", []string{"Event mid", "Events all", "Events mid"}},
		{"session/parent", sID, mid, sParent, "reached twice", []string{"Event mid", "Events all", "Events mid"}},
		{"session/ancestor", sID, mid, topRoot, "below its branch key", []string{"Event mid", "Events all", "Events mid"}},
		// A branch page's every child id is checked: any read through it
		// fails.
		{"session/past the end", sID, mid, 1 << 40, "outside", []string{"State", "Event mid", "Event last", "Events all", "Events mid", "PutEvent"}},
		{"session/last", sID, last, sID, "reached twice", []string{"State", "Event last", "Events all", "PutEvent"}},
		{"nodes/self", nID, last, nID, "reached twice", []string{"Get last", "Scan", "Scan mid", "Last", "Put"}},
		{"nodes/mid", nID, mid, nID, "reached twice", []string{"Get mid", "Scan", "Scan mid", "Last mid"}},
		{"nodes/parent", nID, mid, nParent, "reached twice", []string{"Get mid", "Scan", "Scan mid", "Last mid"}},
		{"nodes/another bucket", nID, mid, sessRoot, "not below the next branch key", []string{"Get mid", "Scan", "Scan mid", "Last mid"}},
	}
	all := func(uint64, []byte) (bool, error) { return true, nil }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			copyFile(t, clean, path)
			pg := readPage(t, path, tc.page, branchFlag)
			binary.LittleEndian.PutUint64(pg[pageHeader+tc.elem(le16(pg[10:]))*elementSize+8:], tc.child)
			writePage(t, path, tc.page, pg)
			for _, ro := range []bool{true, false} {
				b, err := Open(path, Options{ReadOnly: ro, NoSync: true})
				if err != nil {
					t.Fatalf("Open (read-only %v): %v", ro, err)
				}
				in := func(fn func(s backend.Session) error, write bool) func() error {
					return func() error {
						f := b.View
						if write {
							f = b.Update
						}
						return f(func(tx backend.Tx) error {
							s, err := tx.Session("s")
							if err != nil {
								return err
							}
							return fn(s)
						})
					}
				}
				scan := func(from []byte) func(s backend.Session) error {
					return func(s backend.Session) error {
						n := 0
						return s.Scan(backend.Nodes, from, func([]byte, []byte) (bool, error) { n++; return n < 3000, nil })
					}
				}
				reads := map[string]func() error{
					"State":      in(func(s backend.Session) error { _, err := s.State(); return err }, false),
					"Event mid":  in(func(s backend.Session) error { _, err := s.Event(seqMid); return err }, false),
					"Event last": in(func(s backend.Session) error { _, err := s.Event(seqLast); return err }, false),
					"Events all": in(func(s backend.Session) error { return s.Events(1, ^uint64(0), all) }, false),
					"Events mid": in(func(s backend.Session) error { return s.Events(seqMid-2, seqMid+2, all) }, false),
					"Get mid":    in(func(s backend.Session) error { _, err := s.Get(backend.Nodes, nodeMid); return err }, false),
					"Get last":   in(func(s backend.Session) error { _, err := s.Get(backend.Nodes, nodeLast); return err }, false),
					"Scan":       in(scan(nil), false),
					"Scan mid":   in(scan(nodeMid), false),
					"Last":       in(func(s backend.Session) error { _, _, err := s.Last(backend.Nodes, nil); return err }, false),
					"Last mid":   in(func(s backend.Session) error { _, _, err := s.Last(backend.Nodes, nodeMid); return err }, false),
				}
				if !ro {
					reads["PutEvent"] = in(func(s backend.Session) error { return s.PutEvent(6001, []byte("more")) }, true)
					reads["Put"] = in(func(s backend.Session) error { return s.Put(backend.Nodes, nodeLast, []byte("again")) }, true)
				}
				// Reads first, then writes: a write that succeeds copies the
				// damaged page, and the reads after it meet the damage
				// through the copy, by another check.
				names := slices.Sorted(maps.Keys(reads))
				slices.SortStableFunc(names, func(a, b string) int {
					w := func(s string) int {
						if strings.HasPrefix(s, "Put") {
							return 1
						}
						return 0
					}
					return cmp.Compare(w(a), w(b))
				})
				for _, name := range names {
					fn := reads[name]
					err := within(t, name, fn)
					if !slices.Contains(tc.fail, name) {
						if err != nil {
							t.Errorf("read-only %v: %s = %v, want what is true", ro, name, err)
						}
						continue
					}
					reason := tc.reason
					if !ro {
						reason = "damaged page graph"
					}
					wantCorrupt(t, fmt.Sprintf("read-only %v: %s", ro, name), err, "s", reason)
				}
				// The other session is untouched.
				if err := b.View(func(tx backend.Tx) error {
					s := mustSession(t, tx, "t")
					if v, err := s.Event(5); err != nil || !bytes.Equal(v, eventText("t", 5)) {
						t.Errorf("t's event 5 = %q, %v", v, err)
					}
					return s.Events(1, 5, all)
				}); err != nil {
					t.Errorf("session t: %v", err)
				}
				// Check reports it, naming the session.
				var problems []string
				if err := b.View(func(tx backend.Tx) error {
					safe, err := b.Check(tx, func(session, what string) { problems = append(problems, session+": "+what) })
					if !safe {
						t.Error("Check: not safe, for damage inside one session")
					}
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if len(problems) == 0 || !strings.HasPrefix(problems[0], "s: ") {
					t.Errorf("Check found %q, want the damage in session s", problems)
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamage_RootList points a branch page of the root bucket, which lists
// the sessions, at itself: Open is ErrCorrupt, and does not hang.
func TestDamage_RootList(t *testing.T) {
	b, path := newDB(t)
	mustUpdate(t, b, func(tx backend.Tx) error {
		for i := 0; i < 300; i++ {
			if _, err := tx.CreateSession(fmt.Sprintf("session-with-a-long-name-%04d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	b.Close()
	root := rootOf(t, path)
	pg := readPage(t, path, root, branchFlag)
	binary.LittleEndian.PutUint64(pg[pageHeader+elementSize+8:], root)
	writePage(t, path, root, pg)
	err := within(t, "Open", func() error {
		b, err := Open(path, Options{ReadOnly: true})
		if err == nil {
			b.Close()
		}
		return err
	})
	if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v, want ErrCorrupt naming the page reached twice and the file", err)
	}
}

// TestDamage_Identity: the CRC covers where a record is. A session bucket
// renamed by one flipped bit, an event moved to another seq, a record
// moved to another table or session: each reads as a CorruptError naming
// the place, never as the other's data.
func TestDamage_Identity(t *testing.T) {
	b, path := newDB(t)
	for _, id := range []string{"sa", "sz"} {
		fill(t, b, id, 10, 3)
	}
	b.Close()

	t.Run("renamed session", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "strata.db")
		copyFile(t, path, p)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// "s/sa" is the key in the root bucket's leaf; the data of "sa"
		// holds no such bytes. One bit makes it "s/sc", still in order.
		// Stale copies of the root's leaf, in free pages, change too.
		n := bytes.Count(raw, []byte("s/sa"))
		if n == 0 {
			t.Fatal("the key s/sa is not in the file")
		}
		raw = bytes.ReplaceAll(raw, []byte("s/sa"), []byte("s/sc"))
		if err := os.WriteFile(p, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := Open(p, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		mustView(t, b, func(tx backend.Tx) error {
			if s, err := tx.Session("sa"); s != nil || err != nil {
				t.Errorf("sa = %v, %v", s, err)
			}
			s := mustSession(t, tx, "sc")
			_, err := s.State()
			wantCorrupt(t, "sc's State", err, "sc", "checksum mismatch")
			_, err = s.Event(1)
			wantCorrupt(t, "sc's Event", err, "sc", "checksum mismatch")
			_, err = s.Get(backend.Nodes, u64(1))
			wantCorrupt(t, "sc's Get", err, "sc", "checksum mismatch")
			err = s.Scan(backend.Nodes, nil, func([]byte, []byte) (bool, error) { return true, nil })
			wantCorrupt(t, "sc's Scan", err, "sc", "checksum mismatch")
			return nil
		})
	})

	p := filepath.Join(t.TempDir(), "strata.db")
	copyFile(t, path, p)
	rawUpdate(t, p, func(tx *bolt.Tx) error {
		sa, sz := tx.Bucket([]byte("s/sa")), tx.Bucket([]byte("s/sz"))
		clone := func(v []byte) []byte { return append([]byte(nil), v...) }
		// sz's event 2 is sa's event 2; sa's event 3 is its event 4.
		if err := sz.Put(eventKey(2), clone(sa.Get(eventKey(2)))); err != nil {
			return err
		}
		if err := sa.Put(eventKey(3), clone(sa.Get(eventKey(4)))); err != nil {
			return err
		}
		// sa's roots hold its node 1; its markers its ckpts' record.
		n1 := clone(sa.Bucket([]byte("nodes")).Get(u64(1)))
		if err := sa.Bucket([]byte("roots")).Put(u64(1), n1); err != nil {
			return err
		}
		// Records shorter than the trailer, of another envelope version.
		if err := sa.Bucket([]byte("nodes")).Put(u64(2), []byte{1, 2}); err != nil {
			return err
		}
		v3 := clone(sa.Bucket([]byte("nodes")).Get(u64(3)))
		v3[len(v3)-1] = 9
		return sa.Bucket([]byte("nodes")).Put(u64(3), v3)
	})
	b, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustView(t, b, func(tx backend.Tx) error {
		sa, sz := mustSession(t, tx, "sa"), mustSession(t, tx, "sz")
		_, err := sz.Event(2)
		wantCorrupt(t, "sz's event 2 (sa's)", err, "sz", "checksum mismatch")
		_, err = sa.Event(3)
		wantCorrupt(t, "sa's event 3 (its 4)", err, "sa", "checksum mismatch")
		err = sa.Events(1, 10, func(uint64, []byte) (bool, error) { return true, nil })
		wantCorrupt(t, "sa's events", err, "sa", "checksum mismatch")
		_, err = sa.Get(backend.Roots, u64(1))
		wantCorrupt(t, "sa's root 1 (a node)", err, "sa", "checksum mismatch")
		_, err = sa.Get(backend.Nodes, u64(2))
		wantCorrupt(t, "a 2-byte record", err, "sa", "shorter")
		_, err = sa.Get(backend.Nodes, u64(3))
		wantCorrupt(t, "envelope version 9", err, "sa", "envelope version 9")
		_, _, err = sa.Last(backend.Nodes, nil)
		wantCorrupt(t, "Last", err, "sa", "envelope version 9")
		if v, err := sa.Event(4); err != nil || !bytes.Equal(v, eventText("sa", 4)) {
			t.Errorf("sa's event 4 = %q, %v", v, err)
		}
		var problems []string
		safe, err := b.Check(tx, func(session, what string) { problems = append(problems, session+": "+what) })
		if err != nil || !safe {
			t.Errorf("Check = %v, %v", safe, err)
		}
		want := []string{"sa: ", "sa: ", "sa: ", "sa: ", "sz: "}
		if len(problems) != len(want) {
			t.Fatalf("Check found %q, want 5 problems", problems)
		}
		for i, w := range want {
			if !strings.HasPrefix(problems[i], w) {
				t.Errorf("problem %d = %q, want it in %q", i, problems[i], w)
			}
		}
		return nil
	})
}

// An event key of the wrong length is damage.
func TestDamage_EventKey(t *testing.T) {
	b, path := newDB(t)
	fill(t, b, "s", 5, 0)
	b.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("s/s")).Put([]byte{eventPrefix, 0, 0, 0, 0, 0, 0, 0, 3, 1}, []byte("x"))
	})
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustView(t, b, func(tx backend.Tx) error {
		err := mustSession(t, tx, "s").Events(1, 5, func(uint64, []byte) (bool, error) { return true, nil })
		wantCorrupt(t, "Events", err, "s", "event key of 10 bytes")
		return nil
	})
}

// TestDamage_LeafCount: one bit less in the element count of a leaf page of
// a session's nodes table, or of its events, makes bbolt skip the records
// the count leaves out without breaking any checksum. The bytes of those
// records are still on the page, past the last element the count names:
// every read of that leaf is a CorruptError naming the session, never a
// short answer.
func TestDamage_LeafCount(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	b, err := Open(clean, Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, b, "s", 150, 150)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"nodes", ""} {
		name := table
		if name == "" {
			name = "events"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".db")
			copyFile(t, clean, path)
			where := []string{"s/s"}
			if table != "" {
				where = append(where, table)
			}
			// The first leaf: down the leftmost children.
			id := rootOf(t, path, where...)
			p := readPage(t, path, id, -1)
			for le16(p[8:]) == branchFlag {
				id = (&page{b: p, n: le16(p[10:])}).child(0)
				p = readPage(t, path, id, -1)
			}
			n := le16(p[10:])
			if n < 2 {
				t.Fatalf("leaf page %d has %d elements", id, n)
			}
			less := n &^ (n & -n) // the lowest bit set, cleared
			binary.LittleEndian.PutUint16(p[10:], uint16(less))
			writePage(t, path, id, p)

			b, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			err = within(t, "a read of the damaged leaf", func() error {
				return b.View(func(tx backend.Tx) error {
					s, err := tx.Session("s")
					if err != nil {
						return err
					}
					if table == "" {
						return s.Events(1, 150, func(uint64, []byte) (bool, error) { return true, nil })
					}
					return s.Scan(backend.Nodes, nil, func(_, _ []byte) (bool, error) { return true, nil })
				})
			})
			wantCorrupt(t, fmt.Sprintf("a read of leaf %d, its count %d made %d", id, n, less), err, "s", "the element count is damaged")
		})
	}
}
