package main

import (
	"github.com/spf13/pflag"

	"github.com/strata-go/strata/compaction"
)

// policyFlags are the compaction policy flags that replay and eval share.
type policyFlags struct {
	everyTokens int
	every       int
	everyEvents int
	fold        int
	maxRoots    int
	budget      int
}

// add defines --every-tokens, --every, --every-events, --fold, --max-roots
// and --budget on f.
func (p *policyFlags) add(f *pflag.FlagSet) {
	f.IntVar(&p.everyTokens, "every-tokens", compaction.DefaultEveryTokens, "make an L1 node as soon as the uncompacted tail reaches N tokens, as a resumed context carries it (bytes/4), even mid-turn (0 = off)")
	f.IntVar(&p.every, "every", 0, "make an L1 node every N complete turns (0 = off)")
	f.IntVar(&p.everyEvents, "every-events", 0, "make an L1 node as soon as the uncompacted tail holds M events, even mid-turn (0 = off)")
	f.IntVar(&p.fold, "fold", compaction.DefaultFold, "fold K consecutive roots of depth d into a depth d+1 node (0 = never)")
	f.IntVar(&p.maxRoots, "max-roots", 0, "keep at most R roots: fold the first two into a digest while there are more (0 = no bound)")
	f.IntVar(&p.budget, "budget", compaction.DefaultBudget, "the token budget of each summary node")
}

// policyFlagNames are the flags add defines.
var policyFlagNames = []string{"every-tokens", "every", "every-events", "fold", "max-roots", "budget"}

// validate checks the values; its errors are bad usage.
func (p *policyFlags) validate() error {
	for _, x := range []struct {
		name string
		v    int
	}{{"every-tokens", p.everyTokens}, {"every", p.every}, {"every-events", p.everyEvents}, {"fold", p.fold}, {"max-roots", p.maxRoots}} {
		if x.v < 0 {
			return usagef("--%s must be 0 or more, got %d", x.name, x.v)
		}
	}
	if p.fold == 1 {
		return usagef("--fold 1 would fold a root into itself: use 0 (never) or 2 or more")
	}
	if p.budget <= 0 {
		return usagef("--budget must be positive, got %d", p.budget)
	}
	return nil
}

// policy returns the compaction policy the flags say.
func (p *policyFlags) policy() compaction.Policy {
	return compaction.Policy{EveryTokens: p.everyTokens, EveryTurns: p.every, EveryEvents: p.everyEvents, Fold: p.fold, MaxRoots: p.maxRoots, Budget: p.budget}
}
