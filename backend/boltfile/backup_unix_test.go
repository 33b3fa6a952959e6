//go:build unix

package boltfile

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteFileAtomic_SweepsDeadTemps leaves temporary files beside DEST as
// killed writers would, one as a live writer holds it, and one just made
// and still empty: the next WriteFileAtomic removes only the unlocked ones
// that hold bytes or are old.
func TestWriteFileAtomic_SweepsDeadTemps(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "dest [1].db") // glob metacharacters are names here
	old := time.Now().Add(-2 * staleTempAge)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("part of a backup"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk(".dest [1].db.tmp-111", old)
	killed := mk(".dest [1].db.tmp-222", time.Now())
	fresh := filepath.Join(dir, ".dest [1].db.tmp-555")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live := mk(".dest [1].db.tmp-333", old)
	other := mk(".other.db.tmp-444", old)
	f, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	if _, err := WriteFileAtomic(dest, 0o600, func(w io.Writer) (int64, error) {
		n, err := w.Write([]byte("new"))
		return int64(n), err
	}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{dead: false, killed: false, fresh: true, live: true, other: true, dest: true} {
		_, err := os.Stat(p)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(p), got, want)
		}
	}
}

// TestCreate_LeavesOneName: a creation killed between linking its file to
// the path and removing the temporary name leaves a hidden second name of
// the database. The next writable Open of the path removes it, and so does
// a sweep while another handle holds the database locked; removing a name
// takes no byte of the file, which opens and reads as before. Once the
// path is deleted, the hidden name is the only one left of a database
// nobody holds, and the next creation there removes it.
func TestCreate_LeavesOneName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.db")
	second := filepath.Join(dir, ".agent.db.tmp-4242")
	b, err := Open(path, Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path, second); err != nil {
		t.Fatal(err)
	}
	b, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(second); !os.IsNotExist(err) {
		t.Errorf("after a writable Open: %s is there (%v), want it removed", second, err)
	}

	// Held locked by b: the second name goes all the same.
	if err := os.Link(path, second); err != nil {
		t.Fatal(err)
	}
	if n := sweepTemps(path, time.Now()); n != 1 {
		t.Errorf("a sweep while the database is held removed %d files, want 1", n)
	}
	if _, err := os.Lstat(second); !os.IsNotExist(err) {
		t.Errorf("after a sweep: %s is there (%v), want it removed", second, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the database after its second name went: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// The path deleted: the hidden name is a database nobody holds.
	if err := os.Link(path, second); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	b, err = Open(path, Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "agent.db" {
		t.Errorf("the directory holds %v after the creation, want agent.db alone", entries)
	}
}
