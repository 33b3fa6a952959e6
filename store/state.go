package store

import (
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// StateAt returns the state the raw log of session implies at seq (its
// head at most), as checkpoint.StateOf gives it: the Required of the raw
// events 1..seq by the ledger's rules (tier.RequiredBuilder), never a
// summary's claims. When the frame's first root ends at or before seq, it
// is composed (tier.ExtendPrefix) from the facts the store computed from
// the raw log of that root's span when it was committed and from the raw
// events after it, as a digest is: it reads the tail after the first root,
// and of the prefix only the event after each failure (is it the user's
// rejection?). Otherwise it reads every event 1..seq.
func (s *Snapshot) StateAt(session string, seq uint64) (checkpoint.State, error) {
	ss, err := s.sess(session)
	if err != nil {
		return checkpoint.State{}, err
	}
	st, err := ss.state()
	if err != nil {
		return checkpoint.State{}, err
	}
	seq = min(seq, st.Head)
	roots, err := ss.roots(1)
	if err != nil {
		return checkpoint.State{}, err
	}
	if len(roots) == 0 || roots[0].To > seq {
		return s.stateAtReplay(session, seq)
	}
	first, err := ss.nodeRecord(roots[0].Node)
	if err != nil {
		return checkpoint.State{}, err
	}
	if first.From != 1 || first.To != roots[0].To {
		return checkpoint.State{}, corrupt(session, "roots", u64(1), errors.Newf("the first root names node %d, which covers %d..%d", first.ID, first.From, first.To))
	}
	f, err := ss.factsOf(&first)
	if err != nil {
		return checkpoint.State{}, err
	}
	prefix := f.required(first.To)
	// The failed results of the prefix that the user's rejection of
	// their call made: a rejected event at the next seq (tier.Required.
	// Rejections), which the facts do not record.
	var rejections []uint64
	for _, x := range prefix.Failures {
		if x.At == 0 || x.At >= seq {
			continue
		}
		// The event after the failure first: most are no rejection.
		rejected := false
		for _, c := range []struct {
			seq  uint64
			kind tier.Kind
		}{{x.At + 1, tier.KindRejected}, {x.At, tier.KindToolResult}} {
			var kind tier.Kind
			if err := s.Events(session, c.seq, c.seq, func(e tier.Event) error {
				kind = e.Kind
				return nil
			}); err != nil {
				return checkpoint.State{}, err
			}
			if rejected = kind == c.kind; !rejected {
				break
			}
		}
		if rejected {
			rejections = append(rejections, x.At)
		}
	}
	r := prefix
	if seq > first.To {
		b := tier.NewRequiredBuilderAfter(tier.Before{Open: prefix.Unresolved, Plan: prefix.Plan, PlanAt: prefix.PlanAt})
		if err := s.Events(session, first.To+1, seq, b.Add); err != nil {
			return checkpoint.State{}, err
		}
		next := b.Required()
		if r, err = tier.ExtendPrefix(&prefix, nil, &next); err != nil {
			return checkpoint.State{}, corrupt(session, "nodes", u64(first.ID), err)
		}
		rejections = append(rejections, next.Rejections...)
	}
	slices.Sort(rejections)
	r.Rejections = slices.Compact(rejections)
	return checkpoint.StateOf(&r), nil
}

// stateAtReplay is StateAt from every raw event 1..seq.
func (s *Snapshot) stateAtReplay(session string, seq uint64) (checkpoint.State, error) {
	b := tier.NewRequiredBuilder(nil)
	if err := s.Events(session, 1, seq, b.Add); err != nil {
		return checkpoint.State{}, err
	}
	r := b.Required()
	return checkpoint.StateOf(&r), nil
}

// ResumeFitted returns the context Resume returns and the state at its
// head fitted to budget tokens (Context.Fit): what `strata resume
// --budget` prints. The context is Resume's, byte for byte; the state is
// the raw log's (StateAt).
func (db *DB) ResumeFitted(session string, markerID uint64, budget int) (ctx *checkpoint.Context, f checkpoint.Fitted, err error) {
	err = db.View(func(s *Snapshot) error {
		ctx, f, err = s.ResumeFitted(session, markerID, budget)
		return err
	})
	return ctx, f, err
}

// ResumeFitted is DB.ResumeFitted inside a snapshot.
func (s *Snapshot) ResumeFitted(session string, markerID uint64, budget int) (*checkpoint.Context, checkpoint.Fitted, error) {
	ctx, err := s.Resume(session, markerID)
	if err != nil {
		return nil, checkpoint.Fitted{}, err
	}
	state, err := s.StateAt(session, ctx.Head)
	if err != nil {
		return nil, checkpoint.Fitted{}, err
	}
	return ctx, ctx.Fit(&state, budget), nil
}
