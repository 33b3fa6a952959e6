package store_test

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

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
