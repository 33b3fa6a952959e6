package boltfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/internal/placecrc"
)

// newDB creates a database in a temporary directory.
func newDB(t testing.TB) (*Backend, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.db")
	b, err := Open(path, Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, path
}

func mustUpdate(t testing.TB, b *Backend, fn func(backend.Tx) error) {
	t.Helper()
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func mustView(t testing.TB, b *Backend, fn func(backend.Tx) error) {
	t.Helper()
	if err := b.View(fn); err != nil {
		t.Fatal(err)
	}
}

// mustSession returns session id, which must exist.
func mustSession(t testing.TB, tx backend.Tx, id string) backend.Session {
	t.Helper()
	s, err := tx.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		t.Fatalf("no session %q", id)
	}
	return s
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func eventText(id string, seq uint64) []byte {
	return []byte(fmt.Sprintf("%s event %d: %0100d", id, seq, seq))
}

// fill makes session id with events 1..n, records 1..nodes in Nodes, and a
// state, in one transaction.
func fill(t testing.TB, b *Backend, id string, n, nodes int) {
	t.Helper()
	mustUpdate(t, b, func(tx backend.Tx) error {
		s, err := tx.CreateSession(id)
		if err != nil {
			return err
		}
		for seq := uint64(1); seq <= uint64(n); seq++ {
			if err := s.PutEvent(seq, eventText(id, seq)); err != nil {
				return err
			}
		}
		for i := uint64(1); i <= uint64(nodes); i++ {
			if err := s.Put(backend.Nodes, u64(i), []byte(fmt.Sprintf("node %d %080d", i, i))); err != nil {
				return err
			}
		}
		return s.PutState([]byte("state of " + id))
	})
}

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

// rootOf returns the root page of the bucket at path (names from the top;
// none: the root bucket) of the closed database file dbPath.
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
			if b = b.Bucket([]byte(name)); b == nil {
				t.Fatalf("no bucket %q", name)
			}
		}
		root = uint64(b.Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return root
}

// readPage reads page id of the file at path, which must have the flags
// (unless they are negative).
func readPage(t *testing.T, path string, id uint64, flags int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, os.Getpagesize())
	if _, err := f.ReadAt(page, int64(id)*int64(len(page))); err != nil {
		t.Fatal(err)
	}
	if got := le16(page[8:]); flags >= 0 && got != flags {
		t.Fatalf("page %d has flags %#x, want %#x", id, got, flags)
	}
	return page
}

// writePage writes page back at id in the file at path.
func writePage(t *testing.T, path string, id uint64, page []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(page, int64(id)*int64(len(page))); err != nil {
		t.Fatal(err)
	}
}

// rawUpdate changes the closed database file through bbolt directly.
func rawUpdate(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// setHook sets testHook for the test.
func setHook(t *testing.T, fn func(step string) error) {
	t.Helper()
	testHook.Store(&fn)
	t.Cleanup(func() { testHook.Store(nil) })
}

func crc32Checksum(b []byte) uint32         { return crc32.Checksum(b, placecrc.Table) }
func crc32Update(c uint32, b []byte) uint32 { return crc32.Update(c, placecrc.Table, b) }
