package store_test

import (
	"bufio"
	"flag"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

var lockAttempts = flag.Int("strata.lock-attempts", 100, "attempts of each kind (writer, reader) in TestLock_Repeated")

// startLockHolder starts TestLock_ChildProcess on path and waits until it
// holds the database; kill ends it.
func startLockHolder(t *testing.T, path string) (kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLock_ChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			stdin.Close()
		})
	}
	t.Cleanup(kill)
	ready := make(chan string, 1) // closed if the holder exits first
	go func() {
		defer close(ready)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); l == "ready" || strings.HasPrefix(l, "error:") {
				ready <- l
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	if l, ok := <-ready; !ok || l != "ready" {
		t.Fatalf("lock holder: %q", l)
	}
	return kill
}

// TestLock_Repeated opens a database that another process holds for
// writing, -strata.lock-attempts times as a writer and as many times as a
// reader (ten at a time): every attempt gets ErrLocked once the lock
// timeout passed; once the holder is killed, the lock is free.
func TestLock_Repeated(t *testing.T) {
	dbtest.FileOnly(t)
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "parent", tier.Event{Kind: tier.KindUser})
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	kill := startLockHolder(t, path)

	const lockTimeout = 100 * time.Millisecond
	n := *lockAttempts
	type result struct {
		readOnly bool
		took     time.Duration
		err      error
	}
	results := make(chan result, 2*n)
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for i := 0; i < 2*n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			opts := store.Options{LockTimeout: lockTimeout, ReadOnly: i%2 == 1}
			began := time.Now()
			other, err := store.Open(path, opts)
			took := time.Since(began)
			if err == nil {
				other.Close()
			}
			results <- result{opts.ReadOnly, took, err}
		}()
	}
	wg.Wait()
	close(results)
	locked := map[bool]int{}
	var worst time.Duration
	for r := range results {
		worst = max(worst, r.took)
		switch {
		case r.err == nil:
			t.Errorf("Open(ReadOnly=%v) succeeded while another process holds the file", r.readOnly)
		case !errors.Is(r.err, store.ErrLocked):
			t.Errorf("Open(ReadOnly=%v) = %v, want ErrLocked", r.readOnly, r.err)
		case !strings.Contains(r.err.Error(), "held by another process"):
			t.Errorf("ErrLocked says %q", r.err)
		default:
			locked[r.readOnly]++
		}
	}
	t.Logf("lock timeout %v: writers %d/%d and readers %d/%d got ErrLocked; slowest %v",
		lockTimeout, locked[false], n, locked[true], n, worst.Round(time.Millisecond))

	kill()
	for _, ro := range []bool{false, true} {
		db2, err := store.Open(path, store.Options{LockTimeout: lockTimeout, ReadOnly: ro})
		if err != nil {
			t.Fatalf("Open(ReadOnly=%v) after the holder was killed: %v", ro, err)
		}
		if info, err := db2.Info("child"); err != nil || info.Head != 1 {
			t.Errorf("the holder's acknowledged append: %+v, %v", info, err)
		}
		db2.Close()
	}
}
