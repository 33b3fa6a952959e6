//go:build unix

package store

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// staleTempAge is how old a temporary file must be, besides unlocked,
// before sweepTemps removes it: a writer that has just made its file has
// not locked it yet.
const staleTempAge = time.Minute

// lockTemp holds an exclusive lock on a temporary file while it is written:
// the sign, to sweepTemps, that its writer is alive. The lock goes with the
// process, however it ends.
func lockTemp(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

// sweepTemps removes the temporary files that writers of path killed
// midway left beside it: those no process holds locked and not written for
// staleTempAge. It returns how many it removed; it never fails, since a
// leftover costs only space.
func sweepTemps(path string, now time.Time) int {
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < staleTempAge {
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
