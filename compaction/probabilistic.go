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

// ErrBadRate is returned for a drop probability outside [0, 1].
var ErrBadRate = errors.New("compaction: drop rate must be in [0, 1]")

// Probabilistic is a deterministic stand-in for a model that forgets: it
// carries the required claims but drops each required fact independently
// with probability Rate (or Rates[class]), the way a fluency-tuned model
// forgets some facts some of the time. Like Lossy, it mentions dropped
// dispositions in passing, without their state.
//
// Drops are reproducible: the coins for one attempt at one span are drawn
// from a PCG generator seeded with Seed and a hash of the session, the
// span's depth and bounds and the attempt number, in a fixed order of the
// required facts (by class, then by id or key). So the same seed, session
// and span give the same drops whatever order spans are summarized in.
//
// On a retry (Input.Attempt ≥ 1) it carries every required fact the last
// attempt was not refused for, and drops each fact named in Input.Missing
// again with its probability: a model re-asked for what it forgot mostly
// gets it right. A fact is therefore still missing after r retries with
// probability p^(r+1), and a span with required facts of probabilities p_i
// is refused after r retries with probability 1 − ∏(1 − p_i^(r+1))
// (RefusalProbability).
type Probabilistic struct {
	// Rate is the drop probability of every fact whose class has no entry
	// in Rates; 0 drops nothing.
	Rate float64
	// Rates overrides Rate per class (ProbabilisticClasses); nil for none.
	Rates map[string]float64
	// Seed selects the drops; runs with the same seed drop the same facts.
	Seed uint64
}

// NewProbabilistic returns a Probabilistic dropping each fact with
// probability rate, rates overriding it per class, drawn from seed.
func NewProbabilistic(rate float64, rates map[string]float64, seed uint64) (*Probabilistic, error) {
	if !validRate(rate) {
		return nil, errors.Wrapf(ErrBadRate, "%v", rate)
	}
	p := &Probabilistic{Rate: rate, Seed: seed}
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
	return p, nil
}

func validRate(r float64) bool { return r >= 0 && r <= 1 && !math.IsNaN(r) }

// Name returns "probabilistic".
func (p *Probabilistic) Name() string { return "probabilistic" }

// RateOf returns the drop probability of a fact of class c.
func (p *Probabilistic) RateOf(c string) float64 {
	if r, ok := p.Rates[c]; ok {
		return r
	}
	return p.Rate
}

// RefusalProbability returns the probability that the store refuses
// Probabilistic's summary of a span requiring req after retries retries:
// 1 − ∏ over the required facts of (1 − p^(retries+1)).
func (p *Probabilistic) RefusalProbability(req *tier.Required, retries int) float64 {
	keep := 1.0
	for _, f := range requiredFacts(req) {
		keep *= 1 - math.Pow(p.RateOf(f.class), float64(retries+1))
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
// in its (sorted) order.
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
	dropped := map[factList]map[int]bool{}
	for _, f := range requiredFacts(req) {
		if missing != nil && !missing[marker.Failure{Class: f.reason, Item: f.item}] {
			continue // carried: the last attempt was not refused for it
		}
		// One draw per candidate fact, whatever its rate, so that a
		// per-class rate does not shift the other facts' coins.
		if r.Float64() < p.RateOf(f.class) {
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
