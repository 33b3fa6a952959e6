package compaction_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// spanOf returns the input of an L1 span [from, from+9] that requires n
// facts of each of the five classes.
func spanOf(session string, from uint64, n int) *compaction.Input {
	req := tier.Required{From: from, To: from + 9}
	for i := 0; i < n; i++ {
		req.Unresolved = append(req.Unresolved, tier.Open{ID: fmt.Sprintf("c%d", i), Kind: tier.KindToolCall})
		r := tier.Resolution{ID: fmt.Sprintf("r%d", i), Kind: tier.KindToolCall, Seq: from - 1, At: from + 1}
		req.Resolved = append(req.Resolved, r)
		req.ResolvedInside = append(req.ResolvedInside, r)
		req.Dispositions = append(req.Dispositions, tier.Disposition{Key: fmt.Sprintf("d%d", i), State: tier.KindRejected})
		req.Constraints = append(req.Constraints, tier.Constraint{Key: fmt.Sprintf("k%d", i)})
		req.Artifacts = append(req.Artifacts, tier.Artifact{Key: fmt.Sprintf("a%d", i)})
	}
	return &compaction.Input{Session: session, Depth: 1, From: req.From, To: req.To, Required: req}
}

func summarize(t testing.TB, s compaction.Summarizer, in *compaction.Input) compaction.Output {
	t.Helper()
	out, err := s.Summarize(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustProbabilistic returns the independent model: no bias, no pressure,
// no stickiness.
func mustProbabilistic(t testing.TB, rate float64, rates map[string]float64, seed uint64) *compaction.Probabilistic {
	t.Helper()
	return mustModel(t, compaction.Probabilistic{Rate: rate, Rates: rates, Seed: seed})
}

func mustModel(t testing.TB, m compaction.Probabilistic) *compaction.Probabilistic {
	t.Helper()
	p, err := compaction.NewProbabilistic(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// missing returns the failures Validate finds in out's claims.
func missing(in *compaction.Input, out compaction.Output) []marker.Failure {
	f := marker.Frame{Version: 1, RootDepth: 1}
	var ie *marker.InvalidError
	if errors.As(marker.Validate(f, f, &in.Required, 1, &out.Claims), &ie) {
		return ie.Failures
	}
	return nil
}

func TestProbabilistic_Extremes(t *testing.T) {
	in := spanOf("s", 1, 4)
	if got := summarize(t, mustProbabilistic(t, 0, nil, 1), in).Claims; !reflect.DeepEqual(got, in.Required.Claims()) {
		t.Fatalf("rate 0: claims %+v, want the required ones", got)
	}
	if got := summarize(t, mustProbabilistic(t, 1, nil, 1), in).Claims; got.Count() != 0 {
		t.Fatalf("rate 1: %d claims, want none", got.Count())
	}
	// A per-class rate: only negatives dropped.
	out := summarize(t, mustProbabilistic(t, 0, map[string]float64{compaction.DropNegatives: 1}, 1), in)
	if len(out.Claims.Dispositions) != 0 || out.Claims.Count() != in.Required.Count()-4 {
		t.Fatalf("negatives=1: claims %+v", out.Claims)
	}
	for _, f := range missing(in, out) {
		if f.Class != marker.ClassRetention {
			t.Errorf("negatives=1: refused for %s", f)
		}
	}
}

func TestProbabilistic_Reproducible(t *testing.T) {
	p := mustProbabilistic(t, 0.3, nil, 42)
	a := spanOf("s", 1, 10)
	b := spanOf("s", 11, 10)
	outA, outB := summarize(t, p, a), summarize(t, p, b)
	// Another summarizer value with the same seed, spans in the other order.
	q := mustProbabilistic(t, 0.3, nil, 42)
	if got := summarize(t, q, b); !reflect.DeepEqual(got, outB) {
		t.Fatal("the same seed and span gave other drops")
	}
	if got := summarize(t, q, a); !reflect.DeepEqual(got, outA) {
		t.Fatal("the same seed and span gave other drops, called in another order")
	}
	if reflect.DeepEqual(outA.Claims, summarize(t, mustProbabilistic(t, 0.3, nil, 43), a).Claims) &&
		reflect.DeepEqual(outA.Claims, summarize(t, mustProbabilistic(t, 0.3, nil, 44), a).Claims) {
		t.Fatal("three seeds, the same drops of 50 facts at p=0.3")
	}
	if reflect.DeepEqual(outA.Claims, summarize(t, p, spanOf("other", 1, 10)).Claims) {
		t.Fatal("another session's span of the same bounds dropped the same 50 facts")
	}
}

// retryCounts summarizes 200 spans of 4 facts per class with p, then retries
// each once, told what was missing, and returns the facts dropped by the
// first attempts and again by the retries. It fails t if a retry drops a
// fact its first attempt carried.
func retryCounts(t *testing.T, p *compaction.Probabilistic) (dropped, redropped int) {
	t.Helper()
	for span := uint64(0); span < 200; span++ {
		in := spanOf("s", 1+10*span, 4)
		first := missing(in, summarize(t, p, in))
		dropped += len(first)
		in.Attempt, in.Missing = 1, first
		second := missing(in, summarize(t, p, in))
		redropped += len(second)
		was := map[marker.Failure]bool{}
		for _, f := range first {
			was[marker.Failure{Class: f.Class, Item: f.Item}] = true
		}
		for _, f := range second {
			if !was[marker.Failure{Class: f.Class, Item: f.Item}] {
				t.Fatalf("span %d: the retry dropped %s, which the first attempt carried", span, f)
			}
		}
	}
	return dropped, redropped
}

// within fails t unless got is within 4σ of a binomial count of n trials at
// probability q. The coins are seeded, so the check is deterministic: it
// cannot flake, and 4σ makes it robust to any change of seed.
func within(t *testing.T, what string, got, n int, q float64) {
	t.Helper()
	e := float64(n) * q
	if sigma := math.Sqrt(e * (1 - q)); math.Abs(float64(got)-e) > 4*sigma+1e-9 {
		t.Errorf("%s: %d of %d, want %.1f ± %.1f", what, got, n, e, sigma)
	}
}

// TestProbabilistic_Retry: a retry carries everything the last attempt was
// not refused for, and with no stickiness drops each missing fact again
// with its rate.
func TestProbabilistic_Retry(t *testing.T) {
	dropped, redropped := retryCounts(t, mustProbabilistic(t, 0.5, nil, 9))
	within(t, "dropped at p=0.5", dropped, 4000, 0.5)
	within(t, "dropped again at p=0.5, ρ=0", redropped, dropped, 0.5)
}

// TestProbabilistic_Sticky: with stickiness ρ a missing fact is dropped
// again with probability ρ + (1−ρ)·p; the first attempt is the same as
// without stickiness (the same coins).
func TestProbabilistic_Sticky(t *testing.T) {
	indep := mustProbabilistic(t, 0.1, nil, 9)
	sticky := mustModel(t, compaction.Probabilistic{Rate: 0.1, Stickiness: 0.7, Seed: 9})
	in := spanOf("s", 1, 10)
	if a, b := summarize(t, indep, in), summarize(t, sticky, in); !reflect.DeepEqual(a, b) {
		t.Fatal("stickiness changed a first attempt")
	}
	dropped, redropped := retryCounts(t, sticky)
	within(t, "dropped at p=0.1", dropped, 4000, 0.1)
	within(t, "dropped again at p=0.1, ρ=0.7", redropped, dropped, 0.7+0.3*0.1)
	if _, again := retryCounts(t, mustModel(t, compaction.Probabilistic{Rate: 0.1, Stickiness: 1, Seed: 9})); again != dropped {
		t.Errorf("ρ=1: %d of %d missing facts dropped again, want all", again, dropped)
	}
}

// TestProbabilistic_BiasAndPressure: negatives and artifacts are dropped at
// Bias times the rate, and every rate grows with the span's required facts.
func TestProbabilistic_BiasAndPressure(t *testing.T) {
	m := mustModel(t, compaction.Probabilistic{Rate: 0.05, Bias: 3, PressureFacts: 10, Seed: 5,
		Rates: map[string]float64{compaction.DropConstraints: 0.2}})
	for _, tc := range []struct {
		class string
		n     int
		want  float64
	}{
		{compaction.DropOpen, 0, 0.05},
		{compaction.DropResolved, 10, 0.1},
		{compaction.DropNegatives, 0, 0.15},
		{compaction.DropArtifacts, 20, 0.45},
		{compaction.DropConstraints, 10, 0.4}, // Rates: no bias, pressure still
		{compaction.DropNegatives, 1000, 1},   // capped
	} {
		if got := m.DropRate(tc.class, tc.n); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("DropRate(%s, %d) = %v, want %v", tc.class, tc.n, got, tc.want)
		}
	}
	// Measured: 400 spans of 4 facts per class (n = 20, pressure ×3).
	count := map[string]int{}
	for span := uint64(0); span < 400; span++ {
		in := spanOf("s", 1+10*span, 4)
		for _, f := range missing(in, summarize(t, m, in)) {
			count[f.Class]++
		}
	}
	within(t, "negatives dropped", count[marker.ClassRetention], 1600, 0.45)
	within(t, "artifacts dropped", count[marker.ClassArtifact], 1600, 0.45)
	within(t, "constraints dropped", count[marker.ClassConstraint], 1600, 0.6)
	// Open and resolved calls both fail as closure.
	within(t, "calls dropped", count[marker.ClassClosure], 3200, 0.15)
}

func TestProbabilistic_RefusalProbability(t *testing.T) {
	p := mustProbabilistic(t, 0.1, map[string]float64{compaction.DropArtifacts: 0.5}, 1)
	in := spanOf("s", 1, 1) // one fact of each of the five classes
	for r, want := range []float64{
		1 - math.Pow(0.9, 4)*0.5,
		1 - math.Pow(0.99, 4)*0.75,
	} {
		if got := p.RefusalProbability(&in.Required, r); math.Abs(got-want) > 1e-12 {
			t.Errorf("retries %d: %v, want %v", r, got, want)
		}
	}
	if got := p.RefusalProbability(&tier.Required{From: 1, To: 2}, 0); got != 0 {
		t.Errorf("no facts: %v", got)
	}
	// Bias 2, pressure ×2 (5 facts, PressureFacts 5), ρ = 0.5: calls and
	// constraints at q = 0.2, negatives and artifacts at 0.4; a missing
	// fact is dropped again at s = 0.5 + 0.5q.
	m := mustModel(t, compaction.Probabilistic{Rate: 0.1, Bias: 2, PressureFacts: 5, Stickiness: 0.5, Seed: 1})
	miss := func(q float64, r int) float64 { return q * math.Pow(0.5+0.5*q, float64(r)) }
	for _, r := range []int{0, 1, 3} {
		want := 1 - math.Pow(1-miss(0.2, r), 3)*math.Pow(1-miss(0.4, r), 2)
		if got := m.RefusalProbability(&in.Required, r); math.Abs(got-want) > 1e-12 {
			t.Errorf("biased, pressed, sticky, retries %d: %v, want %v", r, got, want)
		}
	}
}

func TestNewProbabilistic_Errors(t *testing.T) {
	for _, tc := range []struct {
		m    compaction.Probabilistic
		want error
	}{
		{compaction.Probabilistic{Rate: -0.1}, compaction.ErrBadRate},
		{compaction.Probabilistic{Rate: 1.5}, compaction.ErrBadRate},
		{compaction.Probabilistic{Rate: math.NaN()}, compaction.ErrBadRate},
		{compaction.Probabilistic{Rate: 0.1, Rates: map[string]float64{"nope": 0.1}}, compaction.ErrUnknownDrop},
		{compaction.Probabilistic{Rate: 0.1, Rates: map[string]float64{compaction.DropOpen: 2}}, compaction.ErrBadRate},
		{compaction.Probabilistic{Rate: 0.1, Stickiness: 1.1}, compaction.ErrBadRate},
		{compaction.Probabilistic{Rate: 0.1, Bias: -1}, compaction.ErrBadScale},
		{compaction.Probabilistic{Rate: 0.1, Bias: math.Inf(1)}, compaction.ErrBadScale},
		{compaction.Probabilistic{Rate: 0.1, PressureFacts: math.NaN()}, compaction.ErrBadScale},
	} {
		if _, err := compaction.NewProbabilistic(tc.m); !errors.Is(err, tc.want) {
			t.Errorf("NewProbabilistic(%+v): %v, want %v", tc.m, err, tc.want)
		}
	}
}
