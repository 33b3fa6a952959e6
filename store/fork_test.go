package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/store"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/tier"
)

// forkTurn returns the events of turn n: a prompt, a call and its result
// (every fifth one failed), an answer, each with some text.
func forkTurn(n int) []tier.Event {
	id := fmt.Sprintf("call-%d", n)
	text := bytes.Repeat([]byte("x"), 200)
	return []tier.Event{
		{Kind: tier.KindUser, Text: fmt.Sprintf("step %d %s", n, text)},
		{Kind: tier.KindToolCall, ID: id, Name: "run", Text: string(text)},
		{Kind: tier.KindToolResult, ID: id, Failed: n%5 == 0, Text: string(text)},
		{Kind: tier.KindAssistant, Text: fmt.Sprintf("done %d %s", n, text)},
	}
}

// bigSession fills session of db with turns turns, compacted by the
// extractive summarizer as an agent's compactor would.
func bigSession(t testing.TB, db *store.DB, session string, turns int) {
	t.Helper()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTurns: 8, Fold: 4}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < turns; i += 25 {
		var evs []tier.Event
		for j := i; j < min(i+25, turns); j++ {
			evs = append(evs, forkTurn(j)...)
		}
		mustAppend(t, db, session, evs...)
		if _, err := comp.Run(context.Background(), session); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestFork_CostsItsFrame forks a session of 20,000 events in a bbolt file
// and compares the bytes the fork adds to the file with the bytes the
// session takes copied alone into a new file: the fork stores its frame,
// not its raw log. The figures are logged (docs/retention.md).
func TestFork_CostsItsFrame(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "strata.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bigSession(t, db, "src", 5000)
	alone := filepath.Join(dir, "alone.db")
	if err := db.View(func(s *store.Snapshot) error {
		_, err := s.CopyFile(context.Background(), alone, false, store.CopyOptions{Sessions: []string{"src"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Info("src")
	if err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	res, err := db.Fork("src", store.Latest, "dst")
	if err != nil {
		t.Fatal(err)
	}
	added := fileSize(t, path) - before
	session := fileSize(t, alone)
	t.Logf("session of %d events, %d roots: %d bytes alone in a file; its fork (%d roots) adds %d bytes to the file (%.2f%%)",
		info.Head, info.Roots, session, res.Roots, added, 100*float64(added)/float64(session))
	if added*20 > session {
		t.Errorf("the fork added %d bytes, more than 5%% of the session's %d", added, session)
	}
	want, err := db.Resume("src", res.Marker)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Resume("dst", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	want.Session = "dst"
	if !bytes.Equal(got.Text(), want.Text()) {
		t.Fatal("the fork resumes to other bytes than its parent at the marker")
	}
	// The fork compacts on its own across its fork point.
	bigSession(t, db, "dst", 40)
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %v", rep.Problems)
	}
}

const forkCrashEnv = "STRATA_TEST_FORK_CRASH_DB"

func resumeDigest(db *store.DB, session string) (string, error) {
	c, err := db.Resume(session, store.Latest)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.Text())
	return hex.EncodeToString(sum[:8]), nil
}

// TestForkCrash_Child is not a test: it is the child process of
// TestForkCrash_KillLoop. It forks, prunes and vacuums until killed,
// printing a line after each operation returned ("fork ID DIGEST",
// "pruned ID") and before each prune ("pruning ID").
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
	cycles := 12
	if testing.Short() {
		cycles = 4
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	path := filepath.Join(t.TempDir(), "strata.db")
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
	for c := 0; c < cycles; c++ {
		out := killChild(t, "TestForkCrash_Child", []string{forkCrashEnv + "=" + path, crashSeedEnv + "=" + strconv.FormatInt(seed+int64(c), 10)},
			time.Duration(rng.Intn(300))*time.Millisecond)
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
			}
		}
		db, err := store.Open(path, store.Options{ReadOnly: true})
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
			if id == inFlight && err != nil {
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
			if _, ok := forks[id]; !ok && id != "base" && id != inFlight {
				// A fork made but not acknowledged is whole too.
				if _, err := db.Resume(id, store.Latest); err != nil {
					t.Fatalf("cycle %d: unacknowledged fork %s: %v", c, id, err)
				}
			}
		}
		_ = db.Close()
	}
	t.Logf("%d kill cycles: %d forks standing, each whole", cycles, len(forks))
}
