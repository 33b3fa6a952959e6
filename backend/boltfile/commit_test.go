package boltfile

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

func putEvent(seq uint64, text string) func(backend.Tx) error {
	return func(tx backend.Tx) error {
		s, err := tx.Session("s")
		if err != nil {
			return err
		}
		if s == nil {
			if s, err = tx.CreateSession("s"); err != nil {
				return err
			}
		}
		return s.PutEvent(seq, []byte(text))
	}
}

// TestCommit_SyncFailurePoisons: a commit that fails at the fsync (or with
// EIO) is marked ErrPoisoned, and every later Update returns ErrPoisoned
// without running; reads go on; a new handle writes again.
func TestCommit_SyncFailurePoisons(t *testing.T) {
	for _, fail := range []error{
		&fs.PathError{Op: "sync", Path: "db", Err: syscall.EIO},
		syscall.EIO, // bbolt's fdatasync error, as it is on Linux
		&fs.PathError{Op: "write", Path: "db", Err: syscall.EIO},
	} {
		t.Run(fail.Error(), func(t *testing.T) {
			b, path := newDB(t)
			mustUpdate(t, b, putEvent(1, "one"))
			setHook(t, func(step string) error {
				if step == "commit" {
					return fail
				}
				return nil
			})
			err := b.Update(putEvent(2, "two"))
			if !errors.Is(err, backend.ErrPoisoned) || !errors.Is(err, fail) {
				t.Fatalf("Update with a failed sync = %v, want ErrPoisoned wrapping the failure", err)
			}
			testHook.Store(nil)
			ran := false
			err = b.Update(func(backend.Tx) error { ran = true; return nil })
			if !errors.Is(err, backend.ErrPoisoned) || ran {
				t.Fatalf("Update after the failure = %v (ran %v), want ErrPoisoned without running", err, ran)
			}
			if h := hintsOf(t, err); !strings.Contains(h, "open it again") {
				t.Errorf("hint %q", h)
			}
			mustView(t, b, func(tx backend.Tx) error {
				if v, err := mustSession(t, tx, "s").Event(1); err != nil || string(v) != "one" {
					t.Errorf("read after poisoning: %q, %v", v, err)
				}
				return nil
			})
			b.Close()
			b, err = Open(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			mustUpdate(t, b, putEvent(2, "two"))
		})
	}
}

// TestCommit_FullDiskDoesNotPoison: a commit whose write fails for want of
// space leaves the handle as it was: the next Update succeeds.
func TestCommit_FullDiskDoesNotPoison(t *testing.T) {
	b, _ := newDB(t)
	mustUpdate(t, b, putEvent(1, "one"))
	setHook(t, func(step string) error {
		if step == "commit" {
			return &fs.PathError{Op: "write", Path: "db", Err: syscall.ENOSPC}
		}
		return nil
	})
	err := b.Update(putEvent(2, "two"))
	if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, backend.ErrPoisoned) {
		t.Fatalf("Update on a full disk = %v, want ENOSPC, not poisoned", err)
	}
	testHook.Store(nil)
	mustView(t, b, func(tx backend.Tx) error {
		if v, err := mustSession(t, tx, "s").Event(2); v != nil || err != nil {
			t.Errorf("the failed commit stored event 2: %q, %v", v, err)
		}
		return nil
	})
	mustUpdate(t, b, putEvent(2, "two"))
}

// TestCommit_RealFullDisk fills a small file system under a live database
// (it mounts a tmpfs, which needs root): the commit that does not fit fails
// with ENOSPC and does not poison; once space is freed the same handle
// commits again. A creation on the full file system leaves no file.
func TestCommit_RealFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a file system")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v %s", err, out)
		}
	})
	path := filepath.Join(dir, "strata.db")
	b, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 512<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	var full error
	var acked uint64
	for seq := uint64(1); seq < 100; seq++ {
		if full = b.Update(putEvent(seq, big)); full != nil {
			break
		}
		acked = seq
	}
	if !errors.Is(full, syscall.ENOSPC) || errors.Is(full, backend.ErrPoisoned) {
		t.Fatalf("Update on a full disk = %v, want ENOSPC, not poisoned", full)
	}
	// A creation beside it fails, and leaves nothing.
	if _, err := Open(filepath.Join(dir, "new.db"), Options{Create: true}); err == nil {
		t.Error("a creation fit on the full file system")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*new.db*")); len(left) != 0 {
		t.Errorf("a failed creation left %q", left)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, b, putEvent(acked+1, "after the disk was freed"))
	mustView(t, b, func(tx backend.Tx) error {
		s := mustSession(t, tx, "s")
		n := uint64(0)
		if err := s.Events(1, ^uint64(0), func(uint64, []byte) (bool, error) { n++; return true, nil }); err != nil {
			return err
		}
		if n != acked+1 {
			t.Errorf("%d events, want %d", n, acked+1)
		}
		return nil
	})
	var problems []string
	mustView(t, b, func(tx backend.Tx) error {
		_, err := b.Check(tx, func(s, what string) { problems = append(problems, fmt.Sprint(s, ": ", what)) })
		return err
	})
	if len(problems) != 0 {
		t.Errorf("Check: %q", problems)
	}
}

// A panic inside fn is the caller's: it is not taken for damage, and the
// transaction is rolled back.
func TestCommit_CallerPanics(t *testing.T) {
	b, _ := newDB(t)
	fill(t, b, "s", 3, 3)
	func() {
		defer func() {
			if r := recover(); r != "mine" {
				t.Errorf("recovered %v, want the caller's panic", r)
			}
		}()
		_ = b.Update(func(tx backend.Tx) error {
			s := mustSession(t, tx, "s")
			_ = s.PutState([]byte("changed"))
			return s.Scan(backend.Nodes, nil, func([]byte, []byte) (bool, error) { panic("mine") })
		})
	}()
	mustView(t, b, func(tx backend.Tx) error {
		if v, _ := mustSession(t, tx, "s").State(); string(v) != "state of s" {
			t.Errorf("state %q after a panicking Update", v)
		}
		return nil
	})
	mustUpdate(t, b, putEvent(4, "four"))
}
