package store_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"

	bolt "go.etcd.io/bbolt"
)

func TestOpen_NotExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	for _, opts := range []store.Options{{}, {ReadOnly: true}} {
		_, err := store.Open(path, opts)
		if !errors.Is(err, store.ErrNotExist) {
			t.Errorf("Open(%+v) = %v, want ErrNotExist", opts, err)
		}
		if errors.GetAllHints(err) == nil {
			t.Errorf("no hint on %v", err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Open without Create made the file: %v", err)
	}
	// A missing directory is not a missing database.
	if _, err := store.Open(filepath.Join(t.TempDir(), "no", "dir", "x.db"), store.Options{Create: true}); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
}

func TestOpen_EmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []store.Options{{}, {Create: true}, {ReadOnly: true}} {
		if _, err := store.Open(path, opts); !errors.Is(err, store.ErrEmptyFile) {
			t.Errorf("Open(%+v) = %v, want ErrEmptyFile", opts, err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file was changed: %v %v", fi, err)
	}
}

func TestOpen_Directory(t *testing.T) {
	if _, err := store.Open(t.TempDir(), store.Options{Create: true}); !errors.Is(err, store.ErrNotStrata) {
		t.Errorf("Open(dir) = %v, want ErrNotStrata", err)
	}
}

func TestOpen_NotBbolt(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	zeros := make([]byte, 64<<10)
	cases := map[string][]byte{
		"one byte":         {0x42},
		"text":             []byte("this is not a database\nat all\n"),
		"jsonl":            []byte(`{"kind":"user","text":"hello"}` + "\n"),
		"random 100 bytes": random(100),
		"random 4 KiB":     random(4 << 10),
		"random 8 KiB":     random(8 << 10),
		"random 64 KiB":    random(64 << 10),
		"random 1 MiB":     random(1 << 20),
		"zeros 64 KiB":     zeros,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []store.Options{{}, {ReadOnly: true}, {Create: true}} {
				db, err := store.Open(path, opts)
				if err == nil {
					db.Close()
					t.Fatalf("Open(%+v) succeeded on %s", opts, name)
				}
				if !errors.Is(err, store.ErrNotStrata) && !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("Open(%+v) = %v, want ErrNotStrata or ErrCorrupt", opts, err)
				}
			}
			// Refusing the file did not write to it.
			if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
				t.Errorf("Open changed the file")
			}
		})
	}
}

func TestOpen_BboltWithoutStrataBuckets(t *testing.T) {
	for name, setup := range map[string]func(*bolt.Tx) error{
		"no buckets": func(*bolt.Tx) error { return nil },
		"other buckets": func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("kv"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		},
		"meta without a format record": func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("meta"))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "plain.db")
			writeBolt(t, path, setup)
			for _, opts := range []store.Options{{}, {ReadOnly: true}} {
				if _, err := store.Open(path, opts); !errors.Is(err, store.ErrNotStrata) {
					t.Errorf("Open(%+v) = %v, want ErrNotStrata", opts, err)
				}
			}
		})
	}
}

// writeBolt creates a plain bbolt file at path.
func writeBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// editBolt changes a closed strata database through bbolt directly.
func editBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_MaxIDBytesAtBboltLimit(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{MaxIDBytes: store.MaxIDBytesLimit, NoSync: true})
	id := strings.Repeat("k", store.MaxIDBytesLimit)
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolCall, ID: id}, tier.Event{Kind: tier.KindArtifact, Key: id})
	if l := state(t, db, "s").Ledger; len(l.Open) != 1 || len(l.Artifacts) != 1 {
		t.Errorf("ledger %d open %d artifacts", len(l.Open), len(l.Artifacts))
	}
}

func TestOpen_ReopenKeepsData(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	before := state(t, db, "s")
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Create on an existing database opens it; it does not start afresh.
	db2, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := sameState(before, state(t, db2, "s")); len(d) != 0 {
		t.Errorf("after reopening: %v", d)
	}
	res := mustAppend(t, db2, "s", tier.Event{Kind: tier.KindAssistant})
	if res.First != before.Info.Head+1 {
		t.Errorf("append after reopen at seq %d, want %d", res.First, before.Info.Head+1)
	}
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := state(t, ro, "s"); got.Info.Head != before.Info.Head+1 {
		t.Errorf("read-only reopen: head %d", got.Info.Head)
	}
	if ro.Path() != path {
		t.Errorf("Path() = %q", ro.Path())
	}
}

func TestOpen_FileMode(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{Mode: 0o640})
	fi, err := os.Stat(db.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&^0o640 != 0 {
		t.Errorf("mode %v, want at most 0640", fi.Mode().Perm())
	}
}

// TestOpen_Truncated cuts a database at many lengths: Open refuses it with a
// typed error, or opens it; either way nothing panics, and whatever it
// returns as data is the data that was written.
func TestOpen_Truncated(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	for i := 0; i < 20; i++ {
		batch := make([]tier.Event, 50)
		for j := range batch {
			batch[j] = tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat("x", 200)}
		}
		mustAppend(t, db, "s"+strings.Repeat("z", i%3), batch...)
	}
	want := allStates(t, db)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{1, 16, 20, 100, 4096, 4097, 8192, 12288, 16384, 32768, len(full) / 2, len(full) - 4096, len(full) - 1}
	for _, n := range cuts {
		if n <= 0 || n >= len(full) {
			continue
		}
		p := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(p, full[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		cut, err := store.Open(p, store.Options{ReadOnly: true})
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotStrata) {
				t.Errorf("cut at %d: Open = %v, want ErrCorrupt or ErrNotStrata", n, err)
			}
			if n >= 16<<10 && !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("cut at %d: a truncated strata file is reported as %v, want ErrCorrupt", n, err)
			}
			continue
		}
		rep, verr := cut.Verify(store.VerifyOptions{})
		_ = cut.View(func(s *store.Snapshot) error {
			ids, err := s.Sessions()
			if err != nil {
				return nil
			}
			for _, id := range ids {
				var got []tier.Event
				err := s.Events(id, 1, ^uint64(0), func(e tier.Event) error {
					got = append(got, e)
					return nil
				})
				if err != nil {
					continue // refused: fine
				}
				w := want[id].Events
				if len(got) > len(w) || !equalEvents(got, w[:len(got)]) {
					t.Errorf("cut at %d: session %q returned events that were never written", n, id)
				}
			}
			return nil
		})
		if verr == nil && rep.OK() && n < len(full)-4096 {
			t.Logf("cut at %d of %d: opened and verified clean", n, len(full))
		}
		cut.Close()
	}
}

func equalEvents(a, b []tier.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An empty path is no database: Open says so, and makes nothing.
func TestOpen_EmptyPath(t *testing.T) {
	for _, create := range []bool{false, true} {
		db, err := store.Open("", store.Options{Create: create})
		if err == nil {
			db.Close()
			t.Fatalf("Create %v: an empty path opened", create)
		}
		if !strings.Contains(err.Error(), "the path is empty") {
			t.Errorf("Create %v: %v, want the path named empty", create, err)
		}
	}
}

// store depends on package backend alone: the concrete backends are linked
// in by whoever opens a database (their init registers them), never by
// store itself.
func TestOpen_StoreLinksNoBackend(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/strata-go/strata/backend") {
		t.Fatalf("go list -deps . names no backend package: %q", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/strata-go/strata/backend/") || d == "github.com/strata-go/strata" {
			t.Errorf("store depends on %s", d)
		}
	}
}

// A backend is a package and a registration: the memory backend, registered
// in its init under mem://, is opened by URL as a file or PostgreSQL is,
// and the database it holds is the same after a reopen.
func TestOpen_RegisteredBackend(t *testing.T) {
	// A name of this run alone: the in-memory backend keeps a name's
	// database for the life of the process, and -count runs this again.
	name := "mem://" + t.TempDir()
	if _, err := store.Open(name, store.Options{}); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("Open of a new name without Create = %v, want ErrNotExist", err)
	}
	db, err := store.Open(name, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(name, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info, err := db.Info("s")
	if err != nil || info.Head != 1 {
		t.Fatalf("Info after reopen = %+v, %v; want head 1", info, err)
	}
}

// A name whose scheme no linked-in package registered is ErrNoDriver,
// naming the scheme.
func TestOpen_UnregisteredScheme(t *testing.T) {
	_, err := store.Open("nosuch://db", store.Options{})
	if !errors.Is(err, store.ErrNoDriver) || !strings.Contains(err.Error(), "nosuch://") {
		t.Fatalf("Open(nosuch://db) = %v, want ErrNoDriver naming the scheme", err)
	}
}

// lockChildEnv names the database the child process holds open.
const lockChildEnv = "STRATA_TEST_LOCK_CHILD_DB"

// TestLock_ChildProcess is not a test: it is the child process of
// TestOpen_LockedByAnotherProcess and TestLock_Repeated (the test binary
// re-executed with lockChildEnv set). It opens the database for writing,
// says "ready" on stdout and holds it until killed or its stdin closes.
func TestLock_ChildProcess(t *testing.T) {
	path := os.Getenv(lockChildEnv)
	if path == "" {
		t.Skip("helper process for TestOpen_LockedByAnotherProcess and TestLock_Repeated")
	}
	db, err := store.Open(path, store.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	if _, err := db.Append("child", tier.Event{Kind: tier.KindUser, Text: "the child holds the lock"}); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin or kills us
	db.Close()
	os.Exit(0)
}

func TestOpen_LockedByAnotherProcess(t *testing.T) {
	dbtest.FileOnly(t)
	if testing.Short() {
		t.Skip("starts a child process")
	}
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "parent", tier.Event{Kind: tier.KindUser})
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	kill := startLockHolder(t, path)

	const lockTimeout = 200 * time.Millisecond
	for _, opts := range []store.Options{{LockTimeout: lockTimeout}, {LockTimeout: lockTimeout, ReadOnly: true}} {
		other, err := store.Open(path, opts)
		if err == nil {
			other.Close()
			t.Fatalf("Open(ReadOnly=%v) succeeded while another process holds the file", opts.ReadOnly)
		}
		if !errors.Is(err, store.ErrLocked) {
			t.Errorf("Open(ReadOnly=%v) = %v, want ErrLocked", opts.ReadOnly, err)
		}
		if len(errors.GetAllHints(err)) == 0 {
			t.Errorf("ErrLocked without a hint: %v", err)
		}
	}

	kill()
	db2, err := store.Open(path, store.Options{LockTimeout: lockTimeout})
	if err != nil {
		t.Fatalf("Open after the child was killed: %v", err)
	}
	defer db2.Close()
	// The child's acknowledged append survived its death.
	if info, err := db2.Info("child"); err != nil || info.Head != 1 {
		t.Errorf("child's session: %+v, %v", info, err)
	}
}

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
