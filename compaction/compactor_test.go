package compaction_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// repairing is a summarizer double that behaves like a model told what it
// missed: attempt 0 leaves out the dispositions and artifacts; a retry adds
// back exactly what in.Missing names, looked up in the raw span it is given.
type repairing struct {
	calls    int
	attempts []int
	missing  [][]string
}

func (r *repairing) Name() string { return "repairing" }

func (r *repairing) Summarize(_ context.Context, in *compaction.Input) (compaction.Output, error) {
	r.calls++
	r.attempts = append(r.attempts, in.Attempt)
	r.missing = append(r.missing, failureStrings(in.Missing))
	c := in.Required.Claims()
	c.Dispositions, c.Artifacts = nil, nil
	for _, f := range in.Missing {
		// Recover the fact from the raw events, as a model re-reading the span
		// would, not from Required.
		for _, e := range in.Events {
			switch {
			case f.Class == marker.ClassRetention && e.Kind.IsDisposition() && e.Key == f.Item:
				c.Dispositions = slices.DeleteFunc(c.Dispositions, func(d tier.Disposition) bool { return d.Key == e.Key })
				c.Dispositions = append(c.Dispositions, tier.Disposition{Key: e.Key, State: e.Kind, By: e.By, Reason: e.Text})
			case f.Class == marker.ClassRetention && e.Kind == tier.KindToolResult && e.Failed && e.Key == f.Item:
				c.Dispositions = slices.DeleteFunc(c.Dispositions, func(d tier.Disposition) bool { return d.Key == e.Key })
				c.Dispositions = append(c.Dispositions, tier.Disposition{Key: e.Key, State: tier.KindFailed, Reason: e.Text})
			case f.Class == marker.ClassArtifact && e.Kind == tier.KindArtifact && e.Key == f.Item:
				c.Artifacts = slices.DeleteFunc(c.Artifacts, func(a tier.Artifact) bool { return a.Key == e.Key })
				c.Artifacts = append(c.Artifacts, tier.Artifact{Key: e.Key, Text: e.Text})
			}
		}
	}
	return compaction.Output{Narrative: "the migration so far", Claims: c}, nil
}

func TestCompactor_Run_Retries(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	events = events[:23] // turns 1-4: the rollback script and the rejected approach

	t.Run("Retries=1 commits on the repaired attempt", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		s := &repairing{}
		c := newCompactor(t, db, compaction.Options{Summarizer: s, Retries: 1, Policy: compaction.Policy{EveryTurns: 4}})
		for _, e := range events {
			if _, err := db.Append(session, e); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Append(session, tier.Event{Kind: tier.KindUser, Text: "next"}); err != nil {
			t.Fatal(err)
		}
		results, err := c.Run(context.Background(), session)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 1 {
			t.Fatalf("results %+v", results)
		}
		r := results[0]
		if !r.Committed() || r.Attempts != 2 || r.Refused != nil || r.From != 1 || r.To != 23 {
			t.Fatalf("result %+v, want seq 1..23 committed on attempt 2", r)
		}
		if !slices.Equal(s.attempts, []int{0, 1}) {
			t.Errorf("attempts %v", s.attempts)
		}
		wantMissing := []string{"retention:" + keyApproach, "artifact:" + keyDown}
		if len(s.missing[0]) != 0 || !slices.Equal(s.missing[1], wantMissing) {
			t.Errorf("Input.Missing per attempt %v, want [] then %v", s.missing, wantMissing)
		}
		audit := refusals(t, db, session)
		if len(audit) != 1 {
			t.Fatalf("audit %+v, want the refused attempt", audit)
		}
		if a := audit[0]; a.Attempt != 0 || a.Summarizer != "repairing" || a.From != 1 || a.To != 23 ||
			!slices.Equal(failureStrings(a.Failures), wantMissing) {
			t.Errorf("audit record %+v", a)
		}
		n := node(t, db, session, r.Node)
		if !slices.ContainsFunc(n.Claims.Dispositions, func(d tier.Disposition) bool { return d.Key == keyApproach && d.State == tier.KindRejected }) {
			t.Errorf("committed node lacks the rejection: %+v", n.Claims.Dispositions)
		}
		checkValidMarkers(t, db, session)
		if ctx := resume(t, db, session, store.Latest); ctx.Source != checkpoint.SourceMarker {
			t.Errorf("Resume(latest) source %s", ctx.Source)
		}
	})

	t.Run("Retries=0 is refused", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		s := &repairing{}
		c := newCompactor(t, db, compaction.Options{Summarizer: s, Policy: compaction.Policy{EveryTurns: 4}})
		results := agentLoop(t, db, c, session, append(slices.Clone(events), tier.Event{Kind: tier.KindUser, Text: "next"}))
		if len(results) != 1 || results[0].Committed() || results[0].Attempts != 1 || s.calls != 1 {
			t.Fatalf("results %+v (%d calls), want one refused attempt", results, s.calls)
		}
		if got := results[0].Refused.Reasons(); got != "retention:"+keyApproach+",artifact:"+keyDown {
			t.Errorf("reasons %s", got)
		}
		if a := refusals(t, db, session); len(a) != 1 || a[0].Attempt != 0 {
			t.Errorf("audit %+v", a)
		}
		if ms := markers(t, db, session); len(ms) != 0 {
			t.Errorf("markers %+v", ms)
		}
	})

	t.Run("Retries exhausted", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		stubborn := summarizerFunc{name: "stubborn", fn: func(in *compaction.Input) (compaction.Output, error) {
			c := in.Required.Claims()
			c.Artifacts = nil
			return compaction.Output{Claims: c}, nil
		}}
		c := newCompactor(t, db, compaction.Options{Summarizer: stubborn, Retries: 2, Policy: compaction.Policy{EveryTurns: 4}})
		results := agentLoop(t, db, c, session, append(slices.Clone(events), tier.Event{Kind: tier.KindUser, Text: "next"}))
		if len(results) != 1 || results[0].Committed() || results[0].Attempts != 3 {
			t.Fatalf("results %+v, want 3 attempts, refused", results)
		}
		audit := refusals(t, db, session)
		var attempts []int
		for _, a := range audit {
			attempts = append(attempts, a.Attempt)
		}
		if !slices.Equal(attempts, []int{0, 1, 2}) {
			t.Errorf("audit attempts %v, want [0 1 2]", attempts)
		}
	})
}

// TestCompactor_Run_SummarizerError checks that a summarizer's error stops the
// compaction, names the span, and writes nothing.
func TestCompactor_Run_SummarizerError(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	boom := errors.New("model: rate limited")
	c := newCompactor(t, db, compaction.Options{Summarizer: summarizerFunc{name: "flaky", fn: func(*compaction.Input) (compaction.Output, error) {
		return compaction.Output{}, boom
	}}, Policy: compaction.Policy{EveryEvents: 10}})
	if _, err := db.Append(session, events[:12]...); err != nil {
		t.Fatal(err)
	}
	_, err := c.Run(context.Background(), session)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "seq 1..10") {
		t.Fatalf("Run: %v", err)
	}
	if a := refusals(t, db, session); len(a) != 0 {
		t.Errorf("audit %+v", a)
	}
	if ms := markers(t, db, session); len(ms) != 0 {
		t.Errorf("markers %+v", ms)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c2 := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryEvents: 10}})
	if _, err := c2.Run(ctx, session); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context: %v", err)
	}
}

// stateBytes returns the whole database as dump's JSON with the raw
// events — every session's frame, nodes, markers, checkpoints, ledger and
// audit — to compare states on any backend.
func stateBytes(t *testing.T, db *store.DB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := db.View(func(s *store.Snapshot) error { return dump.JSON(&b, s, dump.Options{Raw: true}) }); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDB_Commit_Conflict plans two compactions against the same frame: the
// second Commit gets ErrConflict and writes nothing.
func TestDB_Commit_Conflict(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	extract := func(p *store.Plan) store.Summary {
		return store.Summary{Narrative: "x", Claims: p.Required.Claims(), Summarizer: "extractive"}
	}
	setup := func(t *testing.T) *store.DB {
		db := dbtest.Open(t, store.Options{NoSync: true})
		c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryTurns: 1}})
		agentLoop(t, db, c, session, events)
		if n := len(roots(t, db, session)); n < 4 {
			t.Fatalf("%d roots", n)
		}
		return db
	}
	expectConflict := func(t *testing.T, db *store.DB, p *store.Plan) {
		t.Helper()
		before := stateBytes(t, db)
		res, err := db.Commit(p, extract(p))
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second Commit: %v, want ErrConflict", err)
		}
		if isRefused(err) {
			t.Fatal("a conflict is reported as an invalid marker")
		}
		if res.Node != nil || res.Marker != 0 || res.Checkpoint != 0 || res.Refusal != nil {
			t.Errorf("second Commit result %+v", res)
		}
		if after := stateBytes(t, db); !bytes.Equal(before, after) {
			t.Fatal("the conflicting Commit changed the database")
		}
	}

	t.Run("two folds", func(t *testing.T) {
		db := setup(t)
		p1, err := compaction.Policy{Fold: 2, Budget: 512}.PlanFold(db, session)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := compaction.Policy{Fold: 2, Budget: 512}.PlanFold(db, session)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p1.Replaces, p2.Replaces) || p1.FrameVersion != p2.FrameVersion {
			t.Fatalf("plans differ: %v@%d, %v@%d", p1.Replaces, p1.FrameVersion, p2.Replaces, p2.FrameVersion)
		}
		if _, err := db.Commit(p1, extract(p1)); err != nil {
			t.Fatal(err)
		}
		expectConflict(t, db, p2)
	})

	t.Run("a span committed twice", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		if _, err := db.Append(session, events...); err != nil {
			t.Fatal(err)
		}
		p, err := compaction.Policy{EveryTurns: 2, Budget: 512}.PlanSpan(db, session)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(p, extract(p)); err != nil {
			t.Fatal(err)
		}
		expectConflict(t, db, p)
	})

	t.Run("recompact after fold", func(t *testing.T) {
		db := setup(t)
		first := roots(t, db, session)[0]
		pr, err := db.PlanRecompact(session, first.ID, 64)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := compaction.Policy{Fold: 3, Budget: 512}.PlanFold(db, session)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(pf, extract(pf)); err != nil {
			t.Fatal(err)
		}
		expectConflict(t, db, pr)
	})

	t.Run("invalid summary of a stale plan", func(t *testing.T) {
		// A stale plan is a conflict even when the summary is also invalid:
		// nothing is audited for a plan that no longer applies.
		db := setup(t)
		p1, _ := compaction.Policy{Fold: 2, Budget: 512}.PlanFold(db, session)
		p2, _ := compaction.Policy{Fold: 2, Budget: 512}.PlanFold(db, session)
		if _, err := db.Commit(p1, extract(p1)); err != nil {
			t.Fatal(err)
		}
		before := stateBytes(t, db)
		_, err := db.Commit(p2, store.Summary{Narrative: "lossy", Summarizer: "lossy"})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("Commit: %v, want ErrConflict", err)
		}
		if !bytes.Equal(before, stateBytes(t, db)) {
			t.Fatal("the conflicting Commit changed the database")
		}
	})
}

// TestDB_Resume_Deterministic resumes the same state five ways — twice, after
// a close and reopen, from a backup file, and from a backup opened
// read-only — and requires the same bytes every time, for a marker-served,
// a checkpoint-served (refused) and a fallback (stale marker) context.
func TestDB_Resume_Deterministic(t *testing.T) {
	session, events := readIncident(t, "long_migration.jsonl")
	cases := []struct {
		name   string
		sum    compaction.Summarizer
		policy compaction.Policy
		marker func(t *testing.T, db *store.DB) uint64
		source string
	}{
		{"marker", compaction.Extractive{}, compaction.Policy{EveryTurns: 2, Fold: 3},
			func(*testing.T, *store.DB) uint64 { return store.Latest }, checkpoint.SourceMarker},
		{"checkpoint", mustLossy(t, compaction.DropConstraints), compaction.Policy{EveryTurns: 2},
			func(*testing.T, *store.DB) uint64 { return store.Latest }, checkpoint.SourceCheckpoint},
		{"stale marker", compaction.Extractive{}, compaction.Policy{EveryTurns: 2, Fold: 3},
			func(t *testing.T, db *store.DB) uint64 { return 1 }, checkpoint.SourceCheckpoint},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			c := newCompactor(t, db, compaction.Options{Summarizer: tc.sum, Policy: tc.policy})
			agentLoop(t, db, c, session, events)
			m := tc.marker(t, db)

			first := resume(t, db, session, m)
			if first.Source != tc.source {
				t.Fatalf("source %s (%s), want %s", first.Source, first.Reason, tc.source)
			}
			text, sum, js := first.Text(), first.SHA256(), mustJSON(t, first)
			same := func(how string, ctx *checkpoint.Context) {
				t.Helper()
				if !bytes.Equal(ctx.Text(), text) {
					t.Errorf("%s: Text differs:\n%s\n---\n%s", how, ctx.Text(), text)
				}
				if ctx.SHA256() != sum {
					t.Errorf("%s: sha256 %s, want %s", how, ctx.SHA256(), sum)
				}
				if !bytes.Equal(mustJSON(t, ctx), js) {
					t.Errorf("%s: JSON differs", how)
				}
			}
			same("second resume", resume(t, db, session, m))

			backup := filepath.Join(t.TempDir(), "backup.db")
			if _, err := db.BackupFile(backup); err != nil {
				t.Fatal(err)
			}
			re := dbtest.Reopen(t, db, store.Options{})
			same("after reopen", resume(t, re, session, m))
			if err := re.Close(); err != nil {
				t.Fatal(err)
			}

			for _, opts := range []store.Options{{}, {ReadOnly: true}} {
				cp, err := store.Open(backup, opts)
				if err != nil {
					t.Fatal(err)
				}
				same("from the backup", resume(t, cp, session, m))
				if err := cp.Close(); err != nil {
					t.Fatal(err)
				}
			}
			dbtest.MustVerify(t, backup)
		})
	}
}

func mustJSON(t testing.TB, c *checkpoint.Context) []byte {
	t.Helper()
	b, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNew(t *testing.T) {
	s, err := compaction.New("extractive", nil)
	if err != nil || s.Name() != "extractive" {
		t.Fatalf("New(extractive) = %v, %v", s, err)
	}
	s, err = compaction.New("lossy", []string{"negatives", " artifacts", ""})
	if err != nil || s.Name() != "lossy" {
		t.Fatalf("New(lossy) = %v, %v", s, err)
	}
	if _, err := compaction.New("gpt", nil); !errors.Is(err, compaction.ErrUnknownSummarizer) || len(errors.GetAllHints(err)) == 0 {
		t.Fatalf("New(gpt): %v, want ErrUnknownSummarizer with a hint", err)
	}
	if _, err := compaction.New("lossy", []string{"negatives", "vibes"}); !errors.Is(err, compaction.ErrUnknownDrop) || !strings.Contains(err.Error(), `"vibes"`) {
		t.Fatalf("New(lossy, vibes): %v, want ErrUnknownDrop", err)
	}
	if _, err := compaction.NewCompactor(nil, compaction.Options{}); err == nil {
		t.Fatal("NewCompactor without a summarizer succeeded")
	}
}

// spanInput is the incident's seq 1..23 as a plan would give it: raw
// events with seqs and the required claims.
func spanInput(t *testing.T, budget int) *compaction.Input {
	t.Helper()
	_, events := readIncident(t, "migration.jsonl")
	events = events[:23]
	l := tier.NewLedger()
	turn := uint64(0)
	for i := range events {
		events[i].Seq = uint64(i + 1)
		if events[i].Kind == tier.KindUser {
			turn++
		}
		events[i].Turn = turn
		if err := l.Apply(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	req, err := tier.ComputeRequired(nil, events)
	if err != nil {
		t.Fatal(err)
	}
	return &compaction.Input{Session: "mig", Depth: 1, From: 1, To: 23, Budget: budget, Events: events, Required: req}
}

func TestExtractive_Summarize(t *testing.T) {
	in := spanInput(t, 0)
	out, err := compaction.Extractive{}.Summarize(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := in.Required.Claims()
	if err := marker.Validate(marker.Frame{RootDepth: 1}, marker.Frame{RootDepth: 1}, &in.Required, 1, &out.Claims); err != nil {
		t.Fatalf("extractive claims do not validate: %v", err)
	}
	if out.Claims.Count() != want.Count() || out.Claims.Count() == 0 {
		t.Fatalf("claims %+v, want %+v", out.Claims, want)
	}
	if !strings.Contains(out.Narrative, "user: Migrate users.email to citext.") ||
		!strings.Contains(out.Narrative, "call c5 bash: psql -f migrations/003_up.sql --dry-run") {
		t.Errorf("narrative:\n%s", out.Narrative)
	}
	again, _ := compaction.Extractive{}.Summarize(context.Background(), in)
	if again.Narrative != out.Narrative {
		t.Error("extractive is not deterministic")
	}

	// A budget cuts the narrative at a line end, never the claims.
	for _, budget := range []int{120, 160, 200} {
		small, _ := compaction.Extractive{}.Summarize(context.Background(), spanInput(t, budget))
		if small.Claims.Count() != want.Count() {
			t.Fatalf("budget %d cut claims", budget)
		}
		if len(small.Narrative) >= len(out.Narrative) || (small.Narrative != "" && !strings.HasSuffix(small.Narrative, "\n")) {
			t.Errorf("budget %d: narrative of %d bytes %q", budget, len(small.Narrative), small.Narrative)
		}
		n := tier.Node{ID: 1, Depth: 1, From: 1, To: 23, Narrative: small.Narrative, Claims: small.Claims}
		// Over the budget only by the one line a narrative keeps: the
		// user's first, since the span has user text.
		if got := tier.EstimateTokens(checkpoint.NodeText(&n)); got > budget && strings.Count(small.Narrative, "\n") > 1 {
			t.Errorf("budget %d: node renders to %d tokens", budget, got)
		}
		if !strings.Contains(small.Narrative, "user: ") {
			t.Errorf("budget %d: the narrative keeps no user line: %q", budget, small.Narrative)
		}
	}
}

func TestLossy_Summarize(t *testing.T) {
	in := spanInput(t, 0)
	in.Events = append(in.Events, tier.Event{Seq: 24, Turn: 5, Kind: tier.KindToolCall, ID: "c9", Name: "bash"})
	in.To = 24
	var err error
	if in.Required, err = tier.ComputeRequired(nil, in.Events); err != nil {
		t.Fatal(err)
	}
	full := in.Required.Claims()
	if len(full.Dispositions) == 0 || len(full.Artifacts) == 0 || len(full.Constraints) == 0 || len(full.Unresolved) == 0 {
		t.Fatalf("the span should require every class: %+v", full)
	}
	classOf := map[string]string{
		compaction.DropNegatives: marker.ClassRetention, compaction.DropArtifacts: marker.ClassArtifact,
		compaction.DropConstraints: marker.ClassConstraint, compaction.DropOpen: marker.ClassClosure,
	}
	for _, drop := range compaction.DropClasses {
		l := mustLossy(t, drop)
		out, err := l.Summarize(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		c := out.Claims
		counts := map[string][2]int{
			compaction.DropNegatives:   {len(c.Dispositions), len(full.Dispositions)},
			compaction.DropArtifacts:   {len(c.Artifacts), len(full.Artifacts)},
			compaction.DropConstraints: {len(c.Constraints), len(full.Constraints)},
			compaction.DropOpen:        {len(c.Unresolved), len(full.Unresolved)},
		}
		for cl, n := range counts {
			if cl == drop && n[0] != 0 {
				t.Errorf("drop %s: kept %d", drop, n[0])
			}
			if cl != drop && n[0] != n[1] {
				t.Errorf("drop %s: class %s has %d of %d", drop, cl, n[0], n[1])
			}
		}
		err = marker.Validate(marker.Frame{RootDepth: 1}, marker.Frame{RootDepth: 1}, &in.Required, 1, &c)
		var ie *marker.InvalidError
		if !errors.As(err, &ie) {
			t.Fatalf("drop %s: validates", drop)
		}
		for _, f := range ie.Failures {
			if f.Class != classOf[drop] {
				t.Errorf("drop %s: failure %s", drop, f)
			}
		}
		// The dropped negatives are mentioned in passing, without their state.
		if drop == compaction.DropNegatives && !strings.HasPrefix(out.Narrative, "Explored approaches: "+keyApproach) {
			t.Errorf("narrative %q", out.Narrative)
		}
	}
}

// TestCompactor_Run_ConflictReplans races Run against another compaction:
// while the summarizer works on its first plan, a competing compactor
// commits the same span. Run's commit gets ErrConflict, and Run plans again
// from the new frame instead of failing or committing a stale summary.
func TestCompactor_Run_ConflictReplans(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	if _, err := db.Append(session, events...); err != nil {
		t.Fatal(err)
	}
	var asked []string
	raced := false
	racing := summarizerFunc{name: "racing", fn: func(in *compaction.Input) (compaction.Output, error) {
		asked = append(asked, fmt.Sprintf("%d..%d", in.From, in.To))
		if !raced {
			raced = true
			p, err := compaction.Policy{EveryTurns: 2, Budget: 512}.PlanSpan(db, session)
			if err != nil {
				return compaction.Output{}, err
			}
			if _, err := db.Commit(p, store.Summary{Claims: p.Required.Claims(), Summarizer: "competitor"}); err != nil {
				return compaction.Output{}, err
			}
		}
		return compaction.Output{Narrative: "n", Claims: in.Required.Claims()}, nil
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: racing, Policy: compaction.Policy{EveryTurns: 2}})
	results, err := c.Run(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1..12", "13..23", "24..33"}; !slices.Equal(asked, want) {
		t.Fatalf("summarizer asked for %v, want %v (1..12 lost the race, then re-planned)", asked, want)
	}
	if len(results) != 2 || results[0].From != 13 || !results[0].Committed() || !results[1].Committed() {
		t.Fatalf("results %+v", results)
	}
	rs := roots(t, db, session)
	if len(rs) != 3 || rs[0].Summarizer != "competitor" || rs[1].Summarizer != "racing" {
		t.Fatalf("roots %+v", rs)
	}
	if a := refusals(t, db, session); len(a) != 0 {
		t.Errorf("a conflict was audited as a refusal: %+v", a)
	}
	checkValidMarkers(t, db, session)
}

// TestCompactor_Run_OversizedSummaryIsRefused: a summary over the size
// limits is a refusal (class size, audited, a checkpoint), not an error and
// never a node.
func TestCompactor_Run_OversizedSummaryIsRefused(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	for _, tc := range []struct {
		name string
		out  func(in *compaction.Input) compaction.Output
		item string
	}{
		{"narrative", func(in *compaction.Input) compaction.Output {
			return compaction.Output{Narrative: strings.Repeat("x", 5000), Claims: in.Required.Claims()}
		}, "narrative"},
		{"claims", func(in *compaction.Input) compaction.Output {
			c := in.Required.Claims()
			for i := 0; i < 100; i++ {
				c.Artifacts = append(c.Artifacts, tier.Artifact{Key: fmt.Sprintf("junk/%03d", i), Text: strings.Repeat("y", 60)})
			}
			return compaction.Output{Claims: c}
		}, "claims"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true, MaxEventBytes: 4096})
			c := newCompactor(t, db, compaction.Options{Summarizer: summarizerFunc{name: "verbose", fn: func(in *compaction.Input) (compaction.Output, error) {
				return tc.out(in), nil
			}}, Policy: compaction.Policy{EveryEvents: 10}})
			if _, err := db.Append(session, events[:12]...); err != nil {
				t.Fatal(err)
			}
			res, err := c.Run(context.Background(), session)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(res) != 1 || res[0].Committed() || res[0].Refused == nil {
				t.Fatalf("results %+v", res)
			}
			if got := res[0].Refused.Reasons(); got != "size:"+tc.item {
				t.Errorf("reasons %q, want size:%s", got, tc.item)
			}
			if a := refusals(t, db, session); len(a) != 1 || a[0].Failures[0].Class != marker.ClassSize {
				t.Errorf("audit %+v", a)
			}
			if ms := markers(t, db, session); len(ms) != 0 {
				t.Errorf("markers %+v", ms)
			}
		})
	}
}

// TestCompactor_Run_RefusedFoldIsNotAskedAgain: a fold the store refused is
// not planned again over the same roots after every later span; the next
// fold waits for K new roots after it.
func TestCompactor_Run_RefusedFoldIsNotAskedAgain(t *testing.T) {
	session, events := readIncident(t, "long_migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	// Carries everything at depth 1; forgets every disposition at depth 2.
	sum := summarizerFunc{name: "forgets-when-folding", fn: func(in *compaction.Input) (compaction.Output, error) {
		c := in.Required.Claims()
		if in.Depth > 1 {
			c.Dispositions = nil
		}
		return compaction.Output{Claims: c}, nil
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryEvents: 8, Fold: 2}})
	res := agentLoop(t, db, c, session, events)
	var spans, folds int
	var refusedFolds [][2]uint64
	for _, r := range res {
		switch {
		case r.Kind == store.PlanSpan:
			if !r.Committed() {
				t.Fatalf("span %d..%d refused: %v", r.From, r.To, r.Refused)
			}
			spans++
		case r.Kind == store.PlanFold && !r.Committed():
			refusedFolds = append(refusedFolds, [2]uint64{r.From, r.To})
		case r.Kind == store.PlanFold:
			folds++
		}
	}
	if len(refusedFolds) == 0 {
		t.Fatal("no fold was refused: the fixture no longer exercises this")
	}
	for i := 1; i < len(refusedFolds); i++ {
		if refusedFolds[i][0] <= refusedFolds[i-1][1] {
			t.Errorf("fold over seq %d..%d asked again after the refused %d..%d", refusedFolds[i][0], refusedFolds[i][1], refusedFolds[i-1][0], refusedFolds[i-1][1])
		}
	}
	if max := spans/2 + 1; len(refusedFolds)+folds > max {
		t.Errorf("%d fold attempts for %d spans with K=2, want at most %d", len(refusedFolds)+folds, spans, max)
	}
}

// TestCompactor_CompactTo: a span to the boundary the caller names, one L1
// node whatever the L1 rules say, then the policy's folds; asked again, or
// for a seq already compacted, nothing.
func TestCompactor_CompactTo(t *testing.T) {
	session, events := readIncident(t, "long_migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{Fold: 2}})
	ctx := context.Background()
	cuts := []uint64{7, 19, 30}
	var appended uint64
	for i, to := range cuts {
		if _, err := db.Append(session, events[appended:to]...); err != nil {
			t.Fatal(err)
		}
		appended = to
		rs, err := c.CompactTo(ctx, session, to)
		if err != nil {
			t.Fatalf("CompactTo %d: %v", to, err)
		}
		if len(rs) == 0 || rs[0].Kind != store.PlanSpan || !rs[0].Committed() || rs[0].To != to || rs[0].From != cutBefore(cuts, i)+1 {
			t.Fatalf("CompactTo %d: %+v, want an L1 node ending at %d first", to, rs, to)
		}
		if i == 1 && (len(rs) != 2 || rs[1].Kind != store.PlanFold || !rs[1].Committed() || rs[1].From != 1 || rs[1].To != to) {
			t.Fatalf("second CompactTo: %+v, want the fold of the two roots over 1..%d after the span", rs, to)
		}
		again, err := c.CompactTo(ctx, session, to)
		if err != nil || len(again) != 0 {
			t.Fatalf("CompactTo %d again: %+v, %v; want nothing", to, again, err)
		}
	}
	rc, err := db.Resume(session, store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Source != checkpoint.SourceMarker || rc.Boundary != cuts[len(cuts)-1] {
		t.Fatalf("resume: source %s boundary %d, want a marker at %d", rc.Source, rc.Boundary, cuts[len(cuts)-1])
	}
}

// cutBefore returns the boundary before cuts[i], 0 for the first.
func cutBefore(cuts []uint64, i int) uint64 {
	if i == 0 {
		return 0
	}
	return cuts[i-1]
}
