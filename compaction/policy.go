package compaction

import (
	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The policy decides when a compaction is due and over what; the store plans
// and commits what it is asked for. PlanSpan, PlanFold and PlanDigest read
// what the policy needs in one snapshot, then plan in another: a compaction
// that committed between the two makes the plan ErrNothingToCompact or
// ErrConflict, and the caller plans again.

// PlanSpan plans the next L1 node p makes due in session, or returns
// store.ErrNothingToCompact: a span as soon as the uncompacted tail reaches
// EveryTokens tokens, every EveryTurns complete turns, or as soon as the
// tail holds EveryEvents events, whichever boundary comes first (by size or
// by events it may fall mid-turn, with calls open). After a refused span,
// the next attempt waits for the next boundary past the refused one, so a
// summarizer that keeps failing is asked once per period, each time over a
// longer span.
func (p Policy) PlanSpan(db *store.DB, session string) (*store.Plan, error) {
	plan, _, err := p.planSpan(db, session)
	return plan, err
}

// planSpan is PlanSpan, also returning the session's Info as the policy
// read it.
func (p Policy) planSpan(db *store.DB, session string) (*store.Plan, store.Info, error) {
	var to uint64
	var info store.Info
	err := db.View(func(s *store.Snapshot) error {
		var err error
		if info, err = s.Info(session); err != nil {
			return err
		}
		to, err = p.spanEnd(s, &info)
		return err
	})
	if err != nil {
		return nil, info, err
	}
	if to == 0 {
		return nil, info, store.ErrNothingToCompact
	}
	plan, err := db.PlanSpan(session, to, p.budget())
	return plan, info, err
}

// frameDue reports whether a frame of roots roots may make a fold or a
// digest due: a fold needs Fold roots, a digest more than MaxRoots.
func (p Policy) frameDue(roots int) bool {
	return (p.Fold >= 2 && roots >= p.Fold) || (p.MaxRoots >= 1 && roots > p.MaxRoots)
}

// spanEnd returns the end of the next due L1 span, or 0. Whether a rule is
// due is read from info, except the turns rule's first turn (one event);
// only a rule that is due reads events: from the span's start up to its
// end (a Tokens rule) or the first past it (a Turns rule), never the rest
// of the tail.
func (p Policy) spanEnd(s *store.Snapshot, info *store.Info) (uint64, error) {
	c := info.CompactedTo
	if info.Head <= c {
		return 0, nil
	}
	refused := max(c, info.RefusedTo)
	best := uint64(0)
	if m := uint64(p.EveryEvents); m > 0 {
		k := (refused-c)/m + 1
		if to := c + k*m; to <= info.Head {
			best = to
		}
	}
	if n := uint64(p.EveryTurns); n > 0 {
		// The span ends before the first event of turn t0+k·n, for the
		// first k that passes the refused span; none is due before that
		// turn has begun.
		var t0 uint64
		if err := s.Events(info.Session, c+1, c+1, func(e tier.Event) error { t0 = e.Turn; return nil }); err != nil {
			return 0, err
		}
		k := uint64(1)
		if refused > c && info.RefusedTurn >= t0 {
			k = (info.RefusedTurn-t0)/n + 1
		}
		if end := t0 + k*n; end <= info.Turn {
			var last uint64
			stop := errors.New("stop")
			err := s.Events(info.Session, c+1, info.Head, func(e tier.Event) error {
				for e.Turn >= end {
					if last > refused {
						return stop
					}
					end += n // that boundary falls inside the refused span
				}
				last = e.Seq
				return nil
			})
			if err != nil && !errors.Is(err, stop) {
				return 0, err
			}
			if errors.Is(err, stop) && (best == 0 || last < best) {
				best = last
			}
		}
	}
	if b := p.EveryTokens; b > 0 {
		// The span ends at the first event at which the tail reaches
		// k·b tokens, for the first k above the refused span's tokens
		// (info.RefusedTokens is 0 when no refused span is past c).
		target := (info.RefusedTokens/b + 1) * b
		if info.TailTokens >= target {
			upto := info.Head
			if best != 0 {
				upto = best // an earlier boundary is due already
			}
			var size int
			var end uint64
			stop := errors.New("stop")
			err := s.Events(info.Session, c+1, upto, func(e tier.Event) error {
				size += checkpoint.EventTextLen(&e)
				if tier.TokensOfBytes(size) >= target {
					end = e.Seq
					return stop
				}
				return nil
			})
			if err != nil && !errors.Is(err, stop) {
				return 0, err
			}
			if end != 0 {
				best = end
			}
		}
	}
	return best, nil
}

// PlanFold plans the next fold p makes due in session, or returns
// store.ErrNothingToCompact: a node of depth d+1 over the first run of Fold
// consecutive roots of depth d. Roots up to the end of the last refused
// fold are not considered: a refused fold is not asked for again, the next
// one waits for Fold more roots after it.
func (p Policy) PlanFold(db *store.DB, session string) (*store.Plan, error) {
	k := p.Fold
	if k < 2 {
		return nil, store.ErrNothingToCompact
	}
	info, roots, err := frame(db, session)
	if err != nil {
		return nil, err
	}
	var first uint64
	i := 0
	for i < len(roots) && roots[i].From <= info.FoldRefusedTo {
		i++
	}
	for i+k <= len(roots) && first == 0 {
		j := i
		for j < len(roots) && roots[j].Depth == roots[i].Depth {
			j++
		}
		if j-i >= k {
			first = roots[i].Node
		}
		i = j
	}
	if first == 0 {
		return nil, store.ErrNothingToCompact
	}
	return db.PlanFold(session, first, k, p.budget())
}

// PlanDigest plans a digest of the first two roots when the frame holds
// more than MaxRoots, or returns store.ErrNothingToCompact. A refused digest
// is not asked for again: the frame then grows as it would without a
// bound, and Compactor.Recompact can still act.
func (p Policy) PlanDigest(db *store.DB, session string) (*store.Plan, error) {
	if p.MaxRoots < 1 {
		return nil, store.ErrNothingToCompact
	}
	info, roots, err := frame(db, session)
	if err != nil {
		return nil, err
	}
	due := len(roots) > p.MaxRoots && len(roots) >= 2 && roots[1].To > info.FoldRefusedTo
	if !due {
		return nil, store.ErrNothingToCompact
	}
	return db.PlanDigest(session, p.budget())
}

// frame returns session's head and the spans of its roots, from one
// snapshot.
func frame(db *store.DB, session string) (info store.Info, roots []store.RootSpan, err error) {
	err = db.View(func(s *store.Snapshot) error {
		if roots, err = s.RootSpans(session); err != nil { // the session with them
			return err
		}
		info, err = s.Info(session)
		return err
	})
	return info, roots, err
}

func (p Policy) budget() int {
	if p.Budget <= 0 {
		return DefaultBudget
	}
	return p.Budget
}

// ErrWindow is returned by Window.Policy for a window and share that do not
// state a policy.
var ErrWindow = errors.New("compaction: invalid window policy")

// Window states a policy the way agents state theirs: the model's context
// window and the share of it a context resumed from the session may take.
// The resumed context is the frame — at most Roots summaries of Budget
// tokens — and the raw tail after them; the tail gets what the frame
// leaves, and reaching it makes an L1 node:
//
//	EveryTokens = Tokens·Share − Roots·Budget
//
// Folds of DefaultFold roots make the L2 and higher nodes, and a digest of
// the first two roots keeps the frame at Roots (Policy.MaxRoots). The
// resumed context then stays within the share, give or take the event that
// ends a span (a span ends at the first event at which the tail reaches
// its size) and the headings around the nodes and events.
type Window struct {
	// Tokens is the model's context window; 0 = DefaultWindow.
	Tokens int
	// Share is the share of the window a resumed context may take, in
	// (0, 1]; 0 = DefaultShare.
	Share float64
	// Roots bounds the frame; 0 = DefaultMaxRoots.
	Roots int
	// Budget is the token budget of each summary; 0 = DefaultBudget.
	Budget int
}

// Policy returns the policy w states, or ErrWindow when it leaves the tail
// less than one summary's budget.
func (w Window) Policy() (Policy, error) {
	if w.Tokens == 0 {
		w.Tokens = DefaultWindow
	}
	if w.Share == 0 {
		w.Share = DefaultShare
	}
	if w.Roots == 0 {
		w.Roots = DefaultMaxRoots
	}
	if w.Budget == 0 {
		w.Budget = DefaultBudget
	}
	switch {
	case w.Tokens < 0:
		return Policy{}, errors.Wrapf(ErrWindow, "a window of %d tokens", w.Tokens)
	case !(w.Share > 0 && w.Share <= 1):
		return Policy{}, errors.WithHint(errors.Wrapf(ErrWindow, "a share of %v", w.Share), "the share of the window a resumed context may take is in (0, 1]: 0.25 is a quarter")
	case w.Roots < 0 || w.Budget < 0:
		return Policy{}, errors.Wrapf(ErrWindow, "%d roots of %d tokens", w.Roots, w.Budget)
	}
	context := int(float64(w.Tokens) * w.Share)
	tail := context - w.Roots*w.Budget
	if tail < w.Budget {
		return Policy{}, errors.WithHintf(errors.Wrapf(ErrWindow, "%d tokens (a share of %v of %d) leave %d for the raw tail beside %d summaries of %d",
			context, w.Share, w.Tokens, tail, w.Roots, w.Budget),
			"the tail needs at least one summary's budget (%d): raise the window or the share, or lower the roots or the budget", w.Budget)
	}
	return Policy{EveryTokens: tail, Fold: DefaultFold, MaxRoots: w.Roots, Budget: w.Budget}, nil
}
