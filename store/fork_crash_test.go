package store_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
)

const forkCrashEnv = "STRATA_TEST_FORK_CRASH_DB"

// forkKills is the number of kill cycles of the fork kill loops: each
// kills a child that forks, prunes and vacuums once, and checks the
// database after it.
var forkKills = flag.Int("strata.fork-kills", 0, "kill cycles of TestForkCrash_KillLoop (default 12, 4 with -short) and TestForkCrash_KillLoopPostgres (default 6, 3 with -short)")

// forkCycles returns -strata.fork-kills, or def (short with -short).
func forkCycles(def, short int) int {
	switch {
	case *forkKills > 0:
		return *forkKills
	case testing.Short():
		return short
	}
	return def
}

// pgVacuum is what vacuums a PostgreSQL store: PostgreSQL's own VACUUM
// FULL of strata's tables, which strata vacuum leaves to it
// (docs/retention.md).
const pgVacuum = "VACUUM FULL strata_sessions, strata_events, strata_open, strata_dispositions, strata_constraints, " +
	"strata_artifacts, strata_nodes, strata_roots, strata_markers, strata_checkpoints, strata_checkpoint_index, strata_audit, strata_refs"

func resumeDigest(db *store.DB, session string) (string, error) {
	c, err := db.Resume(session, store.Latest)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.Text())
	return hex.EncodeToString(sum[:8]), nil
}

// TestForkCrash_Child is not a test: it is the child process of
// TestForkCrash_KillLoop and TestForkCrash_KillLoopPostgres. It forks,
// prunes and vacuums until killed, printing a line after each operation
// returned ("fork ID DIGEST", "pruned ID") and before each prune
// ("pruning ID"). A file is vacuumed by store.Vacuum, a PostgreSQL store
// by VACUUM FULL of its tables.
func TestForkCrash_Child(t *testing.T) {
	path := os.Getenv(forkCrashEnv)
	if path == "" {
		t.Skip("helper process for TestForkCrash_KillLoop")
	}
	seed, _ := strconv.ParseInt(os.Getenv(crashSeedEnv), 10, 64)
	rng := rand.New(rand.NewSource(seed))
	fail := func(err error) {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	db, err := store.Open(path, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fail(err)
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		switch r := rng.Intn(10); {
		case r < 5:
			id := fmt.Sprintf("f-%d-%d", seed, i)
			if _, err := db.Fork("base", store.Latest, id); err != nil {
				fail(err)
			}
			d, err := resumeDigest(db, id)
			if err != nil {
				fail(err)
			}
			os.Stdout.WriteString("fork " + id + " " + d + "\n")
		case r < 9:
			ids, err := db.Sessions()
			if err != nil {
				fail(err)
			}
			if len(ids) < 2 {
				continue
			}
			id := ids[rng.Intn(len(ids))]
			if id == "base" {
				continue
			}
			os.Stdout.WriteString("pruning " + id + "\n")
			if _, err := db.Prune(store.PruneOptions{Sessions: []string{id}}); err != nil {
				fail(err)
			}
			os.Stdout.WriteString("pruned " + id + "\n")
		case postgres.IsURL(path):
			pgtest.Exec(t, path, pgVacuum)
			os.Stdout.WriteString("vacuumed\n")
		default:
			if err := db.Close(); err != nil {
				fail(err)
			}
			if _, err := store.Vacuum(context.Background(), path, store.Options{LockTimeout: 10 * time.Second}); err != nil {
				fail(err)
			}
			os.Stdout.WriteString("vacuumed\n")
			if db, err = store.Open(path, store.Options{LockTimeout: 10 * time.Second}); err != nil {
				fail(err)
			}
		}
	}
}

// TestForkCrash_KillLoop kills, with SIGKILL at random moments, a child
// that forks a session, prunes forks and vacuums the file, then reopens
// the database each time: it verifies clean, the forked session resumes
// as before, every fork acknowledged and not being pruned is whole (it
// resumes to the bytes acknowledged), every prune acknowledged is gone.
func TestForkCrash_KillLoop(t *testing.T) {
	forkKillLoop(t, filepath.Join(t.TempDir(), "strata.db"), forkCycles(12, 4), 300*time.Millisecond)
}

// TestForkCrash_KillLoopPostgres is TestForkCrash_KillLoop on a
// PostgreSQL store (skipped without the test server), whose child
// vacuums with VACUUM FULL; its operations take round trips, so the child
// lives longer before the kill.
func TestForkCrash_KillLoopPostgres(t *testing.T) {
	forkKillLoop(t, pgtest.URL(t), forkCycles(6, 3), 2*time.Second)
}

// forkKillLoop runs cycles kill cycles on the database at path, each
// child killed within upTo of its start.
func forkKillLoop(t *testing.T, path string, cycles int, upTo time.Duration) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	bigSession(t, db, "base", 200)
	base, err := resumeDigest(db, "base")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	forks := map[string]string{} // acknowledged: id → resume digest
	pruned, vacuumed := 0, 0
	for c := 0; c < cycles; c++ {
		out := runForkCrashChild(t, path, seed+int64(c), time.Duration(rng.Int63n(int64(upTo))))
		inFlight := ""
		for _, l := range out {
			f := strings.Fields(l)
			switch {
			case len(f) == 3 && f[0] == "fork":
				forks[f[1]] = f[2]
			case len(f) == 2 && f[0] == "pruning":
				inFlight = f[1]
			case len(f) == 2 && f[0] == "pruned":
				delete(forks, f[1])
				inFlight = ""
				pruned++
			case l == "vacuumed":
				vacuumed++
			}
		}
		db, err := store.Open(path, store.Options{ReadOnly: true, LockTimeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("cycle %d: open after the kill: %v", c, err)
		}
		rep, err := db.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Fatalf("cycle %d: verify after the kill: %v %v", c, err, rep.Problems)
		}
		if d, err := resumeDigest(db, "base"); err != nil || d != base {
			t.Fatalf("cycle %d: base resumes to %s (%v), want %s", c, d, err, base)
		}
		for id, want := range forks {
			d, err := resumeDigest(db, id)
			if id == inFlight && errors.Is(err, store.ErrSessionNotFound) {
				delete(forks, id) // pruned before the kill, unacknowledged
				continue
			}
			if err != nil || d != want {
				t.Fatalf("cycle %d: acknowledged fork %s resumes to %s (%v), want %s", c, id, d, err, want)
			}
		}
		ids, err := db.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, ok := forks[id]; !ok && id != "base" {
				// A fork made but not acknowledged, or pruned but not
				// acknowledged, is whole too.
				if _, err := db.Resume(id, store.Latest); err != nil {
					t.Fatalf("cycle %d: unacknowledged fork %s: %v", c, id, err)
				}
			}
		}
		_ = db.Close()
	}
	t.Logf("%d kill cycles: %d forks standing, each whole; %d prunes and %d vacuums acknowledged", cycles, len(forks), pruned, vacuumed)
}

// runForkCrashChild runs the child on path and kills it after it opened
// the database and after; it returns the child's lines.
func runForkCrashChild(t *testing.T, path string, seed int64, after time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestForkCrash_Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), forkCrashEnv+"="+path, crashSeedEnv+"="+strconv.FormatInt(seed, 10))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out []string
	for l := range lines {
		out = append(out, l)
		if l == "ready" {
			break
		}
	}
	time.Sleep(after)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for l := range lines {
		out = append(out, l)
	}
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the child exited before it was killed: %q", out[max(0, len(out)-3):])
	}
	return out
}
