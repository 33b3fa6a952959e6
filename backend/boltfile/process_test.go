package boltfile

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// childEnv tells the test binary, run again as a child process, what to
// do: "lock PATH" (hold the database open until stdin closes) or "create
// PATH" (create it and be killed just before the new file takes its name).
const childEnv = "BOLTFILE_TEST_CHILD"

// TestChildProcess is the child's side; it does nothing in a normal run.
func TestChildProcess(t *testing.T) {
	what, path, ok := strings.Cut(os.Getenv(childEnv), " ")
	if !ok {
		t.Skip("only as a child process")
	}
	switch what {
	case "lock":
		b, err := Open(path, Options{NoSync: true})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		b.Close()
	case "create":
		setHook(t, func(step string) error {
			if step == "create:synced" {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
			return nil
		})
		_, err := Open(path, Options{Create: true})
		fmt.Println("not killed:", err)
		os.Exit(1)
	}
}

func child(t *testing.T, what, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+what+" "+path)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestCreate_KilledBeforeRename: a creator killed once its temporary file
// is complete, before the file takes its name, leaves no file at the path;
// the next creation removes the leftover and makes a database.
func TestCreate_KilledBeforeRename(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	dir := t.TempDir()
	path := filepath.Join(dir, "strata.db")
	out, err := child(t, "create", path).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, %s; want it killed", err, out)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a killed creation left a file at the path: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".strata.db.tmp-*"))
	if len(left) != 1 {
		t.Fatalf("leftovers %q, want the killed creator's temporary file", left)
	}
	b, err := Open(path, Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, b, "s", 3, 0)
	b.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, ".strata.db.tmp-*")); len(left) != 0 {
		t.Errorf("the next creation left %q", left)
	}
}

// TestCreate_FullDisk: a creation that fails writing (the disk full)
// leaves no file at the path nor beside it; the next one makes the
// database.
func TestCreate_FullDisk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "strata.db")
	setHook(t, func(step string) error {
		if step == "create:meta" {
			return &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
		}
		return nil
	})
	if _, err := Open(path, Options{Create: true}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open = %v, want ENOSPC", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a failed creation left %v", entries)
	}
	testHook.Store(nil)
	b, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// TestCreate_Race: creators racing for one path all open one database:
// one creation takes the path, and none replaces it.
func TestCreate_Race(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	var linked, synced atomic.Int32
	release := make(chan struct{})
	setHook(t, func(step string) error {
		switch step {
		case "create:synced":
			synced.Add(1)
			<-release // every creator reaches the link at once
		case "create:linked":
			linked.Add(1)
		}
		return nil
	})
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, err := Open(path, Options{Create: true, NoSync: true, LockTimeout: 20 * time.Second})
			if err == nil {
				err = b.Update(func(tx backend.Tx) error { _, err := tx.CreateSession(fmt.Sprint(i)); return err })
				b.Close()
			}
			errs[i] = err
		}(i)
	}
	for deadline := time.Now().Add(10 * time.Second); synced.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("creator %d: %v", i, err)
		}
	}
	if linked.Load() != 1 {
		t.Errorf("%d creations took the path, want 1", linked.Load())
	}
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var ids []string
	mustView(t, b, func(tx backend.Tx) error {
		return tx.Sessions(func(id string) error { ids = append(ids, id); return nil })
	})
	if len(ids) != n {
		t.Errorf("sessions %q: a creator replaced another's database", ids)
	}
}

// TestLock_AnotherProcess: a database another process holds is refused
// after the lock timeout, for writing and for reading, with a hint; once
// that process is gone, it opens.
func TestLock_AnotherProcess(t *testing.T) {
	t.Parallel() // sets no test hook, and none is set while it runs
	b, path := newDB(t)
	b.Close()
	cmd := child(t, "lock", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	for _, ro := range []bool{false, true} {
		b, err := Open(path, Options{ReadOnly: ro, LockTimeout: 100 * time.Millisecond})
		if err == nil {
			b.Close()
			t.Fatalf("read-only %v: Open of a held database succeeded", ro)
		}
		if !errors.Is(err, backend.ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Errorf("read-only %v: Open = %v, want ErrLocked naming the file", ro, err)
		}
		if h := hintsOf(t, err); !strings.Contains(h, "another process") {
			t.Errorf("hint %q", h)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	b, err = Open(path, Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}
