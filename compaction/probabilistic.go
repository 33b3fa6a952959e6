package compaction

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// DropResolved is the class of "resolved" claims — ids opened before the
// span and resolved inside it — for Probabilistic's per-class rates. (Lossy
// never drops them; DropOpen covers the UNRESOLVED claims.)
const DropResolved = "resolved"

// ProbabilisticClasses lists the claim classes Probabilistic draws for, in
// the order it draws them.
var ProbabilisticClasses = []string{DropOpen, DropResolved, DropNegatives, DropConstraints, DropArtifacts}

// ErrBadRate is returned for a drop probability or a stickiness outside
// [0, 1], and ErrBadScale for a negative or infinite bias or pressure.
var (
	ErrBadRate  = errors.New("compaction: drop rate must be in [0, 1]")
	ErrBadScale = errors.New("compaction: bias and pressure must be finite and 0 or more")
)

// Defaults of Probabilistic's forgetting model, as strata eval uses them.
const (
	// DefaultBias drops negatives and artifacts at twice the others' rate:
	// an assumption, not a measurement — models are seen to drop negative
	// state ("tried X, it failed") and side products first, and no figure
	// for how much more often is at hand.
	DefaultBias = 2
	// DefaultStickiness re-drops, on a retry, 7 in 10 of the facts the last
	// attempt dropped whatever their rate: a fact a model left out once it
	// mostly leaves out again.
	DefaultStickiness = 0.7
	// DefaultPressureFacts is the median number of required facts of an L1
	// span on the 273 recorded sessions of the project's development data
	// (not part of the repository) under strata eval's documented policy (a
	// span every 20 events or 40 turns: 289 spans, median 3, mean 3.7): at
	// that size pressure doubles the drop rate.
	DefaultPressureFacts = 3
)

// Probabilistic is a deterministic stand-in for a model that forgets: it
// carries the required claims but drops some, fact by fact, the way a
// fluency-tuned model forgets some facts some of the time. Like Lossy, it
// mentions dropped dispositions in passing, without their state.
//
// The forgetting model, for a span requiring n facts (n counts every
// required fact of every class):
//
//   - Rate per class. A fact of class c has the base rate Rates[c] when
//     set, else Rate — times Bias for negatives and artifacts
//     (DropNegatives, DropArtifacts), which models drop more often.
//   - Pressure. The more a span asks to carry, the more is lost: the rate
//     becomes q = min(1, base · (1 + n/PressureFacts)), so a span of
//     PressureFacts facts doubles it and one of three times as many
//     quadruples it. PressureFacts 0 turns pressure off (q = base).
//   - First attempt: each fact is dropped independently with its q.
//   - Retry (Input.Attempt ≥ 1): every fact the last attempt was not
//     refused for is carried; a fact named in Input.Missing is dropped again
//     with probability s = ρ + (1 − ρ)·q, ρ = Stickiness: with probability ρ
//     the drop sticks (the model cannot or will not carry that fact), else
//     it is drawn afresh. ρ = 0 makes retries independent draws.
//
// So a fact is still missing after r retries with probability q·s^r, and a
// span is refused after r retries with probability 1 − ∏(1 − q_i·s_i^r)
// over its facts (RefusalProbability).
//
// Drops are reproducible: the coins for one attempt at one span are drawn
// from a PCG generator seeded with Seed and a hash of the session, the
// span's depth and bounds and the attempt number, one coin per candidate
// fact in a fixed order of the required facts (by class, then by id or
// key), whatever its rate. So the same seed, session and span give the same
// drops whatever order spans are summarized in, and two models that differ
// only in their rates draw the same coins (their runs are paired).
type Probabilistic struct {
	// Rate is the base drop probability of every fact whose class has no
	// entry in Rates; 0 drops nothing.
	Rate float64
	// Rates overrides the base rate per class (ProbabilisticClasses), Bias
	// not applied; nil for none.
	Rates map[string]float64
	// Bias multiplies Rate for negatives and artifacts; 0 means 1 (no
	// bias). DefaultBias is strata eval's.
	Bias float64
	// Stickiness is ρ: the chance that a fact dropped by the last attempt
	// is dropped again on a retry whatever its rate; 0 = drawn afresh.
	Stickiness float64
	// PressureFacts is the number of required facts at which a span's drop
	// rates double (see above); 0 = no pressure.
	PressureFacts float64
	// Seed selects the drops; runs with the same seed drop the same facts.
	Seed uint64
}

// NewProbabilistic returns a copy of p after checking its values: rates and
// Stickiness in [0, 1], classes in ProbabilisticClasses, Bias and
// PressureFacts not negative.
func NewProbabilistic(p Probabilistic) (*Probabilistic, error) {
	if !validRate(p.Rate) {
		return nil, errors.Wrapf(ErrBadRate, "%v", p.Rate)
	}
	if !validRate(p.Stickiness) {
		return nil, errors.Wrapf(ErrBadRate, "stickiness %v", p.Stickiness)
	}
	if !(p.Bias >= 0) || math.IsInf(p.Bias, 0) {
		return nil, errors.Wrapf(ErrBadScale, "bias %v", p.Bias)
	}
	if !(p.PressureFacts >= 0) || math.IsInf(p.PressureFacts, 0) {
		return nil, errors.Wrapf(ErrBadScale, "pressure %v facts", p.PressureFacts)
	}
	rates := p.Rates
	p.Rates = nil
	for c, r := range rates {
		if !slices.Contains(ProbabilisticClasses, c) {
			return nil, errors.WithHintf(errors.Wrapf(ErrUnknownDrop, "%q", c), "use one of %s", strings.Join(ProbabilisticClasses, ", "))
		}
		if !validRate(r) {
			return nil, errors.Wrapf(ErrBadRate, "%s: %v", c, r)
		}
		if p.Rates == nil {
			p.Rates = map[string]float64{}
		}
		p.Rates[c] = r
	}
	return &p, nil
}

func validRate(r float64) bool { return r >= 0 && r <= 1 && !math.IsNaN(r) }

// Name returns "probabilistic".
func (p *Probabilistic) Name() string { return "probabilistic" }

// RateOf returns the base drop probability of a fact of class c: Rates[c],
// else Rate, times Bias for negatives and artifacts.
func (p *Probabilistic) RateOf(c string) float64 {
	if r, ok := p.Rates[c]; ok {
		return r
	}
	if p.Bias > 0 && (c == DropNegatives || c == DropArtifacts) {
		return min(1, p.Rate*p.Bias)
	}
	return p.Rate
}

// DropRate returns the probability q that a fact of class c is dropped on
// the first attempt at a span requiring n facts: RateOf(c) under pressure.
func (p *Probabilistic) DropRate(c string, n int) float64 {
	q := p.RateOf(c)
	if p.PressureFacts > 0 {
		q *= 1 + float64(n)/p.PressureFacts
	}
	return min(1, q)
}

// redropRate returns the probability that a fact of rate q that the last
// attempt dropped is dropped again.
func (p *Probabilistic) redropRate(q float64) float64 {
	return p.Stickiness + (1-p.Stickiness)*q
}

// RefusalProbability returns the probability that the store refuses
// Probabilistic's summary of a span requiring req after retries retries:
// 1 − ∏ over the required facts of (1 − q·s^retries).
func (p *Probabilistic) RefusalProbability(req *tier.Required, retries int) float64 {
	facts := requiredFacts(req)
	keep := 1.0
	for _, f := range facts {
		q := p.DropRate(f.class, len(facts))
		keep *= 1 - q*math.Pow(p.redropRate(q), float64(retries))
	}
	return 1 - keep
}

// fact is one required fact: its drop class, the reason class and item a
// refusal would name it by, the Required list it is in and its index there.
type fact struct {
	class  string
	reason string
	item   string
	list   factList
	index  int
}

// factList names one list of a tier.Required.
type factList int

const (
	listUnresolved factList = iota
	listResolved
	listFailures
	listDispositions
	listConstraints
	listArtifacts
)

// requiredFacts lists req's facts in ProbabilisticClasses order, each list
// in its (sorted) order. A new list of required facts is one line here and
// one in Summarize's claims.
func requiredFacts(req *tier.Required) []fact {
	out := make([]fact, 0, req.Count())
	for i, o := range req.Unresolved {
		out = append(out, fact{DropOpen, marker.ClassClosure, o.ID, listUnresolved, i})
	}
	for i, r := range req.Resolved {
		out = append(out, fact{DropResolved, marker.ClassClosure, marker.Invocation(r), listResolved, i})
	}
	for i, r := range req.Failures {
		out = append(out, fact{DropNegatives, marker.ClassRetention, marker.Invocation(r), listFailures, i})
	}
	for i, d := range req.Dispositions {
		out = append(out, fact{DropNegatives, marker.ClassRetention, d.Key, listDispositions, i})
	}
	for i, c := range req.Constraints {
		out = append(out, fact{DropConstraints, marker.ClassConstraint, c.Key, listConstraints, i})
	}
	for i, a := range req.Artifacts {
		out = append(out, fact{DropArtifacts, marker.ClassArtifact, a.Key, listArtifacts, i})
	}
	return out
}

// rng returns the generator of one attempt at one span.
func (p *Probabilistic) rng(in *Input) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(in.Session))
	var b [33]byte // a zero byte ends the session: no two inputs hash the same bytes
	binary.BigEndian.PutUint64(b[1:], uint64(in.Depth))
	binary.BigEndian.PutUint64(b[9:], in.From)
	binary.BigEndian.PutUint64(b[17:], in.To)
	binary.BigEndian.PutUint64(b[25:], uint64(in.Attempt))
	h.Write(b[:])
	return rand.New(rand.NewPCG(p.Seed, h.Sum64()))
}

// Summarize implements Summarizer.
func (p *Probabilistic) Summarize(_ context.Context, in *Input) (Output, error) {
	req := &in.Required
	var missing map[marker.Failure]bool
	if in.Attempt > 0 {
		missing = map[marker.Failure]bool{}
		for _, f := range in.Missing {
			missing[marker.Failure{Class: f.Class, Item: f.Item}] = true
		}
	}
	r := p.rng(in)
	facts := requiredFacts(req)
	dropped := map[factList]map[int]bool{}
	for _, f := range facts {
		if missing != nil && !missing[marker.Failure{Class: f.reason, Item: f.item}] {
			continue // carried: the last attempt was not refused for it
		}
		q := p.DropRate(f.class, len(facts))
		if missing != nil {
			q = p.redropRate(q)
		}
		// One draw per candidate fact, whatever its rate, so that a
		// per-class rate does not shift the other facts' coins.
		if r.Float64() < q {
			if dropped[f.list] == nil {
				dropped[f.list] = map[int]bool{}
			}
			dropped[f.list][f.index] = true
		}
	}
	c := tier.Claims{
		Unresolved:   keep(req.Unresolved, dropped[listUnresolved]),
		Resolved:     keep(req.Resolved, dropped[listResolved]),
		Failures:     keep(req.Failures, dropped[listFailures]),
		Dispositions: keep(req.Dispositions, dropped[listDispositions]),
		Constraints:  keep(req.Constraints, dropped[listConstraints]),
		Artifacts:    keep(req.Artifacts, dropped[listArtifacts]),
		// The user's requests and the plan are no class it drops.
		Requests:        slices.Clone(req.Requests),
		RequestsLeftOut: req.RequestsLeftOut,
		Plan:            slices.Clone(req.Plan),
		PlanAt:          req.PlanAt,
	}
	c.Normalize()
	var mentions []string
	for i, d := range req.Dispositions {
		if dropped[listDispositions][i] {
			mentions = append(mentions, d.Key)
		}
	}
	text := extract(in)
	if len(mentions) > 0 {
		text = "Explored approaches: " + strings.Join(mentions, ", ") + ".\n" + text
	}
	out := Output{Claims: c}
	out.Narrative = fitNarrative(in, &out.Claims, text)
	return out, nil
}

// keep returns the elements of s whose index is not in drop.
func keep[V any](s []V, drop map[int]bool) []V {
	var out []V
	for i, v := range s {
		if !drop[i] {
			out = append(out, v)
		}
	}
	return out
}
