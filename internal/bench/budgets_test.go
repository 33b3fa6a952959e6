package bench

import (
	"testing"

	"github.com/strata-go/strata/compaction"
)

// TestMeasureSizes: the measurement the default budget was chosen by
// counts, per session, the L1 summaries of each budget — none for a
// session under the budget, never more for a larger budget, at most the
// session's tokens ÷ the budget — and resumed contexts no larger than the
// raw session's where something was compacted. It asserts no timing.
func TestMeasureSizes(t *testing.T) {
	sessions := []Session{Synth("a", 400, 1), Synth("b", 60, 2), Synth("c", 3, 3)}
	budgets := []int{200, 1000, 4000, 1 << 30}
	policies := make([]compaction.Policy, len(budgets))
	for i, b := range budgets {
		policies[i] = compaction.Policy{EveryTokens: b, Fold: compaction.DefaultFold}
	}
	m, err := MeasureSizes(t.TempDir(), sessions, policies)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tokens) != len(sessions) || len(m.Summaries) != len(budgets) || len(m.Context) != len(budgets) {
		t.Fatalf("measured %d sessions and %d/%d policies", len(m.Tokens), len(m.Summaries), len(m.Context))
	}
	for j, s := range sessions {
		if m.Tokens[j] == 0 {
			t.Errorf("%s: no tokens", s.ID)
		}
		for i, b := range budgets {
			n := m.Summaries[i][j]
			switch {
			case m.Tokens[j] < b && n != 0:
				t.Errorf("%s: %d tokens, budget %d: %d summaries", s.ID, m.Tokens[j], b, n)
			case n > m.Tokens[j]/b:
				t.Errorf("%s: %d tokens, budget %d: %d summaries, each of at least the budget", s.ID, m.Tokens[j], b, n)
			case i > 0 && n > m.Summaries[i-1][j]:
				t.Errorf("%s: %d summaries at budget %d, %d at %d", s.ID, n, b, m.Summaries[i-1][j], budgets[i-1])
			case n > 0 && m.Context[i][j] >= m.Tokens[j]:
				t.Errorf("%s: budget %d: a context of %d tokens resumed after %d summaries, the raw session holds %d", s.ID, b, m.Context[i][j], n, m.Tokens[j])
			}
		}
	}
	if m.Summaries[0][0] < 2 {
		t.Errorf("session a (%d tokens) got %d summaries at budget %d", m.Tokens[0], m.Summaries[0][0], budgets[0])
	}
	if q := Quantiles([]int{5, 1, 4, 2, 3}); q != [5]int{1, 2, 3, 4, 5} {
		t.Errorf("Quantiles = %v", q)
	}
}
