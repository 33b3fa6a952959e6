package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// digestTurn is turn i of a session that opens a call and resolves the one
// before it, rejects an approach, restates a constraint and records an
// artifact now and then: 4 events.
func digestTurn(i int) []tier.Event {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: fmt.Sprintf("turn %d", i)},
		{Kind: tier.KindToolCall, ID: fmt.Sprintf("c%d", i), Name: "bash"},
	}
	if i > 0 {
		evs = append(evs, tier.Event{Kind: tier.KindToolResult, ID: fmt.Sprintf("c%d", i-1), Failed: i%3 == 0, Key: keyIf(i%3 == 0, fmt.Sprintf("approach/%d", i%4))})
	} else {
		evs = append(evs, tier.Event{Kind: tier.KindAssistant, Text: "start"})
	}
	switch i % 4 {
	case 0:
		evs = append(evs, tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("approach/%d", i%5), Text: fmt.Sprint("no, turn ", i)})
	case 1:
		evs = append(evs, tier.Event{Kind: tier.KindConstraint, Key: fmt.Sprintf("rule/%d", i%3), Text: fmt.Sprint("as of turn ", i)})
	case 2:
		evs = append(evs, tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("out/%d.txt", i%3), Text: fmt.Sprint("v", i)})
	default:
		evs = append(evs, tier.Event{Kind: tier.KindAssistant, Text: "ok"})
	}
	return evs
}

func keyIf(ok bool, k string) string {
	if ok {
		return k
	}
	return ""
}

// digestFixture is session "s" of turns digestTurns, compacted into L1
// roots of 4 events each, with no digest yet, in a database that is
// verified when the test ends.
func digestFixture(t *testing.T, turns int) *store.DB {
	t.Helper()
	return digestFixtureIn(t, dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()}), turns)
}

// digestFixtureIn is digestFixture in db.
func digestFixtureIn(t *testing.T, db *store.DB, turns int) *store.DB {
	t.Helper()
	for i := 0; i < turns; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	compactHonestly(t, db, "s", 100)
	return db
}

// compactHonestly commits L1 nodes over every due span of every 4 events,
// then digests while the frame holds more than maxRoots, each with a
// summary that carries exactly what its plan requires.
func compactHonestly(t *testing.T, db *store.DB, session string, maxRoots int) (digests []*store.Plan) {
	t.Helper()
	commit := func(p *store.Plan) {
		t.Helper()
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
			t.Fatalf("commit %s %d..%d: %v", p.Kind, p.From, p.To, err)
		}
	}
	for {
		p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, session)
		if errors.Is(err, store.ErrNothingToCompact) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		commit(p)
		for {
			d, err := compaction.Policy{MaxRoots: maxRoots, Budget: 1000}.PlanDigest(db, session)
			if errors.Is(err, store.ErrNothingToCompact) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			commit(d)
			digests = append(digests, d)
		}
	}
	return digests
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

// TestDigest_PlanCannotBeTamperedWith: a digest plan whose Required was
// emptied, or rebuilt from its exported fields, is checked against the
// facts and raw events, not against what the plan says.
func TestDigest_PlanCannotBeTamperedWith(t *testing.T) {
	for name, tamper := range map[string]func(p *store.Plan) *store.Plan{
		"required emptied": func(p *store.Plan) *store.Plan {
			p.Required = tier.Required{From: p.From, To: p.To}
			return p
		},
		"built from its exported fields": func(p *store.Plan) *store.Plan {
			q := store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To,
				FrameVersion: p.FrameVersion, Replaces: p.Replaces, Children: p.Children, SpanHash: p.SpanHash, Budget: p.Budget}
			return &q
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := digestFixture(t, 4)
			p, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Required.Dispositions) == 0 {
				t.Fatal("the digest requires no disposition: the test no longer builds its case")
			}
			_, err = db.Commit(tamper(p), store.Summary{Narrative: "all fine", Summarizer: "t"})
			var ie *marker.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Commit = %v, want refused", err)
			}
			// Refused: not planned again.
			if _, err := (compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")); !errors.Is(err, store.ErrNothingToCompact) {
				t.Errorf("PlanDigest after the refusal = %v, want ErrNothingToCompact", err)
			}
			mustVerify(t, db)
		})
	}
}

// TestCommit_FoldOfRootsNotConsecutive: a fold or digest plan built by hand
// over roots that are not consecutive, or do not cover its span, is a
// conflict: committing it would leave roots overlapping the new node.
func TestCommit_FoldOfRootsNotConsecutive(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	if len(roots) < 3 {
		t.Fatalf("%d roots", len(roots))
	}
	st := state(t, db, "s")
	for _, kind := range []store.PlanKind{store.PlanFold, store.PlanDigest} {
		p := &store.Plan{Session: "s", Kind: kind, Depth: 2, From: 1, To: roots[2].To, FrameVersion: st.Info.FrameVersion,
			Replaces: []uint64{roots[0].ID, roots[2].ID}, Children: []tier.Node{roots[0], roots[2]}}
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s of roots %d and %d = %v, want ErrConflict", kind, roots[0].ID, roots[2].ID, err)
		}
	}
	if got := mustRoots(t, db, "s"); len(got) != len(roots) {
		t.Errorf("%d roots after the refused plans, %d before", len(got), len(roots))
	}
}

// TestDigest_FactsAreNotTheClaims: a summary may word a disposition's
// reason its own way and still be valid; the facts a digest extends are
// still the raw log's, recorded apart from such claims.
func TestDigest_FactsAreNotTheClaims(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 4; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	for {
		p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s")
		if errors.Is(err, store.ErrNothingToCompact) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c := p.Required.Claims()
		for i := range c.Dispositions {
			c.Dispositions[i].Reason = "paraphrased"
		}
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: c, Summarizer: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Required.Dispositions) == 0 {
		t.Fatal("the digest requires no disposition: the test no longer builds its case")
	}
	for _, disp := range d.Required.Dispositions {
		if disp.Reason == "paraphrased" || disp.Reason == "" {
			t.Errorf("the digest requires %s with reason %q: the summary's, not the raw log's", disp.Key, disp.Reason)
		}
	}
	mustVerify(t, db)
}

// TestVerify_RecordedFactsCheckedAgainstTheRawLog: a root whose recorded
// facts differ from what its raw span requires — what the next digest
// would extend — is reported by Verify.
func TestVerify_RecordedFactsCheckedAgainstTheRawLog(t *testing.T) {
	db := digestFixtureIn(t, dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()}), 4)
	d, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(d, store.Summary{Narrative: "n", Claims: d.Required.Claims(), Summarizer: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
	if err := store.SpoilFacts(db, "s", res.Node.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || strings.Contains(p.String(), "recorded facts differ")
	}
	if !found {
		t.Errorf("Verify reports %v, want the digest's recorded facts", rep.Problems)
	}
}
