package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/tier"
)

// within runs fn and fails the test if it takes more than a few seconds: a
// read on a page graph with a cycle would loop forever (or recurse until
// the stack overflows, which takes the whole test binary down).
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s hangs", what)
		return nil
	}
}

// rewritePage writes page back at id in the file f.
func rewritePage(t *testing.T, f *os.File, id uint64, page []byte) {
	t.Helper()
	if _, err := f.WriteAt(page, int64(id)*int64(len(page))); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// rootOf returns the root page of the bucket at path inside the database
// file (bucket names from the top; none: the root bucket).
func rootOf(t *testing.T, dbPath string, path ...string) uint64 {
	t.Helper()
	bdb, err := bolt.Open(dbPath, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var root uint64
	if err := bdb.View(func(tx *bolt.Tx) error {
		b := tx.Cursor().Bucket()
		for _, name := range path {
			b = b.Bucket([]byte(name))
		}
		root = uint64(b.Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGraph_SessionCycleIsAnErrorForEveryRead damages the page graph of
// session "s" three ways — a branch page pointing at itself, at an
// ancestor page in another bucket, and at a page id past the end — and
// reads it every way the API allows, on a handle that never ran Verify:
// each read returns ErrCorrupt and none hangs. Session "t" of the same file
// stays readable.
//
// One case is let through the first read's check, by design: in formats 2
// and 3 the pointer that leads to the root's leaf (the ancestor) sits where
// only events are: the check reads no leaf whole there, so it sees a leaf and
// not the buckets listed in it. No read can loop on it — a leaf holds no
// page ids a cursor follows, and nothing opens a bucket from an event's
// place — and the reads that meet it (the events) return ErrCorrupt; the
// others return what is true. Verify, which reads every leaf, reports it.
func TestGraph_SessionCycleIsAnErrorForEveryRead(t *testing.T) {
	// The ancestor: format 1's session bucket above the l0 bucket, format
	// 2's and 3's root page listing the sessions.
	ancestor := map[int][]string{1: {"sessions", "s"}, 2: nil, 3: nil}
	for _, tc := range []struct {
		name   string
		child  func(format int, path string, root uint64) uint64
		reason string
	}{
		{"self", func(_ int, _ string, root uint64) uint64 { return root }, "reached twice"},
		{"ancestor", func(format int, path string, _ uint64) uint64 { return rootOf(t, path, ancestor[format]...) }, "reached twice"},
		{"past the end", func(int, string, uint64) uint64 { return 1 << 40 }, "outside"},
	} {
		for _, format := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/format %d", tc.name, format), func(t *testing.T) {
				path, f, root, page := l0BranchPage(t, format)
				binary.LittleEndian.PutUint64(page[boltPageHeader+boltElement+8:], tc.child(format, path, root))
				rewritePage(t, f, root, page)

				for _, ro := range []bool{true, false} {
					db, err := Open(path, Options{ReadOnly: ro, NoSync: !ro})
					if err != nil {
						t.Fatalf("Open (read-only %v): %v", ro, err)
					}
					reads := map[string]func() error{
						"Resume": func() error { _, err := db.Resume("s", 0); return err },
						"Info":   func() error { _, err := db.Info("s"); return err },
						"Events": func() error {
							return db.View(func(s *Snapshot) error {
								return s.Events("s", 1, ^uint64(0), func(tier.Event) error { return nil })
							})
						},
						"Roots": func() error {
							return db.View(func(s *Snapshot) error { _, err := s.Roots("s"); return err })
						},
						"PlanSpan": func() error {
							_, err := db.PlanSpan("s", SpanPolicy{Events: 10}, 1000)
							return err
						},
					}
					if !ro {
						reads["Append"] = func() error {
							_, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "more"})
							return err
						}
					}
					leafAmongEvents := tc.name == "ancestor" && format >= 2
					for name, read := range reads {
						err := within(t, name, read)
						switch {
						case leafAmongEvents && (name == "Events" || name == "Resume" || name == "PlanSpan"):
							if !errors.Is(err, ErrCorrupt) {
								t.Errorf("read-only %v: %s = %v, want ErrCorrupt", ro, name, err)
							}
						case leafAmongEvents:
							if err != nil {
								t.Errorf("read-only %v: %s = %v, want what is true", ro, name, err)
							}
						case !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.reason):
							t.Errorf("read-only %v: %s = %v, want ErrCorrupt naming %q", ro, name, err, tc.reason)
						}
					}
					if leafAmongEvents {
						rep, err := db.Verify(VerifyOptions{})
						if err != nil || rep.OK() {
							t.Errorf("read-only %v: Verify %v %v, want the damage reported", ro, rep.Problems, err)
						}
					}
					if info, err := db.Info("t"); err != nil || info.Head != 5 {
						t.Errorf("read-only %v: session t: %+v, %v; want head 5", ro, info, err)
					}
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// TestGraph_OpenRefusesADamagedSessionList points a branch page of the
// sessions bucket at itself: Open (which lists sessions and reads the
// format) returns ErrCorrupt instead of recursing forever.
func TestGraph_OpenRefusesADamagedSessionList(t *testing.T) {
	for _, format := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "strata.db")
			db, err := Open(path, Options{Create: true, NoSync: true, Format: format})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 300; i++ {
				if _, err := db.Append(fmt.Sprintf("session-with-a-long-name-%04d", i), tier.Event{Kind: tier.KindUser, Text: "hi"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			var root uint64
			if format == 1 {
				root = rootOf(t, path, "sessions")
			} else {
				root = rootOf(t, path) // the root bucket lists the sessions
			}
			f, page := openBranchPage(t, path, root, "sessions root")
			defer f.Close()
			binary.LittleEndian.PutUint64(page[boltPageHeader+8:], root)
			rewritePage(t, f, root, page)

			err = within(t, "Open", func() error {
				db, err := Open(path, Options{ReadOnly: true})
				if err == nil {
					db.Close()
				}
				return err
			})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") {
				t.Fatalf("Open = %v, want ErrCorrupt naming the page reached twice", err)
			}
		})
	}
}

// e3Damaged is l0BranchPage's format-3 file (session s of 3,000 events,
// then t of 5) with element i of the events bucket's root branch page —
// counted from the end when negative — pointing back at that page.
func e3Damaged(t *testing.T, pick func(page []byte, count int) int) string {
	t.Helper()
	path, f, root, page := l0BranchPage(t, 3)
	count := int(binary.LittleEndian.Uint16(page[10:]))
	i := pick(page, count)
	binary.LittleEndian.PutUint64(page[boltPageHeader+i*boltElement+8:], root)
	rewritePage(t, f, root, page)
	return path
}

// TestGraph_Format3NewSessionOnADamagedPath: a new session's keys go to
// the end of format 3's events bucket, where no read of the handle has
// been; a cycle there fails the append that would make the session with
// ErrCorrupt — before the check, bbolt's descent overflowed the stack and
// took the process down — and makes nothing.
func TestGraph_Format3NewSessionOnADamagedPath(t *testing.T) {
	path := e3Damaged(t, func(_ []byte, count int) int { return count - 1 })
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = within(t, "Append to a new session", func() error {
		_, err := db.Append("new", tier.Event{Kind: tier.KindUser, Text: "hi"})
		return err
	})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") {
		t.Errorf("Append to a new session = %v, want ErrCorrupt naming the cycle", err)
	}
	if _, err := db.Info("new"); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("Info(new) = %v: the failed append made the session", err)
	}
}

// TestGraph_Format3WalksTheLeftSibling: the walk of a session in format 3
// also reaches the rightmost path of the element before its keys — the
// leaf bbolt merges the session's first leaf into when resolving an open
// call leaves it under half full — so a cycle there is the session's
// ErrCorrupt, not a descent no check has seen.
func TestGraph_Format3WalksTheLeftSibling(t *testing.T) {
	lo := binary.BigEndian.AppendUint32(nil, 1) // session t's keys start here
	path := e3Damaged(t, func(page []byte, count int) int {
		// Element i can hold t's keys when the next one's key is above
		// lo: the first such is m-1, and the one before it m-2.
		m := 1
		for m < count && bytes.Compare(branchKey(page, m), lo) <= 0 {
			m++
		}
		if m < 2 {
			t.Fatal("session t's keys start in the first element")
		}
		return m - 2
	})
	db, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = within(t, "Info", func() error { _, err := db.Info("t"); return err })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") {
		t.Errorf("Info(t) = %v, want ErrCorrupt naming the cycle", err)
	}
}

// openBranchPage opens the file at path for writing and reads page root,
// which must be a branch page (what names it in the failure).
func openBranchPage(t *testing.T, path string, root uint64, what string) (*os.File, []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, os.Getpagesize())
	if _, err := f.ReadAt(page, int64(root)*int64(len(page))); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if flags := binary.LittleEndian.Uint16(page[8:]); flags != boltBranchFlag {
		f.Close()
		t.Fatalf("%s page %d has flags %#x, want a branch page", what, root, flags)
	}
	return f, page
}
