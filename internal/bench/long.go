package bench

import (
	"fmt"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/tier"
)

// LongPolicy is what `strata replay --every-tokens 0 --every-events 40`
// compacts with: an L1 node every 40 events, folds of 4, no bound on the
// frame.
var LongPolicy = compaction.Policy{EveryEvents: 40, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}

// LongSession returns one session, id, of n events: base's sessions one
// after another, over and over, as one agent that never stops. Each
// repetition of a base session gets call ids of its own ("r<rep>.<i>/" +
// the id), so that a call is never opened twice; turns and seqs are left
// to the store. Keys (dispositions, constraints, artifacts) are kept: they
// come from the real sessions' files and approaches, so the state the log
// implies stays bounded however long the session. A base session that
// leaves a call open at its end is left out: repeated, it would add one
// open call per repetition, and the open set would grow with n.
func LongSession(id string, base []Session, n int) Session {
	var use []Session
	for _, s := range base {
		if len(s.Events) > 0 && !leavesOpen(s.Events) {
			use = append(use, s)
		}
	}
	out := Session{ID: id, Events: make([]tier.Event, 0, n)}
	if len(use) == 0 {
		return out
	}
	for rep := 0; len(out.Events) < n; rep++ {
		for i := range use {
			for _, e := range use[i].Events {
				if len(out.Events) == n {
					break
				}
				e.Seq, e.Turn, e.Opener, e.PriorFailure = 0, 0, 0, 0
				if e.ID != "" {
					e.ID = fmt.Sprintf("r%d.%d/%s", rep, i, e.ID)
				}
				out.Events = append(out.Events, e)
			}
		}
	}
	// The last repetition is cut at n: end where nothing is open, as
	// every base session does.
	out.Events = out.Events[:closedPrefix(out.Events)]
	return out
}

// leavesOpen reports whether evs leave a call or resource open at the end.
func leavesOpen(evs []tier.Event) bool { return closedPrefix(evs) < len(evs) }

// closedPrefix returns the length of the longest prefix of evs after which
// no call or resource is open.
func closedPrefix(evs []tier.Event) int {
	open := map[string]bool{}
	end := 0
	for i := range evs {
		switch e := &evs[i]; {
		case e.Kind.Opens():
			open[e.ID] = true
		case e.Kind.Resolves():
			delete(open, e.ID)
		}
		if len(open) == 0 {
			end = i + 1
		}
	}
	return end
}
