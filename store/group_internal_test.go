package store

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/tier"
)

// gatherFixture opens a database whose last group commit released active
// appenders and took an hour, so that a gather waits GroupWait (not a
// quarter of a fast commit), and counts the transactions that commit and
// the gathers that wait.
func gatherFixture(t *testing.T, wait time.Duration, active int32) (db *DB, commits, waits chan struct{}) {
	return gatherFixtureAfter(t, wait, active, time.Hour)
}

// gatherFixtureAfter is gatherFixture with a last commit that took last.
func gatherFixtureAfter(t *testing.T, wait time.Duration, active int32, last time.Duration) (db *DB, commits, waits chan struct{}) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "strata.db"), Options{Create: true, NoSync: true, GroupWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	commits, waits = make(chan struct{}, 16), make(chan struct{}, 16)
	t.Cleanup(SetTestHook(func(step string) error {
		switch step {
		case "commit":
			commits <- struct{}{}
		case "gather":
			waits <- struct{}{}
		}
		return nil
	}))
	db.lastCommit.Store(int64(last))
	db.active.Store(active)
	return db, commits, waits
}

func appendAsync(db *DB, session string) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := db.Append(session, tier.Event{Kind: tier.KindUser, Text: "hi"})
		done <- err
	}()
	return done
}

// mustAppendA appends to session "a". The tests of the waits that must
// not happen count the waits by the "gather" hook: one that waits
// GroupWait's minute is a slow failure, never a pass.
func mustAppendA(t *testing.T, db *DB) {
	t.Helper()
	if err := <-appendAsync(db, "a"); err != nil {
		t.Fatal(err)
	}
}

// TestGather_OneCommitCarriesTheAppendersComingBack: three appenders were
// active at the last commit; the first one back waits in the committer
// for the other two, and one commit carries all three.
func TestGather_OneCommitCarriesTheAppendersComingBack(t *testing.T) {
	db, commits, waits := gatherFixture(t, time.Minute, 3)
	first := appendAsync(db, "a")
	<-waits // the committer holds a's append and waits for company
	second := appendAsync(db, "b")
	<-waits // b's is in; one more was active
	third := appendAsync(db, "c")
	for i, done := range []chan error{first, second, third} {
		if err := <-done; err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if n := len(commits); n != 1 {
		t.Errorf("%d transactions, want 1", n)
	}
	if n := len(waits); n != 0 {
		t.Errorf("%d more waits after the third append came", n)
	}
	if got := db.active.Load(); got != 3 {
		t.Errorf("active = %d after a commit of three appends, want 3", got)
	}
}

// TestGather_WaitsBeforeTheTransaction: the committer waits for company
// before its write transaction begins, so that the transaction's first
// reads are every write's (on PostgreSQL, one round trip) and no write
// transaction is held while nobody writes: another one runs meanwhile.
// Were the wait inside the committer's transaction, the update below would
// wait GroupWait's minute for it (a slow failure), and the append would be
// done by then.
func TestGather_WaitsBeforeTheTransaction(t *testing.T) {
	db, commits, waits := gatherFixture(t, time.Minute, 2)
	first := appendAsync(db, "a")
	<-waits // the committer holds a's append and waits for company
	if err := db.update(func(backend.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		t.Fatalf("the append was done (%v) before the write transaction beside its wait", err)
	default:
	}
	if n := len(commits); n != 1 {
		t.Errorf("%d transactions committed during the wait, want 1 (the update's)", n)
	}
	second := appendAsync(db, "b")
	for i, done := range []chan error{first, second} {
		if err := <-done; err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if n := len(commits); n != 2 {
		t.Errorf("%d transactions, want 2: the update's and one carrying both appends", n)
	}
}

// TestGather_AWaitEndsWhenNobodyComes: the wait is bounded by GroupWait —
// an appender that does not come back delays the commit, which then goes
// without it.
func TestGather_AWaitEndsWhenNobodyComes(t *testing.T) {
	db, commits, waits := gatherFixture(t, 20*time.Millisecond, 2)
	if err := <-appendAsync(db, "a"); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || len(commits) != 1 {
		t.Errorf("%d waits, %d transactions; want one of each", len(waits), len(commits))
	}
	if got := db.active.Load(); got != 1 {
		t.Errorf("active = %d after a commit of one append, want 1", got)
	}
}

// TestGather_AWaitIsAQuarterOfTheLastCommitAtMost: the wait is the shorter
// of GroupWait and a quarter of the last commit's duration. With GroupWait
// a minute, after a commit of 3 ns a quarter is nothing: no wait; after
// one of 4 ns, a wait (of 1 ns).
func TestGather_AWaitIsAQuarterOfTheLastCommitAtMost(t *testing.T) {
	for last, want := range map[time.Duration]int{3: 0, 4: 1} {
		t.Run(last.String(), func(t *testing.T) {
			db, commits, waits := gatherFixtureAfter(t, time.Minute, 2, last)
			mustAppendA(t, db)
			if len(waits) != want || len(commits) != 1 {
				t.Errorf("after a commit of %v: %d waits, %d transactions; want %d and 1", last, len(waits), len(commits), want)
			}
		})
	}
}

// TestGather_NoCommitWaitTurnsItOff: while DB.NoCommitWait holds, a commit
// does not wait for the appenders of the last one either.
func TestGather_NoCommitWaitTurnsItOff(t *testing.T) {
	db, commits, waits := gatherFixture(t, time.Minute, 64)
	restore := db.NoCommitWait()
	defer restore()
	mustAppendA(t, db)
	if len(waits) != 0 || len(commits) != 1 {
		t.Errorf("%d waits, %d transactions; want none and 1", len(waits), len(commits))
	}
}

// TestGather_NoWait: a single appender (one was active) and GroupWait < 0
// never wait.
func TestGather_NoWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wait   time.Duration
		active int32
	}{
		{"single appender", time.Minute, 1},
		{"off", -1, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, commits, waits := gatherFixture(t, tc.wait, tc.active)
			for i := 0; i < 3; i++ {
				mustAppendA(t, db)
			}
			if len(waits) != 0 || len(commits) != 3 {
				t.Errorf("%d waits, %d transactions; want none and 3", len(waits), len(commits))
			}
		})
	}
}

// TestGather_ACompactionsCommitIsNotAnAppender: a pipeline — one goroutine
// appending, another committing compactions — has one appender. A
// compaction's commit queued while an append commits must not count as a
// second one: the next commit, carrying that commit and the next append,
// would wait GroupWait for an append that is not coming.
func TestGather_ACompactionsCommitIsNotAnAppender(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "strata.db"), Options{Create: true, NoSync: true, GroupWait: time.Minute, CommitWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Append("s",
		tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		tier.Event{Kind: tier.KindUser, Text: "again"}); err != nil {
		t.Fatal(err)
	}
	p, err := db.PlanSpan("s", 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	sum := Summary{Narrative: "x rejected", Claims: p.Required.Claims(), Summarizer: "test"}

	held, release, queued := make(chan struct{}), make(chan struct{}), make(chan struct{}, 4)
	lingering := make(chan struct{}, 1)
	var first atomic.Bool
	var waits atomic.Int32
	t.Cleanup(SetTestHook(func(step string) error {
		switch step {
		case "commit":
			if first.CompareAndSwap(false, true) {
				close(held)
				<-release
			}
		case "queued":
			queued <- struct{}{}
		case "linger":
			lingering <- struct{}{}
		case "gather":
			waits.Add(1)
		}
		return nil
	}))
	appended := appendAsync(db, "a") // commits itself, and is held in its transaction
	<-held
	committed := make(chan error, 1)
	go func() {
		_, err := db.Commit(p, sum) // an append is in flight: it waits for the next one
		committed <- err
	}()
	<-queued
	close(release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if got := db.active.Load(); got != 1 {
		t.Errorf("active = %d after one append with a compaction's commit queued behind it, want 1", got)
	}
	// The next append comes once the committer holds the compaction's
	// commit and waits for it ("queued" fires before the commit is in the
	// committer's channel: an append sent before it would go first).
	select {
	case <-lingering:
	case err := <-committed:
		t.Fatalf("the compaction's commit went alone (%v), want it to wait for the next append", err)
	}
	mustAppendA(t, db) // with the compaction's commit
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if n := waits.Load(); n != 0 {
		t.Errorf("%d gathers waited, want none", n)
	}
}
