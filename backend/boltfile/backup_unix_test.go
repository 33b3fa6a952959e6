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
