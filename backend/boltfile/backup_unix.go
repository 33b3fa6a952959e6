//go:build unix

package boltfile

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// staleTempAge is how old an empty temporary file must be, besides
// unlocked, before sweepTemps removes it: a writer that has just made its
// file has not locked it yet, and has written nothing.
const staleTempAge = time.Minute

// lockTemp holds an exclusive lock on a temporary file while it is
// written: the sign, to sweepTemps, that its writer is alive. The lock
// goes with the process, however it ends.
func lockTemp(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

// sweepTemps removes the temporary files that writers of path killed
// midway left beside it: a second name of the database at path (a
// creation killed between linking its file to path and removing the
// temporary name: removing a name of a file that keeps another touches no
// byte of it, locked or not), and those no process holds locked that hold
// bytes or have been empty for staleTempAge. It returns how many it
// removed; it never fails, since a leftover costs only space.
func sweepTemps(path string, now time.Time) int {
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	live, _ := os.Stat(path)
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if live != nil && os.SameFile(fi, live) {
			if os.Remove(name) == nil {
				removed++
			}
			continue
		}
		if fi.Size() == 0 && now.Sub(fi.ModTime()) < staleTempAge {
			continue
		}
		f, err := os.Open(name) // flock needs no write access
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil && os.Remove(name) == nil {
			removed++
		}
		_ = f.Close()
	}
	return removed
}
