package main

import (
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/spf13/pflag"

	"github.com/strata-go/strata/compaction"
)

// parsePolicy parses args as the policy flags of a command.
func parsePolicy(t *testing.T, args ...string) (*policyFlags, error) {
	t.Helper()
	p := &policyFlags{}
	f := pflag.NewFlagSet("x", pflag.ContinueOnError)
	p.add(f)
	if err := f.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return p, p.validate()
}

// TestPolicyFlags states the policy by window and share (the default:
// compaction.DefaultPolicy), or by hand when an L1 rule is given — then as
// those flags say, with no bound on the frame unless --max-roots — and
// refuses the two mixed, a share out of (0, 1], a window too small for the
// frame, and an unbounded frame under a window.
func TestPolicyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want compaction.Policy
	}{
		{nil, compaction.DefaultPolicy},
		{[]string{"--window", "1000000", "--share", "0.5"}, compaction.Policy{EveryTokens: 500_000 - 4*2048, Fold: 4, MaxRoots: 4, Budget: 2048}},
		{[]string{"--window", "32768", "--share", "0.5", "--max-roots", "2", "--budget", "1024", "--fold", "3"}, compaction.Policy{EveryTokens: 16384 - 2*1024, Fold: 3, MaxRoots: 2, Budget: 1024}},
		{[]string{"--every-tokens", "500"}, compaction.Policy{EveryTokens: 500, Fold: 4, Budget: 2048}},
		{[]string{"--every-events", "40", "--every", "3", "--max-roots", "2"}, compaction.Policy{EveryTurns: 3, EveryEvents: 40, Fold: 4, MaxRoots: 2, Budget: 2048}},
	} {
		p, err := parsePolicy(t, c.args...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if got := p.policy(); got != c.want {
			t.Errorf("%v: policy %+v, want %+v", c.args, got, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--window", "100000", "--every-tokens", "500"}, "give one or the other"},
		{[]string{"--share", "0.5", "--every", "2"}, "give one or the other"},
		{[]string{"--share", "1.5"}, "--share must be in (0, 1], got 1.5"},
		{[]string{"--share", "0"}, "--share must be in (0, 1], got 0"},
		{[]string{"--window", "0"}, "--window must be positive"},
		{[]string{"--window", "32768"}, "leave 0 for the raw tail"},
		{[]string{"--max-roots", "0"}, "--max-roots 0 leaves the frame unbounded"},
	} {
		_, err := parsePolicy(t, c.args...)
		var u *usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
}
