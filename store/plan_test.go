package store_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_PlanChildrenAreChecked: a re-compaction plan of root 1 whose
// Children names root 3 is a conflict: committed, it would set root 3's
// Parent while root 3 stays in the frame, and the database would fail
// Verify.
func TestCommit_PlanChildrenAreChecked(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	p, err := db.PlanRecompact("s", roots[0].ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p.Children = []tier.Node{roots[2]}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Commit of a plan with another root as its child = %v, want ErrConflict", err)
	}
	rep, _ := db.Verify(store.VerifyOptions{})
	if len(rep.Problems) > 0 {
		t.Errorf("a hand-built plan's Children committed and broke the frame: %v", rep.Problems)
	}
}

// TestCommit_PlanShapeIsChecked: a plan built or edited by hand must name
// as many roots as its kind takes, and the children its node will have;
// else it is a conflict and nothing is written.
func TestCommit_PlanShapeIsChecked(t *testing.T) {
	for name, edit := range map[string]func(t *testing.T, db *store.DB) *store.Plan{
		"a digest of three roots": func(t *testing.T, db *store.DB) *store.Plan {
			p := mustPlan(t)(compaction.Policy{MaxRoots: 1, Budget: 1000}.PlanDigest(db, "s"))
			r := mustRoots(t, db, "s")
			p.Replaces, p.Children, p.To = []uint64{r[0].ID, r[1].ID, r[2].ID}, r[:3], r[2].To
			return p
		},
		"a re-compaction of two roots": func(t *testing.T, db *store.DB) *store.Plan {
			r := mustRoots(t, db, "s")
			p := mustPlan(t)(db.PlanRecompact("s", r[0].ID, 1000))
			p.Replaces, p.To = []uint64{r[0].ID, r[1].ID}, r[1].To
			return p
		},
		"a fold of one root": func(t *testing.T, db *store.DB) *store.Plan {
			p := mustPlan(t)(compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s"))
			p.Replaces, p.Children, p.To = p.Replaces[:1], p.Children[:1], p.Children[0].To
			return p
		},
		"a span naming a child": func(t *testing.T, db *store.DB) *store.Plan {
			mustAppend(t, db, "s", digestTurn(4)...)
			p := mustPlan(t)(compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s"))
			p.Children = mustRoots(t, db, "s")[:1]
			return p
		},
		"a fold whose children are swapped": func(t *testing.T, db *store.DB) *store.Plan {
			p := mustPlan(t)(compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s"))
			p.Children[0], p.Children[1] = p.Children[1], p.Children[0]
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := digestFixture(t, 4)
			before := mustRoots(t, db, "s")
			p := edit(t, db)
			if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
				t.Errorf("Commit = %v, want ErrConflict", err)
			}
			if after := mustRoots(t, db, "s"); len(after) != len(before) {
				t.Errorf("%d roots after the refused plan, %d before", len(after), len(before))
			}
			mustVerify(t, db)
		})
	}
}

// mustPlan fails t on a planning error.
func mustPlan(t *testing.T) func(p *store.Plan, err error) *store.Plan {
	return func(p *store.Plan, err error) *store.Plan {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// spanTurn is turn i of a session whose calls stay open across span
// boundaries: it opens call c<i> and resolves c<i-3>, opens resource r<i>
// every 5th turn and closes it 12 turns later, and rejects an approach now
// and then. 4 or 5 events.
func spanTurn(i int) []tier.Event {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: fmt.Sprintf("turn %d", i)},
		{Kind: tier.KindToolCall, ID: fmt.Sprintf("c%d", i), Name: "bash", Text: "make"},
	}
	if i%5 == 0 {
		evs = append(evs, tier.Event{Kind: tier.KindOpen, ID: fmt.Sprintf("r%d", i), Name: "file"})
	}
	if i >= 12 && (i-12)%5 == 0 {
		evs = append(evs, tier.Event{Kind: tier.KindClose, ID: fmt.Sprintf("r%d", i-12)})
	}
	if i >= 3 {
		evs = append(evs, tier.Event{Kind: tier.KindToolResult, ID: fmt.Sprintf("c%d", i-3), Failed: i%7 == 0,
			Key: keyIf(i%7 == 0, fmt.Sprintf("approach/%d", i%4)), Text: "done"})
	}
	if i%6 == 0 {
		evs = append(evs, tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("approach/%d", i%3), Text: "no"})
	}
	return append(evs, tier.Event{Kind: tier.KindAssistant, Text: "ok"})
}

// rawLog returns session's stored events, seq 1 first.
func rawLog(t *testing.T, db *store.DB, session string) []tier.Event {
	t.Helper()
	var evs []tier.Event
	if err := db.View(func(s *store.Snapshot) error {
		return s.Events(session, 1, ^uint64(0), func(e tier.Event) error { evs = append(evs, e); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// wantRequired returns what a node over from..to of evs (the whole raw log,
// seq 1 first) must claim, from a replay of everything before the span.
func wantRequired(t *testing.T, evs []tier.Event, from, to uint64) tier.Required {
	t.Helper()
	before := replayLedger(t, evs[:from-1]).OpenList()
	r, err := tier.ComputeRequired(before, evs[from-1:to])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkPlan fails t unless p requires what a replay of the raw log says.
func checkPlan(t *testing.T, evs []tier.Event, p *store.Plan) {
	t.Helper()
	want := wantRequired(t, evs, p.From, p.To)
	if !p.Required.Equal(&want) {
		t.Errorf("%s %d..%d requires\n%+v\na replay of the raw log says\n%+v", p.Kind, p.From, p.To, p.Required, want)
	}
}

func commitPlan(t *testing.T, db *store.DB, p *store.Plan) store.CommitResult {
	t.Helper()
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"})
	if err != nil {
		t.Fatalf("commit %s %d..%d: %v", p.Kind, p.From, p.To, err)
	}
	return res
}

// TestPlan_OpenBeforeIsTheFactsOfTheRootBefore: spans, folds and
// re-compactions whose boundaries fall with calls and resources open
// require what a replay of the whole raw log says, though each reads only
// its own span and takes what was open before it from the facts of the root
// that ends there; every node records its facts, once (as its claims).
func TestPlan_OpenBeforeIsTheFactsOfTheRootBefore(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 60; i++ {
		mustAppend(t, db, "s", spanTurn(i)...)
	}
	evs := rawLog(t, db, "s")
	nodes := 0
	check := func(res store.CommitResult) {
		t.Helper()
		nodes++
		if has, err := store.HasFacts(db, "s", res.Node.ID); err != nil || !has {
			t.Errorf("node %d (%d..%d) has no facts recorded (%v)", res.Node.ID, res.Node.From, res.Node.To, err)
		}
		if in, err := store.FactsInClaims(db, "s", res.Node.ID); err != nil || !in {
			t.Errorf("node %d (%d..%d): its facts are stored apart from its claims, which are the same (%v)", res.Node.ID, res.Node.From, res.Node.To, err)
		}
	}
	for round := 0; ; round++ {
		p, err := compaction.Policy{EveryEvents: 7, Budget: 1000}.PlanSpan(db, "s")
		if errors.Is(err, store.ErrNothingToCompact) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, evs, p)
		check(commitPlan(t, db, p))
		for {
			f, err := compaction.Policy{Fold: 3, Budget: 1000}.PlanFold(db, "s")
			if errors.Is(err, store.ErrNothingToCompact) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, evs, f)
			check(commitPlan(t, db, f))
		}
		if round%4 == 3 {
			// Re-compact a root in the middle of the frame.
			roots := mustRoots(t, db, "s")
			r, err := db.PlanRecompact("s", roots[len(roots)/2].ID, 500)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, evs, r)
			check(commitPlan(t, db, r))
		}
	}
	if st := state(t, db, "s"); st.Info.CompactedTo+7 <= st.Info.Head || nodes < 40 {
		t.Fatalf("compacted to %d of %d in %d nodes", st.Info.CompactedTo, st.Info.Head, nodes)
	}
}

// TestPlan_RootWithoutFactsIsDamage: every node records its facts when it
// is committed; a root whose record lost them is damage, never a reason to
// read the raw log again — and Verify names it.
func TestPlan_RootWithoutFactsIsDamage(t *testing.T) {
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 30; i++ {
		mustAppend(t, db, "s", spanTurn(i)...)
	}
	for i := 0; i < 3; i++ {
		commitPlan(t, db, mustPlan(t)(compaction.Policy{EveryEvents: 9, Budget: 1000}.PlanSpan(db, "s")))
	}
	roots := mustRoots(t, db, "s")
	last := roots[len(roots)-1].ID
	if err := store.DropFacts(db, "s", last); err != nil {
		t.Fatal(err)
	}
	_, err := compaction.Policy{EveryEvents: 9, Budget: 1000}.PlanSpan(db, "s")
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.Session != "s" || ce.Bucket != "nodes" || ce.Key != fmt.Sprint(last) {
		t.Errorf("PlanSpan after the last root's facts were dropped: %v, want ErrCorrupt naming node %d", err, last)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || !strings.Contains(fmt.Sprint(rep.Problems), fmt.Sprintf("root node %d (seq %d..%d): records no facts", last, roots[2].From, roots[2].To)) {
		t.Errorf("Verify: %v %v, want the root without facts", rep.Problems, err)
	}
}

// TestPlanSpan_ReadsOnlyItsSpan: an L1 plan and its commit read the raw span
// and nothing after it — here, a raw log whose tail past the span is
// damaged (an event missing) still has the span compacted; the damage is
// for the reads that meet it, and Verify, to report.
func TestPlanSpan_ReadsOnlyItsSpan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true, Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		mustAppend(t, db, "s", spanTurn(i)...)
	}
	for i := 0; i < 2; i++ {
		p, err := compaction.Policy{EveryEvents: 40, Budget: 1000}.PlanSpan(db, "s")
		if err != nil {
			t.Fatal(err)
		}
		commitPlan(t, db, p)
	}
	evs := rawLog(t, db, "s")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	missing := uint64(len(evs) - 10)
	damage(t, path, "s", "l0", seqKey(missing), func([]byte) []byte { return nil })
	db, err = store.Open(path, store.Options{NoSync: true, Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := compaction.Policy{EveryEvents: 40, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatalf("PlanSpan with seq %d (past the span) missing: %v", missing, err)
	}
	if p.From != 81 || p.To != 120 || p.To >= missing {
		t.Fatalf("planned %d..%d, seq %d missing", p.From, p.To, missing)
	}
	checkPlan(t, evs, p)
	q := &store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To,
		FrameVersion: p.FrameVersion, SpanHash: p.SpanHash, Budget: p.Budget}
	if _, err := db.Commit(q, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatalf("Commit with seq %d (past the span) missing: %v", missing, err)
	}
	// A span over the damage meets it.
	if _, err := db.PlanSpan("s", uint64(len(evs)), 1000); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("PlanSpan over seq %d, missing: %v, want ErrCorrupt", missing, err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || rep.OK() {
		t.Errorf("Verify: %v %v, want seq %d reported missing", rep.Problems, err, missing)
	}
}

// TestPlanSpan_SpoiltOpenSetIsCorrupt: a root whose recorded open set
// lacks a call that the next span resolves is damage: the plan over that
// span is ErrCorrupt naming the session and the node, and Verify reports
// the facts.
func TestPlanSpan_SpoiltOpenSetIsCorrupt(t *testing.T) {
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 10; i++ {
		mustAppend(t, db, "s", spanTurn(i)...)
	}
	evs := rawLog(t, db, "s")
	// A root that ends right after the call c3 opens, and a span after it
	// that resolves c3.
	var opened, resolved uint64
	for _, e := range evs {
		switch {
		case e.Kind == tier.KindToolCall && e.ID == "c3":
			opened = e.Seq
		case e.Kind == tier.KindToolResult && e.ID == "c3":
			resolved = e.Seq
		}
	}
	p, err := compaction.Policy{EveryEvents: 5, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	commitPlan(t, db, p)
	p, err = db.PlanSpan("s", opened, 1000)
	if err != nil || p.To != opened {
		t.Fatalf("planned %v, %v; want a span ending at seq %d", p, err, opened)
	}
	res := commitPlan(t, db, p)
	if err := store.SpoilOpenFacts(db, "s", res.Node.ID, "c3"); err != nil {
		t.Fatal(err)
	}
	_, err = db.PlanSpan("s", resolved, 1000)
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.Session != "s" || !strings.Contains(err.Error(), fmt.Sprintf("node %d", res.Node.ID)) {
		t.Errorf("PlanSpan after node %d's open set was spoilt: %v, want ErrCorrupt naming session s and the node", res.Node.ID, err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || !strings.Contains(fmt.Sprint(rep.Problems), "recorded facts differ") {
		t.Errorf("Verify: %v %v, want the node's recorded facts", rep.Problems, err)
	}
}

// TestDigest_BoundsTheFrame: with digests the frame never holds more than
// maxRoots roots; each digest requires what the raw log requires of its
// prefix (the same as a plan over 1..b made from the raw events); its depth
// is the first root's, or one more than the second's; Verify, which checks
// the recorded facts of every root against its raw span, is clean; and the
// resumed context holds every fact at head.
func TestDigest_BoundsTheFrame(t *testing.T) {
	for _, maxRoots := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("max=", maxRoots), func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
			var digests []*store.Plan
			for i := 0; i < 30; i++ {
				mustAppend(t, db, "s", digestTurn(i)...)
				digests = append(digests, compactHonestly(t, db, "s", maxRoots)...)
				if n := len(mustRoots(t, db, "s")); n > maxRoots {
					t.Fatalf("turn %d: %d roots, at most %d wanted", i, n, maxRoots)
				}
			}
			if len(digests) < 5 {
				t.Fatalf("%d digests: the test does not exercise them", len(digests))
			}
			st := state(t, db, "s")
			for _, d := range digests {
				if d.Kind != store.PlanDigest || d.From != 1 || len(d.Children) != 2 {
					t.Fatalf("digest plan %s %d..%d with %d children", d.Kind, d.From, d.To, len(d.Children))
				}
				if want := max(d.Children[0].Depth, d.Children[1].Depth+1); d.Depth != want {
					t.Errorf("digest over %s and %s has depth %s, want %s", d.Children[0].Depth, d.Children[1].Depth, d.Depth, want)
				}
				raw, err := tier.ComputeRequired(nil, st.Events[:d.To])
				if err != nil {
					t.Fatal(err)
				}
				got, want := d.Required, raw
				got.ResolvedInside, want.ResolvedInside = nil, nil
				if !got.Equal(&want) {
					t.Errorf("digest of 1..%d requires\n%+v\nthe raw log requires\n%+v", d.To, got, want)
				}
			}
			mustVerify(t, db)
			rc, err := db.Resume("s", store.Latest)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Source != "marker" || len(rc.Nodes) > maxRoots {
				t.Errorf("resumed from %s with %d nodes", rc.Source, len(rc.Nodes))
			}
		})
	}
}

// TestDigest_FirstRootWithoutFactsIsDamage: a digest records facts of its
// own, for the next digest to extend; a first root whose record lost them
// is damage — PlanDigest is ErrCorrupt naming the node, never a reason to
// read the prefix again — and Verify names it.
func TestDigest_FirstRootWithoutFactsIsDamage(t *testing.T) {
	db := digestFixtureIn(t, dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()}), 4)
	if roots := mustRoots(t, db, "s"); len(roots) < 3 {
		t.Fatalf("%d roots", len(roots))
	}
	p, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if has, err := store.HasFacts(db, "s", res.Node.ID); err != nil || !has {
		t.Fatalf("the digest has no facts recorded (%v)", err)
	}
	mustVerify(t, db)
	if err := store.DropFacts(db, "s", res.Node.ID); err != nil {
		t.Fatal(err)
	}
	_, err = compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.Session != "s" || ce.Bucket != "nodes" || ce.Key != fmt.Sprint(res.Node.ID) {
		t.Errorf("PlanDigest after the first root's facts were dropped: %v, want ErrCorrupt naming node %d", err, res.Node.ID)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if want := fmt.Sprintf("root node %d (seq 1..%d): records no facts", res.Node.ID, res.Node.To); err != nil || !strings.Contains(fmt.Sprint(rep.Problems), want) {
		t.Errorf("Verify: %v %v, want %q", rep.Problems, err, want)
	}
}
