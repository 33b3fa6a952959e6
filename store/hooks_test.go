package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// errInjected is the failure the injection tests make a write step return.
var errInjected = errors.New("store_test: injected failure")

// logicalState renders everything a reader can see of the database —
// every session's info, events, ledger, nodes, markers, checkpoints and
// refusals — canonically (fmt prints maps sorted), so that two states
// compare as strings.
func logicalState(t testing.TB, db *store.DB) string {
	t.Helper()
	var b strings.Builder
	err := db.View(func(s *store.Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			st := readSession(t, s, id)
			fmt.Fprintf(&b, "session %q %+v\nledger %+v\n", id, st.Info, *st.Ledger)
			for _, e := range st.Events {
				fmt.Fprintf(&b, "event %+v\n", e)
			}
			if err := s.Nodes(id, func(n tier.Node) error { fmt.Fprintf(&b, "node %+v\n", n); return nil }); err != nil {
				return err
			}
			if err := s.Markers(id, func(m marker.Marker) error { fmt.Fprintf(&b, "marker %+v\n", m); return nil }); err != nil {
				return err
			}
			if err := s.Checkpoints(id, func(c checkpoint.Checkpoint) error { fmt.Fprintf(&b, "checkpoint %+v\n", c); return nil }); err != nil {
				return err
			}
			if err := s.Refusals(id, func(r store.Refusal) error { fmt.Fprintf(&b, "refusal %+v\n", r); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("logicalState: %v", err)
	}
	return b.String()
}

// injectLog is a session with calls, a rejection, a constraint and an
// artifact over several turns: every class of record a commit writes.
func injectLog(turns int) []tier.Event {
	var evs []tier.Event
	for i := 1; i <= turns; i++ {
		c := fmt.Sprintf("call-%d", i)
		evs = append(evs,
			tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("turn %d", i)},
			tier.Event{Kind: tier.KindToolCall, ID: c, Name: "bash", Text: "ls"},
			tier.Event{Kind: tier.KindToolResult, ID: c, Failed: i%2 == 0, Key: fmt.Sprintf("approach/%d", i), Text: "out"},
			tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("file-%d.txt", i)},
		)
		if i%2 == 1 {
			evs = append(evs, tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("idea/%d", i), Text: "no"},
				tier.Event{Kind: tier.KindConstraint, Key: fmt.Sprintf("rule-%d", i), Text: "keep it"})
		} else {
			evs = append(evs, tier.Event{Kind: tier.KindWithdrawn, Key: fmt.Sprintf("rule-%d", i-1)})
		}
		evs = append(evs, tier.Event{Kind: tier.KindOpen, ID: fmt.Sprintf("h-%d", i), Name: "file"})
	}
	return evs
}

// summarize runs a built-in summarizer on a plan.
func summarize(t testing.TB, sum compaction.Summarizer, p *store.Plan) store.Summary {
	t.Helper()
	out, err := sum.Summarize(context.Background(), &compaction.Input{Session: p.Session, Depth: p.Depth, From: p.From, To: p.To,
		Budget: p.Budget, Events: p.Events, Children: p.Children, Required: p.Required})
	if err != nil {
		t.Fatal(err)
	}
	return store.Summary{Narrative: out.Narrative, Claims: out.Claims, Summarizer: sum.Name()}
}

// commitStep is one operation whose write steps are failed one by one.
type commitStep struct {
	name string
	// setup prepares the database; op is the operation under test, run
	// once with a failing step and once without. wantRefused: op's
	// success is a refusal (a *marker.InvalidError).
	setup       func(t *testing.T, db *store.DB)
	op          func(t *testing.T, db *store.DB) error
	wantRefused bool
}

func injectCases() []commitStep {
	lossy, _ := compaction.NewLossy(compaction.DropNegatives, compaction.DropArtifacts)
	log := injectLog(6)
	span := func(sum compaction.Summarizer) func(t *testing.T, db *store.DB) error {
		return func(t *testing.T, db *store.DB) error {
			p, err := compaction.Policy{EveryTurns: 2, Budget: 100}.PlanSpan(db, "s")
			if err != nil {
				t.Fatalf("PlanSpan: %v", err)
			}
			_, err = db.Commit(p, summarize(t, sum, p))
			return err
		}
	}
	twoRoots := func(t *testing.T, db *store.DB) {
		mustAppend(t, db, "s", log...)
		for i := 0; i < 2; i++ {
			if err := span(compaction.Extractive{})(t, db); err != nil {
				t.Fatal(err)
			}
		}
	}
	return []commitStep{
		{name: "append to a new session", op: func(t *testing.T, db *store.DB) error {
			_, err := db.Append("new", log[:7]...)
			return err
		}},
		{name: "append to an existing session", setup: func(t *testing.T, db *store.DB) { mustAppend(t, db, "s", log[:5]...) },
			op: func(t *testing.T, db *store.DB) error {
				_, err := db.Append("s", log[5:14]...)
				return err
			}},
		{name: "commit of a valid span", setup: func(t *testing.T, db *store.DB) { mustAppend(t, db, "s", log...) }, op: span(compaction.Extractive{})},
		{name: "commit of a refused span", setup: func(t *testing.T, db *store.DB) { mustAppend(t, db, "s", log...) }, op: span(lossy), wantRefused: true},
		{name: "commit of a fold", setup: twoRoots, op: func(t *testing.T, db *store.DB) error {
			p, err := compaction.Policy{Fold: 2, Budget: 100}.PlanFold(db, "s")
			if err != nil {
				t.Fatalf("PlanFold: %v", err)
			}
			_, err = db.Commit(p, summarize(t, compaction.Extractive{}, p))
			return err
		}},
		{name: "commit of a refused fold", setup: twoRoots, wantRefused: true, op: func(t *testing.T, db *store.DB) error {
			p, err := compaction.Policy{Fold: 2, Budget: 100}.PlanFold(db, "s")
			if err != nil {
				t.Fatalf("PlanFold: %v", err)
			}
			_, err = db.Commit(p, summarize(t, lossy, p))
			return err
		}},
		{name: "commit of a digest", setup: twoRoots, op: func(t *testing.T, db *store.DB) error {
			p, err := compaction.Policy{MaxRoots: 1, Budget: 100}.PlanDigest(db, "s")
			if err != nil {
				t.Fatalf("PlanDigest: %v", err)
			}
			_, err = db.Commit(p, summarize(t, compaction.Extractive{}, p))
			return err
		}},
		{name: "commit of a refused digest", setup: twoRoots, wantRefused: true, op: func(t *testing.T, db *store.DB) error {
			p, err := compaction.Policy{MaxRoots: 1, Budget: 100}.PlanDigest(db, "s")
			if err != nil {
				t.Fatalf("PlanDigest: %v", err)
			}
			_, err = db.Commit(p, summarize(t, lossy, p))
			return err
		}},
		{name: "commit of a re-compaction", setup: twoRoots, op: func(t *testing.T, db *store.DB) error {
			var roots []tier.Node
			_ = db.View(func(s *store.Snapshot) (err error) { roots, err = s.Roots("s"); return err })
			p, err := db.PlanRecompact("s", roots[0].ID, 50)
			if err != nil {
				t.Fatalf("PlanRecompact: %v", err)
			}
			_, err = db.Commit(p, summarize(t, compaction.Extractive{}, p))
			return err
		}},
	}
}

// TestInject_EveryWriteStep fails, one at a time, every write step of an
// append and of each kind of compaction commit (each record encoded and
// put, and the backend's commit itself): the injected error comes back, the
// database reads exactly as before, and the same operation then succeeds.
//
// Not parallel: the hook is process-wide, so this test runs in the
// sequential phase, when no other test writes.
func TestInject_EveryWriteStep(t *testing.T) {
	total := 0
	for _, tc := range injectCases() {
		t.Run(tc.name, func(t *testing.T) {
			// A dry run lists the steps.
			var steps []string
			{
				db := dbtest.Open(t, store.Options{NoSync: true})
				if tc.setup != nil {
					tc.setup(t, db)
				}
				clear := store.SetTestHook(func(step string) error { steps = append(steps, step); return nil })
				err := tc.op(t, db)
				clear()
				checkOpResult(t, tc, err)
			}
			if len(steps) < 2 || steps[len(steps)-1] != "commit" {
				t.Fatalf("steps %v: want some, ending with the commit", steps)
			}
			for i, step := range steps {
				db := dbtest.Open(t, store.Options{NoSync: true})
				if tc.setup != nil {
					tc.setup(t, db)
				}
				before := logicalState(t, db)
				n := 0
				clear := store.SetTestHook(func(string) error {
					n++
					if n == i+1 {
						return errInjected
					}
					return nil
				})
				err := tc.op(t, db)
				clear()
				if !errors.Is(err, errInjected) {
					t.Fatalf("step %d (%s) failing: op = %v, want the injected error", i, step, err)
				}
				if errors.Is(err, marker.ErrMarkerInvalid) {
					t.Errorf("step %d (%s): an injected failure reported as a refusal: %v", i, step, err)
				}
				if after := logicalState(t, db); after != before {
					t.Errorf("step %d (%s) failing left a partial write:\n%s", i, step, firstLineDiff(before, after))
				}
				// The store still works: the same operation succeeds.
				checkOpResult(t, tc, tc.op(t, db))
			}
			total += len(steps)
			t.Logf("%d write steps failed one at a time", len(steps))
		})
	}
	t.Logf("%d injected failures in all", total)
}

func checkOpResult(t *testing.T, tc commitStep, err error) {
	t.Helper()
	if tc.wantRefused {
		var ie *marker.InvalidError
		if !errors.As(err, &ie) {
			t.Fatalf("op = %v, want a refusal", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("op: %v", err)
	}
}

func firstLineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  before: %s\n  after:  %s", i+1, x, y)
		}
	}
	return "(equal)"
}

// mountTmpfs mounts a tmpfs of size bytes at a fresh directory and
// unmounts it at cleanup; it skips the test when mounting is not allowed.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small-fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// TestInject_FullDisk fills a small file system under a live database:
// the append that does not fit fails with ENOSPC, every acknowledged
// append is stored and nothing of the failed ones; a backup to the full
// file system fails and leaves its destination as it was; once space is
// freed the same database takes appends again, and reopens and verifies.
func TestInject_FullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a file system")
	}
	dir := mountTmpfs(t, 4<<20)
	path := filepath.Join(dir, "strata.db")
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "backup.db")
	old := []byte("the previous backup")
	if err := os.WriteFile(dest, old, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var acked []ack
	big := strings.Repeat("x", 64<<10)
	var full error
	for i := 0; i < 200; i++ {
		text := fmt.Sprintf("%d %s", i, big)
		res, err := db.Append("s", tier.Event{Kind: tier.KindAssistant, Text: text})
		if err != nil {
			full = err
			break
		}
		acked = append(acked, ack{session: "s", res: res, texts: []string{text}})
	}
	if full == nil {
		t.Fatal("200 appends of 64 KiB fit in a 4 MiB file system")
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("append on a full disk = %v, want ENOSPC", full)
	}
	t.Logf("file system full after %d appends: %v", len(acked), full)
	// Every append now fails cleanly, the small ones too, and changes
	// nothing.
	before := logicalState(t, db)
	for i := 0; i < 5; i++ {
		if _, err := db.Append("s", tier.Event{Kind: tier.KindAssistant, Text: big}); err == nil {
			t.Fatal("an append fit after ENOSPC without freeing space")
		}
	}
	if after := logicalState(t, db); after != before {
		t.Fatalf("failed appends changed the database:\n%s", firstLineDiff(before, after))
	}
	checkAcks(t, db, [][]ack{acked})

	// A backup onto the full file system fails and leaves the old file.
	if _, err := db.BackupFile(dest); err == nil {
		t.Error("a backup fit on the full file system")
	}
	if b, _ := os.ReadFile(dest); !bytes.Equal(b, old) {
		t.Errorf("a failed backup changed its destination (%d bytes)", len(b))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".backup.db.tmp-*")); len(left) != 0 {
		t.Errorf("a failed backup left %v", left)
	}

	// Space freed: the same DB goes on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res := mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "after the disk was freed"})
	acked = append(acked, ack{session: "s", res: res, texts: []string{"after the disk was freed"}})
	checkAcks(t, db, [][]ack{acked})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dbtest.MustVerify(t, path)
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	checkAcks(t, ro, [][]ack{acked})
}
