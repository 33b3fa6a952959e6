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
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

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
