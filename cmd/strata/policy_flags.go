package main

import (
	"github.com/spf13/pflag"

	"github.com/strata-go/strata/compaction"
)

// policyFlags are the compaction policy flags that replay, import and eval
// share. The policy is stated by the model's window (--window, --share:
// compaction.Window) unless an L1 rule is given by hand (--every-tokens,
// --every, --every-events), which replaces it; --fold, --max-roots and
// --budget apply to either.
type policyFlags struct {
	window      int
	share       float64
	everyTokens int
	every       int
	everyEvents int
	fold        int
	maxRoots    int
	budget      int

	fs *pflag.FlagSet
}

// add defines the policy flags (policyFlagNames) on f.
func (p *policyFlags) add(f *pflag.FlagSet) {
	p.fs = f
	f.IntVar(&p.window, "window", compaction.DefaultWindow, "the model's context window, in tokens: the policy keeps a resumed context within --share of it")
	f.Float64Var(&p.share, "share", compaction.DefaultShare, "the share of --window a resumed context may take, in (0, 1]: an L1 node when the raw tail reaches it less the frame's --max-roots summaries of --budget tokens")
	f.IntVar(&p.everyTokens, "every-tokens", 0, "by hand, instead of --window/--share: make an L1 node as soon as the uncompacted tail reaches N tokens, as a resumed context carries it (bytes/4), even mid-turn")
	f.IntVar(&p.every, "every", 0, "by hand, instead of --window/--share: make an L1 node every N complete turns")
	f.IntVar(&p.everyEvents, "every-events", 0, "by hand, instead of --window/--share: make an L1 node as soon as the uncompacted tail holds M events, even mid-turn")
	f.IntVar(&p.fold, "fold", compaction.DefaultFold, "fold K consecutive roots of depth d into a depth d+1 node (0 = never)")
	f.IntVar(&p.maxRoots, "max-roots", 0, "keep at most R roots: fold the first two into a digest while there are more (default 4 under --window/--share; by hand, 0 = no bound)")
	f.IntVar(&p.budget, "budget", compaction.DefaultBudget, "the token budget of each summary node")
}

// policyFlagNames are the flags add defines.
var policyFlagNames = []string{"window", "share", "every-tokens", "every", "every-events", "fold", "max-roots", "budget"}

// byHand reports whether an L1 rule was given by hand.
func (p *policyFlags) byHand() bool {
	return p.fs.Changed("every-tokens") || p.fs.Changed("every") || p.fs.Changed("every-events")
}

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
	if p.byHand() {
		if p.fs.Changed("window") || p.fs.Changed("share") {
			return usagef("--window/--share state the policy, --every-tokens, --every and --every-events state it by hand: give one or the other")
		}
		return nil
	}
	if p.fs.Changed("max-roots") && p.maxRoots == 0 {
		return usagef("--max-roots 0 leaves the frame unbounded, so no share of --window holds: give 1 or more, or state the policy by hand (--every-tokens)")
	}
	if p.window <= 0 {
		return usagef("--window must be positive, got %d", p.window)
	}
	if !(p.share > 0 && p.share <= 1) {
		return usagef("--share must be in (0, 1], got %v: the share of --window a resumed context may take (0.25 is a quarter)", p.share)
	}
	if _, err := p.windowPolicy(); err != nil {
		return &usageError{err: err}
	}
	return nil
}

func (p *policyFlags) windowPolicy() (compaction.Policy, error) {
	pol, err := compaction.Window{Tokens: p.window, Share: p.share, Roots: p.maxRoots, Budget: p.budget}.Policy()
	pol.Fold = p.fold
	return pol, err
}

// policy returns the compaction policy the flags say (after validate).
func (p *policyFlags) policy() compaction.Policy {
	if p.byHand() {
		return compaction.Policy{EveryTokens: p.everyTokens, EveryTurns: p.every, EveryEvents: p.everyEvents, Fold: p.fold, MaxRoots: p.maxRoots, Budget: p.budget}
	}
	pol, _ := p.windowPolicy()
	return pol
}
