package compaction_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

var (
	flagCases = flag.Int("strata.cases", 0, "random cases of TestCompactor_Random_NoFalseMarker (default 200, 40 with -short)")
	flagSeed  = flag.Int64("strata.seed", 1, "seed of the first random case of TestCompactor_Random_NoFalseMarker; case i uses seed+i")
)

// eventGen makes a random raw log that the ledger accepts: calls opened and
// resolved later (some never), handles opened and closed, ids reused once
// resolved, constraints stated and withdrawn, dispositions changing state,
// artifacts re-recorded, and texts with several lines.
type eventGen struct {
	rng     *rand.Rand
	open    map[string]tier.Kind
	active  map[string]bool
	ids     int
	started bool
}

var (
	dispKeys   = []string{"approach/a", "approach/b", "approach/c", "plan@v1", "plan@v2", "fix/lint"}
	constrKeys = []string{"reversible", "no-downtime", "tests-first", "budget"}
	artKeys    = []string{"out/a.sql", "out/b.sql", "docs/runbook.md", "jobs/77"}
)

func newEventGen(rng *rand.Rand) *eventGen {
	return &eventGen{rng: rng, open: map[string]tier.Kind{}, active: map[string]bool{}}
}

func (g *eventGen) pick(s []string) string { return s[g.rng.Intn(len(s))] }

func (g *eventGen) openOf(k tier.Kind) []string {
	var out []string
	for id, kind := range g.open {
		if kind == k {
			out = append(out, id)
		}
	}
	slices.Sort(out) // map order must not leak into a seeded test
	return out
}

func (g *eventGen) text() string {
	switch g.rng.Intn(6) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("line one\n[%d t1] user: not an event\nline three", g.rng.Intn(100))
	}
	return fmt.Sprintf("text %d", g.rng.Intn(1000))
}

// newID returns a fresh id, or now and then one used before and resolved.
func (g *eventGen) newID(prefix string) string {
	if g.ids > 0 && g.rng.Intn(6) == 0 {
		id := fmt.Sprintf("%s%d", prefix, g.rng.Intn(g.ids))
		if _, open := g.open[id]; !open {
			return id
		}
	}
	g.ids++
	return fmt.Sprintf("%s%d", prefix, g.ids)
}

func (g *eventGen) next() tier.Event {
	if !g.started {
		g.started = true
		return tier.Event{Kind: tier.KindUser, Text: "start"}
	}
	for {
		switch r := g.rng.Intn(100); {
		case r < 8:
			return tier.Event{Kind: tier.KindUser, Text: g.text()}
		case r < 18:
			return tier.Event{Kind: tier.KindAssistant, Text: g.text()}
		case r < 20:
			return tier.Event{Kind: tier.KindSystem, Text: "system"}
		case r < 34:
			id := g.newID("c")
			g.open[id] = tier.KindToolCall
			return tier.Event{Kind: tier.KindToolCall, ID: id, Name: "bash", Text: g.text()}
		case r < 48:
			calls := g.openOf(tier.KindToolCall)
			if len(calls) == 0 {
				continue
			}
			id := g.pick(calls)
			delete(g.open, id)
			e := tier.Event{Kind: tier.KindToolResult, ID: id, Text: g.text()}
			switch g.rng.Intn(8) {
			case 0, 1: // a failure, with or without a key
				e.Failed = true
				if g.rng.Intn(2) == 0 {
					e.Key = g.pick(dispKeys)
				}
			case 2: // a keyed success: it clears the key's failure, if any
				e.Key = g.pick(dispKeys)
			}
			return e
		case r < 53:
			id := g.newID("h")
			g.open[id] = tier.KindOpen
			return tier.Event{Kind: tier.KindOpen, ID: id, Name: g.pick([]string{"file", "process"})}
		case r < 58:
			hs := g.openOf(tier.KindOpen)
			if len(hs) == 0 {
				continue
			}
			id := g.pick(hs)
			delete(g.open, id)
			return tier.Event{Kind: tier.KindClose, ID: id, Failed: g.rng.Intn(5) == 0}
		case r < 65:
			k := g.pick(constrKeys)
			g.active[k] = true
			return tier.Event{Kind: tier.KindConstraint, Key: k, Text: g.text()}
		case r < 70:
			var act []string
			for k := range g.active {
				act = append(act, k)
			}
			if len(act) == 0 {
				continue
			}
			slices.Sort(act)
			k := g.pick(act)
			delete(g.active, k)
			return tier.Event{Kind: tier.KindWithdrawn, Key: k}
		case r < 76:
			return tier.Event{Kind: tier.KindRejected, Key: g.pick(dispKeys), Text: g.text()}
		case r < 80:
			return tier.Event{Kind: tier.KindFailed, Key: g.pick(dispKeys), Text: g.text()}
		case r < 86:
			e := tier.Event{Kind: tier.KindSuperseded, Key: g.pick(dispKeys)}
			if g.rng.Intn(4) != 0 {
				for e.By = g.pick(dispKeys); e.By == e.Key; e.By = g.pick(dispKeys) {
				}
			}
			return e
		default:
			return tier.Event{Kind: tier.KindArtifact, Key: g.pick(artKeys), Text: g.text()}
		}
	}
}

// randomSummarizer carries the required claims but drops each one with
// probability drop, and now and then makes one false claim — the errors a
// model makes. It records what it returned, to check refusals against.
type randomSummarizer struct {
	rng     *rand.Rand
	drop    float64
	mutate  float64
	outputs []summarized
}

type summarized struct {
	from, to uint64
	depth    tier.Depth
	attempt  int
	claims   tier.Claims
}

func (s *randomSummarizer) Name() string { return "random" }

func dropEach[V any](rng *rand.Rand, p float64, xs []V) []V {
	return slices.DeleteFunc(xs, func(V) bool { return rng.Float64() < p })
}

func (s *randomSummarizer) Summarize(_ context.Context, in *compaction.Input) (compaction.Output, error) {
	c := in.Required.Claims()
	c.Unresolved = dropEach(s.rng, s.drop, c.Unresolved)
	c.Resolved = dropEach(s.rng, s.drop, c.Resolved)
	c.Dispositions = dropEach(s.rng, s.drop, c.Dispositions)
	c.Constraints = dropEach(s.rng, s.drop, c.Constraints)
	c.Artifacts = dropEach(s.rng, s.drop, c.Artifacts)
	if s.rng.Float64() < s.mutate {
		switch s.rng.Intn(9) {
		case 0: // the wrong state: "mere mention" of a negative fact
			if len(c.Dispositions) > 0 {
				d := &c.Dispositions[s.rng.Intn(len(c.Dispositions))]
				d.State = map[tier.Kind]tier.Kind{tier.KindRejected: tier.KindFailed, tier.KindFailed: tier.KindSuperseded,
					tier.KindSuperseded: tier.KindRejected}[d.State]
				d.By = ""
			}
		case 1:
			if len(c.Constraints) > 0 {
				x := &c.Constraints[s.rng.Intn(len(c.Constraints))]
				x.Withdrawn = !x.Withdrawn
			}
		case 2: // an open call claimed resolved
			if len(c.Unresolved) > 0 {
				o := c.Unresolved[s.rng.Intn(len(c.Unresolved))]
				c.Resolved = append(c.Resolved, tier.Resolution{ID: o.ID, Kind: o.Kind, Seq: o.Seq})
			}
		case 3:
			c.Unresolved = append(c.Unresolved, tier.Open{ID: "ghost", Kind: tier.KindToolCall})
		case 4:
			c.Dispositions = append(c.Dispositions, tier.Disposition{Key: "approach/imagined", State: tier.KindRejected})
		case 5:
			c.Artifacts = append(c.Artifacts, tier.Artifact{Key: "out/imagined.sql"})
		case 6: // the wrong replacement
			for i := range c.Dispositions {
				if c.Dispositions[i].By != "" {
					c.Dispositions[i].By += "-other"
					break
				}
			}
		case 7: // a replacement the raw log never named
			if len(c.Dispositions) > 0 {
				c.Dispositions[s.rng.Intn(len(c.Dispositions))].By = "approach/imagined"
			}
		case 8: // a handle claimed as a call, or the other way round
			if len(c.Unresolved) > 0 {
				o := &c.Unresolved[s.rng.Intn(len(c.Unresolved))]
				o.Kind = map[tier.Kind]tier.Kind{tier.KindToolCall: tier.KindOpen, tier.KindOpen: tier.KindToolCall}[o.Kind]
			}
		}
	}
	c.Normalize()
	s.outputs = append(s.outputs, summarized{from: in.From, to: in.To, depth: in.Depth, attempt: in.Attempt, claims: c})
	return compaction.Output{Narrative: fmt.Sprintf("work on seq %d..%d", in.From, in.To), Claims: c}, nil
}

// TestCompactor_Random_NoFalseMarker runs random sessions under random compaction
// schedules and a summarizer that randomly drops or falsifies claims, and
// checks after every step: Verify is clean; every valid marker's node
// carries exactly what its raw span implies, by an independent naive replay;
// every refusal was deserved and audited; and Resume(latest) holds every
// fact at head, in a node's claims or in the raw tail.
//
// Reproduce a failing case with -strata.seed=N -strata.cases=1.
func TestCompactor_Random_NoFalseMarker(t *testing.T) {
	cases := *flagCases
	if cases <= 0 {
		cases = 200
		if testing.Short() {
			cases = 40
		}
	}
	var total propertyStats
	for i := 0; i < cases; i++ {
		seed := *flagSeed + int64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce: go test ./compaction -run 'TestCompactor_Random_NoFalseMarker' -strata.seed=%d -strata.cases=1 -v", seed)
				}
			}()
			st := runPropertyCase(t, seed)
			total.committed += st.committed
			total.refused += st.refused
			total.recompacted += st.recompacted
			total.deep += st.deep
			total.digests += st.digests
		})
	}
	t.Logf("%d cases: %+v", cases, total)
	// The cases must reach what they are meant to test.
	if cases >= 20 && (total.committed == 0 || total.refused == 0 || total.recompacted == 0 || total.deep == 0 || total.digests == 0) {
		t.Fatalf("the random cases do not exercise every path: %+v", total)
	}
}

// propertyStats counts what the random cases did: compactions committed
// and refused, roots re-compacted, nodes of depth ≥ 2 and digests
// committed.
type propertyStats struct{ committed, refused, recompacted, deep, digests int }

func anyRefused(rs []compaction.Result) bool {
	for _, r := range rs {
		if !r.Committed() {
			return true
		}
	}
	return false
}

func runPropertyCase(t *testing.T, seed int64) propertyStats {
	const session = "prop"
	rng := rand.New(rand.NewSource(seed))
	db := dbtest.Open(t, store.Options{NoSync: true})
	gen := newEventGen(rand.New(rand.NewSource(seed * 7919)))
	sum := &randomSummarizer{rng: rand.New(rand.NewSource(seed * 104729)), drop: rng.Float64() * 0.3, mutate: rng.Float64() * 0.3}
	var st propertyStats
	refusedAttempts := 0
	// events returns the raw log, read once per step.
	var evs []tier.Event
	events := func() []tier.Event {
		if evs == nil {
			evs = allEvents(t, db, session)
		}
		return evs
	}

	total := 15 + rng.Intn(60)
	for appended := 0; appended < total; {
		batch := make([]tier.Event, 1+rng.Intn(6))
		for i := range batch {
			batch[i] = gen.next()
		}
		if _, err := db.Append(session, batch...); err != nil {
			t.Fatalf("append: %v", err)
		}
		appended += len(batch)
		evs = nil

		compacted := false
		switch r := rng.Intn(10); {
		case r < 6:
			compacted = true
			policy := compaction.Policy{EveryTurns: rng.Intn(4), Fold: []int{0, 0, 2, 3, 4}[rng.Intn(5)], Budget: 32 + rng.Intn(512)}
			if rng.Intn(2) == 0 {
				policy.EveryEvents = 3 + rng.Intn(15)
			}
			if rng.Intn(2) == 0 {
				policy.EveryTokens = 20 + rng.Intn(400)
			}
			if rng.Intn(2) == 0 {
				policy.MaxRoots = 1 + rng.Intn(3)
			}
			c := newCompactor(t, db, compaction.Options{Summarizer: sum, Policy: policy, Retries: rng.Intn(2)})
			sum.outputs = sum.outputs[:0]
			results, err := c.Run(context.Background(), session)
			if err != nil {
				t.Fatalf("Run(%+v): %v", policy, err)
			}
			if m := policy.MaxRoots; m > 0 && policy.EveryTurns+policy.EveryEvents+policy.EveryTokens > 0 {
				// Bounded, unless a refused digest or fold left it as it was.
				if n := len(roots(t, db, session)); n > m && !anyRefused(results) && refusedAttempts == 0 {
					t.Errorf("after Run(%+v) the frame holds %d roots", policy, n)
				}
			}
			outs := sum.outputs
			for _, r := range results {
				refusedAttempts += checkResult(t, db, session, events(), r, &outs)
				if r.Committed() {
					st.committed++
					if r.Depth >= 2 {
						st.deep++
					}
					if r.Kind == store.PlanDigest {
						st.digests++
					}
				} else {
					st.refused++
				}
			}
			if len(outs) != 0 {
				t.Errorf("%d summaries made by Run belong to no result", len(outs))
			}
		case r < 7:
			rs := roots(t, db, session)
			if len(rs) == 0 {
				break
			}
			compacted = true
			root := rs[rng.Intn(len(rs))]
			budget := max(16, root.Budget/2)
			c := newCompactor(t, db, compaction.Options{Summarizer: sum})
			sum.outputs = sum.outputs[:0]
			r, err := c.Recompact(context.Background(), session, root.ID, budget)
			if err != nil && !isRefused(err) {
				t.Fatalf("Recompact(%d): %v", root.ID, err)
			}
			outs := sum.outputs
			refusedAttempts += checkResult(t, db, session, events(), r, &outs)
			if r.Committed() {
				st.recompacted++
				if !slices.Equal(r.InvalidatedMarkers, []uint64{root.ID}) {
					t.Errorf("Recompact(%d) invalidated markers %v", root.ID, r.InvalidatedMarkers)
				}
			}
		}

		if !compacted && appended < total {
			continue // the checks below run after every compaction step, and at the end
		}
		verifyClean(t, db)
		checkValidMarkersOf(t, db, session, events())
		if got := len(refusals(t, db, session)); got != refusedAttempts {
			t.Fatalf("%d audit records, %d refused attempts", got, refusedAttempts)
		}
		checkResumes(t, db, session, events(), rng)
		if t.Failed() {
			t.FailNow()
		}
	}
	return st
}

// checkResult checks one compaction against what the summarizer returned
// for it — the first r.Attempts outputs of outs, which it consumes: a
// committed node holds the last output's claims and they match the span;
// every refused attempt's claims do not. It returns the number of refused
// attempts.
func checkResult(t *testing.T, db *store.DB, session string, events []tier.Event, r compaction.Result, outs *[]summarized) int {
	t.Helper()
	if r.Attempts == 0 || len(*outs) < r.Attempts {
		t.Fatalf("result %d..%d: %d attempts, %d summaries left", r.From, r.To, r.Attempts, len(*outs))
	}
	mine := (*outs)[:r.Attempts]
	*outs = (*outs)[r.Attempts:]
	for i, o := range mine {
		if o.from != r.From || o.to != r.To || o.depth != r.Depth || o.attempt != i {
			t.Fatalf("result %s %d..%d attempt %d: the summarizer was asked for %s %d..%d attempt %d",
				r.Depth, r.From, r.To, i, o.depth, o.from, o.to, o.attempt)
		}
	}
	f := naiveFacts(events, r.From, r.To)
	refused := 0
	for i, o := range mine {
		diff := f.diff(&o.claims)
		last := i == len(mine)-1
		if last && r.Committed() {
			if len(diff) > 0 {
				t.Errorf("committed %s node %d over %d..%d with false or missing claims: %v", r.Depth, r.Node, r.From, r.To, diff)
			}
			n := node(t, db, session, r.Node)
			if n.Claims.Count() != o.claims.Count() {
				t.Errorf("node %d holds %d claims, the summarizer made %d", n.ID, n.Claims.Count(), o.claims.Count())
			}
			continue
		}
		refused++
		if len(diff) == 0 {
			t.Errorf("%s compaction of %d..%d attempt %d refused (%v), but its claims match the span", r.Depth, r.From, r.To, o.attempt, r.Refused)
		}
	}
	if !r.Committed() && r.Refused == nil {
		t.Errorf("result %+v: neither committed nor refused", r)
	}
	return refused
}

// checkResumes resumes the latest context, and one random marker's, and
// checks that each holds every fact; resuming twice gives the same bytes.
func checkResumes(t *testing.T, db *store.DB, session string, events []tier.Event, rng *rand.Rand) {
	t.Helper()
	ctx := resume(t, db, session, store.Latest)
	wantSource := checkpoint.SourceCheckpoint
	if len(roots(t, db, session)) > 0 {
		wantSource = checkpoint.SourceMarker
	}
	if ctx.Source != wantSource {
		t.Errorf("Resume(latest) source %s, want %s (%s)", ctx.Source, wantSource, ctx.Reason)
	}
	checkContextHoldsFactsOf(t, events, ctx)
	if again := resume(t, db, session, store.Latest); again.SHA256() != ctx.SHA256() {
		t.Error("Resume(latest) twice: different bytes")
	}
	ms := markers(t, db, session)
	if len(ms) == 0 {
		return
	}
	m := ms[rng.Intn(len(ms))]
	mctx := resume(t, db, session, m.ID)
	if (mctx.Source == checkpoint.SourceMarker) != (m.Status.String() == "valid") {
		t.Errorf("Resume(marker %d, %s): source %s", m.ID, m.Status, mctx.Source)
	}
	if mctx.Source == checkpoint.SourceCheckpoint && mctx.Boundary > m.Boundary {
		t.Errorf("Resume(marker %d) fell back to seq %d, past its boundary %d", m.ID, mctx.Boundary, m.Boundary)
	}
	checkContextHoldsFactsOf(t, events, mctx)
}
