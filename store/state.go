package store

import (
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// StateAt returns the state the raw log of session implies at seq (its
// head at most), as checkpoint.StateOf gives it: computed from the raw
// events 1..seq by the ledger's rules (tier.RequiredBuilder), never from a
// summary. It reads every one of those events.
func (s *Snapshot) StateAt(session string, seq uint64) (checkpoint.State, error) {
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
