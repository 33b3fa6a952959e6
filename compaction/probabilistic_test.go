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

func mustProbabilistic(t testing.TB, rate float64, rates map[string]float64, seed uint64) *compaction.Probabilistic {
	t.Helper()
	p, err := compaction.NewProbabilistic(rate, rates, seed)
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

// TestProbabilistic_Retry: a retry carries everything the last attempt was
// not refused for, and drops each missing fact again with probability p.
func TestProbabilistic_Retry(t *testing.T) {
	p := mustProbabilistic(t, 0.5, nil, 9)
	dropped, redropped := 0, 0
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
	// 200 spans × 20 facts at p = 0.5: 2000 ± 4σ (σ ≈ 22) dropped, half of
	// them again.
	if math.Abs(float64(dropped)-2000) > 4*math.Sqrt(4000*0.25) {
		t.Errorf("%d of 4000 facts dropped at p=0.5", dropped)
	}
	if e := float64(dropped) / 2; math.Abs(float64(redropped)-e) > 4*math.Sqrt(e/2) {
		t.Errorf("%d of %d missing facts dropped again at p=0.5", redropped, dropped)
	}
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
}

func TestNewProbabilistic_Errors(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		rates map[string]float64
		want  error
	}{
		{-0.1, nil, compaction.ErrBadRate},
		{1.5, nil, compaction.ErrBadRate},
		{math.NaN(), nil, compaction.ErrBadRate},
		{0.1, map[string]float64{"nope": 0.1}, compaction.ErrUnknownDrop},
		{0.1, map[string]float64{compaction.DropOpen: 2}, compaction.ErrBadRate},
	} {
		if _, err := compaction.NewProbabilistic(tc.rate, tc.rates, 1); !errors.Is(err, tc.want) {
			t.Errorf("NewProbabilistic(%v, %v): %v, want %v", tc.rate, tc.rates, err, tc.want)
		}
	}
}
