package store_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// startWriters runs writers appending to several sessions until stop is
// closed; wait waits for them. Each writer opens a call and resolves it in
// its next append, so the ledger changes all the time.
func startWriters(t *testing.T, db *store.DB, n int) (stop func(), appended *atomic.Int64) {
	t.Helper()
	appended = new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("s%d", w%4)
			open := ""
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				var evs []tier.Event
				if open != "" {
					evs = append(evs, tier.Event{Kind: tier.KindToolResult, ID: open})
				}
				open = fmt.Sprintf("w%d-%d", w, i)
				evs = append(evs, tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("w%d i%d", w, i)},
					tier.Event{Kind: tier.KindToolCall, ID: open})
				if _, err := db.Append(session, evs...); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				appended.Add(1)
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }, appended
}

// waitFor waits until at least n appends are done, or a writer failed.
func waitFor(t *testing.T, appended *atomic.Int64, n int64) {
	t.Helper()
	for appended.Load() < n {
		if t.Failed() {
			t.FailNow()
		}
		time.Sleep(time.Millisecond)
	}
}

// openBackup writes b to a file, opens it read-only, verifies it and returns
// every session's state.
func openBackup(t *testing.T, b []byte) map[string]sessionState {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return openBackupFile(t, path)
}

func openBackupFile(t *testing.T, path string) map[string]sessionState {
	t.Helper()
	dbtest.MustVerify(t, path)
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	defer db.Close()
	return allStates(t, db)
}

func compareStates(t *testing.T, what string, got, want map[string]sessionState) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d sessions, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		if d := sameState(w, got[id]); len(d) != 0 {
			t.Errorf("%s: session %q: %v", what, id, d)
		}
	}
}

// TestBackup_WhileWriting takes copies with Snapshot.WriteTo while writers
// run, reading in the same snapshot what the copy must hold: each copy
// opens, verifies and equals the source at that point.
func TestBackup_WhileWriting(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	stop, appended := startWriters(t, db, 8)
	defer stop()
	for round := 1; round <= 3; round++ {
		waitFor(t, appended, int64(round*50))
		var buf bytes.Buffer
		var want map[string]sessionState
		err := db.View(func(s *store.Snapshot) error {
			n, err := s.WriteTo(&buf)
			if err != nil {
				return err
			}
			if n != int64(buf.Len()) {
				t.Errorf("WriteTo says %d bytes, wrote %d", n, buf.Len())
			}
			want = map[string]sessionState{}
			ids, err := s.Sessions()
			if err != nil {
				return err
			}
			for _, id := range ids {
				want[id] = readSession(t, s, id)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatal("the snapshot holds no session")
		}
		compareStates(t, fmt.Sprintf("round %d", round), openBackup(t, buf.Bytes()), want)
	}
	// Backup(w) makes a copy that verifies, and whose sessions are each a
	// prefix of the source's (the source moved on since).
	var buf bytes.Buffer
	n, err := db.Backup(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Backup = %d, %v (buffer %d)", n, err, buf.Len())
	}
	got := openBackup(t, buf.Bytes())
	stop()
	checkPrefix(t, got, allStates(t, db))
}

// checkPrefix checks that each session of a backup is a prefix of the
// source's session.
func checkPrefix(t *testing.T, backup, source map[string]sessionState) {
	t.Helper()
	if len(backup) == 0 {
		t.Fatal("the backup holds no session")
	}
	for id, b := range backup {
		s, ok := source[id]
		if !ok {
			t.Errorf("backup session %q is not in the source", id)
			continue
		}
		if len(b.Events) > len(s.Events) || !equalEvents(b.Events, s.Events[:len(b.Events)]) {
			t.Errorf("backup session %q (%d events) is not a prefix of the source (%d)", id, len(b.Events), len(s.Events))
		}
		if b.Info.Head != uint64(len(b.Events)) {
			t.Errorf("backup session %q: head %d with %d events", id, b.Info.Head, len(b.Events))
		}
	}
}

func TestBackupFile_WhileWriting(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	stop, appended := startWriters(t, db, 8)
	defer stop()
	dir := t.TempDir()
	dest := filepath.Join(dir, "backup.db")
	var copies []map[string]sessionState
	for round := 1; round <= 3; round++ {
		waitFor(t, appended, int64(round*50))
		n, err := db.BackupFile(dest)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dest)
		if err != nil || fi.Size() != n {
			t.Fatalf("BackupFile wrote %d bytes, the file has %v (%v)", n, fi, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("backup mode %v, want 0600", fi.Mode().Perm())
		}
		copies = append(copies, openBackupFile(t, dest))
	}
	stop()
	source := allStates(t, db)
	for _, c := range copies {
		checkPrefix(t, c, source)
	}
	// Successive backups grow.
	if h := func(m map[string]sessionState) (n uint64) {
		for _, s := range m {
			n += s.Info.Head
		}
		return n
	}; h(copies[0]) >= h(copies[2]) {
		t.Errorf("the third backup (%d events) is not newer than the first (%d)", h(copies[2]), h(copies[0]))
	}
	assertNoTemp(t, dir, "backup.db")
}

// assertNoTemp fails if dir holds anything but the named files.
func assertNoTemp(t *testing.T, dir string, keep ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, k := range keep {
		allowed[k] = true
	}
	for _, e := range ents {
		if !allowed[e.Name()] {
			t.Errorf("%s left behind in %s", e.Name(), dir)
		}
	}
}

func TestBackupFile_ReplacesExisting(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	dir := t.TempDir()
	dest := filepath.Join(dir, "dest.db")
	if err := os.WriteFile(dest, []byte("an older file that is not even a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Keep the old file open: a reader of the old file keeps reading it
	// whole (rename, not rewrite in place).
	old, err := os.Open(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := db.BackupFile(dest); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(old); string(b) != "an older file that is not even a database" {
		t.Errorf("the old file was rewritten in place: %q", b[:min(len(b), 40)])
	}
	compareStates(t, "backup", openBackupFile(t, dest), allStates(t, db))
	// Replacing a backup with a newer one.
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "newer"})
	if _, err := db.BackupFile(dest); err != nil {
		t.Fatal(err)
	}
	compareStates(t, "second backup", openBackupFile(t, dest), allStates(t, db))
	assertNoTemp(t, dir, "dest.db")
}

func TestBackupFile_FailureLeavesDest(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "dest.db")
	orig := []byte("the previous backup")
	if err := os.WriteFile(dest, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(dest); err != nil || !bytes.Equal(b, orig) {
			t.Errorf("%s: DEST changed: %q %v", what, b, err)
		}
		assertNoTemp(t, dir, "dest.db")
	}

	// A writer that fails half-way.
	boom := errors.New("disk full")
	_, err := store.WriteFileAtomic(dest, 0o600, func(w io.Writer) (int64, error) {
		n, _ := w.Write(bytes.Repeat([]byte("partial"), 1000))
		return int64(n), boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("WriteFileAtomic = %v, want the writer's error", err)
	}
	check("failing writer")

	// A backup of a closed database.
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.BackupFile(dest); !errors.Is(err, store.ErrClosed) {
		t.Errorf("BackupFile of a closed DB = %v, want ErrClosed", err)
	}
	check("closed database")

	// A destination directory that does not exist: nothing is created.
	if _, err := db.BackupFile(filepath.Join(dir, "missing", "x.db")); err == nil {
		t.Error("BackupFile into a missing directory succeeded")
	}
	check("missing directory")

	// A successful WriteFileAtomic writes exactly what the writer wrote.
	n, err := store.WriteFileAtomic(dest, 0o640, func(w io.Writer) (int64, error) {
		k, err := w.Write([]byte("new content"))
		return int64(k), err
	})
	if b, _ := os.ReadFile(dest); err != nil || n != 11 || string(b) != "new content" {
		t.Errorf("WriteFileAtomic = %d, %v; file %q", n, err, b)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	assertNoTemp(t, dir, "dest.db")
}

// TestBackupFile_OntoItself: a backup over the live database file would
// rename a copy over it while the DB keeps writing to the unlinked old file,
// losing every later append. It is refused.
func TestBackupFile_OntoItself(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	path := db.Path()
	for _, dest := range []string{path, filepath.Join(filepath.Dir(path), ".", filepath.Base(path))} {
		if _, err := db.BackupFile(dest); err == nil {
			t.Errorf("BackupFile(%q) onto the database itself succeeded", dest)
		}
	}
	assertNoTemp(t, filepath.Dir(path), filepath.Base(path))
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "after the refused backup"})
	want := state(t, db, "s")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if d := sameState(want, state(t, ro, "s")); len(d) != 0 {
		t.Errorf("after reopening: %v", d)
	}
}

var (
	hotBackups  = flag.Int("strata.backups", 50, "hot backups of TestBackup_HotUnderLoad (20 with -short)")
	backupKills = flag.Int("strata.backup-kills", 8, "backups killed midway in TestBackup_KilledMidway")
)

// TestBackup_HotUnderLoad takes -strata.backups backups while writers
// append and a compactor compacts: each is written as BackupFile writes
// (temporary file, fsync, rename, directory fsync) from one snapshot in which
// the test also resumes every session; each backup verifies, and resume
// from it gives, session by session, the bytes resume gave from the source
// in that snapshot. Every tenth is a plain BackupFile, which must verify.
func TestBackup_HotUnderLoad(t *testing.T) {
	dbtest.FileOnly(t)
	t.Parallel()
	n := *hotBackups
	if testing.Short() {
		n = min(n, 20)
	}
	db := dbtest.Open(t, store.Options{})
	stop, appended := startWriters(t, db, 4)
	defer stop()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryEvents: 12, Fold: 3}})
	if err != nil {
		t.Fatal(err)
	}
	compactDone := make(chan struct{})
	stopCompact := make(chan struct{})
	go func() {
		defer close(compactDone)
		for i := 0; ; i++ {
			select {
			case <-stopCompact:
				return
			default:
			}
			s := fmt.Sprintf("s%d", i%4)
			if _, err := comp.Run(context.Background(), s); err != nil && !errors.Is(err, store.ErrSessionNotFound) && !errors.Is(err, store.ErrConflict) {
				t.Errorf("compaction: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(stopCompact); <-compactDone }()
	waitFor(t, appended, 20)

	dir := t.TempDir()
	began := time.Now()
	var bytesTotal int64
	resumes := 0
	for i := 0; i < n; i++ {
		dest := filepath.Join(dir, fmt.Sprintf("backup-%d.db", i%3)) // replaced in turn
		if i%10 == 9 {
			if _, err := db.BackupFile(dest); err != nil {
				t.Fatalf("BackupFile %d: %v", i, err)
			}
			dbtest.MustVerify(t, dest)
			continue
		}
		want := map[string]string{}
		size, err := store.WriteFileAtomic(dest, 0o600, func(w io.Writer) (int64, error) {
			var n int64
			err := db.View(func(s *store.Snapshot) error {
				var err error
				if n, err = s.WriteTo(w); err != nil {
					return err
				}
				ids, err := s.Sessions()
				if err != nil {
					return err
				}
				for _, id := range ids {
					ctx, err := s.Resume(id, store.Latest)
					if err != nil {
						return err
					}
					want[id] = ctx.SHA256()
				}
				return nil
			})
			return n, err
		})
		if err != nil {
			t.Fatalf("backup %d: %v", i, err)
		}
		bytesTotal += size
		b, err := store.Open(dest, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("backup %d: open: %v", i, err)
		}
		rep, err := b.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Errorf("backup %d: Verify = %v, %v", i, rep.Problems, err)
		}
		ids, _ := b.Sessions()
		if len(ids) != len(want) {
			t.Errorf("backup %d: %d sessions, the snapshot had %d", i, len(ids), len(want))
		}
		for id, sha := range want {
			ctx, err := b.Resume(id, store.Latest)
			if err != nil || ctx.SHA256() != sha {
				t.Errorf("backup %d: resume %q from the backup differs from the source at that transaction (%v)", i, id, err)
			}
			resumes++
		}
		b.Close()
	}
	stop()
	t.Logf("%d hot backups (%d MB in all) in %v while %d appends ran: every one verified; %d resumes from them equal to the source's at that transaction",
		n, bytesTotal>>20, time.Since(began).Round(time.Millisecond), appended.Load(), resumes)
}

// Environment of the backup child.
const (
	backupChildEnv = "STRATA_TEST_BACKUP_CHILD_SRC"
	backupDestEnv  = "STRATA_TEST_BACKUP_DEST"
)

// TestBackup_Child is not a test: it is the child process of
// TestBackup_KilledMidway. It opens the source read-only and writes
// backups of it to the destination until killed, saying "ready" before
// the first.
func TestBackup_Child(t *testing.T) {
	src := os.Getenv(backupChildEnv)
	if src == "" {
		t.Skip("helper process for TestBackup_KilledMidway")
	}
	db, err := store.Open(src, store.Options{ReadOnly: true, LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	for {
		if _, err := db.BackupFile(os.Getenv(backupDestEnv)); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
	}
}

// TestBackup_KilledMidway kills, with SIGKILL at a random moment, a child
// process writing a backup of a large database over an older backup (or
// where there is none): the destination is always the old file, the whole
// new backup (which verifies and holds what the source holds) or, with no
// old file, absent — never a partial file.
func TestBackup_KilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "big.db")
	db, err := store.Open(src, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("y", 60<<10)
	for i := 0; i < 400; i++ { // about 25 MB
		mustAppend(t, db, fmt.Sprintf("s%d", i%4), tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("%d %s", i, big)})
	}
	wantHeads := map[string]uint64{}
	for _, id := range []string{"s0", "s1", "s2", "s3"} {
		info, err := db.Info(id)
		if err != nil {
			t.Fatal(err)
		}
		wantHeads[id] = info.Head
	}
	var old bytes.Buffer
	if err := db.View(func(s *store.Snapshot) error { _, err := s.WriteTo(&old); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	oldBytes := bytes.Clone(old.Bytes()[:min(old.Len(), 1<<20)]) // a stand-in "old backup": any earlier file
	oldBytes = append([]byte("old backup "), oldBytes...)

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	outcome := map[string]int{}
	began := time.Now()
	for c := 0; c < *backupKills; c++ {
		dest := filepath.Join(dir, fmt.Sprintf("dest-%d.db", c))
		withOld := c%2 == 0
		if withOld {
			if err := os.WriteFile(dest, oldBytes, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		killChild(t, "TestBackup_Child", []string{backupChildEnv + "=" + src, backupDestEnv + "=" + dest},
			time.Duration(rng.Intn(600))*time.Millisecond)

		got, err := os.ReadFile(dest)
		switch {
		case errors.Is(err, os.ErrNotExist) && !withOld:
			outcome["absent (no old file)"]++
		case err != nil:
			t.Fatalf("cycle %d: %v", c, err)
		case withOld && bytes.Equal(got, oldBytes):
			outcome["the old file"]++
		default:
			b, err := store.Open(dest, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("cycle %d: a partial backup at the destination (%d bytes): %v", c, len(got), err)
			}
			rep, err := b.Verify(store.VerifyOptions{})
			if err != nil || !rep.OK() {
				t.Errorf("cycle %d: the backup at the destination does not verify: %v %v", c, rep.Problems, err)
			}
			for id, head := range wantHeads {
				if info, err := b.Info(id); err != nil || info.Head != head {
					t.Errorf("cycle %d: backup session %q: %+v %v, want head %d", c, id, info, err, head)
				}
			}
			b.Close()
			outcome["a whole new backup"]++
		}
		// A killed backup's temporary file is never at DEST; the next
		// backup to DEST removes it once it is a minute old and unlocked.
		left, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf(".dest-%d.db.tmp-*", c)))
		if len(left) > 0 {
			outcome["temporary file left beside it"]++
			for _, l := range left {
				old := time.Now().Add(-2 * time.Minute)
				if err := os.Chtimes(l, old, old); err != nil {
					t.Fatal(err)
				}
			}
			b, err := store.Open(src, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.BackupFile(dest); err != nil {
				t.Fatalf("cycle %d: the next backup: %v", c, err)
			}
			b.Close()
			if still, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf(".dest-%d.db.tmp-*", c))); len(still) > 0 {
				t.Errorf("cycle %d: the next backup left the killed one's temporary files %v", c, still)
			} else {
				outcome["... removed by the next backup"]++
			}
		}
	}
	t.Logf("%d backups of a %d MB database killed midway in %v: %v; never a partial file at the destination",
		*backupKills, old.Len()>>20, time.Since(began).Round(time.Millisecond), outcome)
}
