package eval

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/marker"
)

// WriteText writes rep as tables: with perSession, one row per arm of every
// session that had a compaction; then the totals, one row per arm — for
// each drop rate naive, then strata-refuse and strata-repair at each retry
// count and stickiness, which sets them side by side.
func WriteText(w io.Writer, rep *Report, perSession bool) error {
	p := rep.Policy
	fmt.Fprintf(w, "strata eval: %s, %s; L1 every %d tokens / %d turns / %d events (0 = off), fold %d",
		plural(rep.Sessions, "session"), plural(rep.Events, "event"), p.EveryTokens, p.EveryTurns, p.EveryEvents, p.Fold)
	if p.MaxRoots > 0 {
		fmt.Fprintf(w, ", max roots %d", p.MaxRoots)
	}
	m := rep.Model
	bias := m.Bias
	if bias == 0 {
		bias = 1 // compaction.Probabilistic: 0 means no bias
	}
	fmt.Fprintf(w, ", budget %d; negatives and artifacts at %s× p, pressure %s, seed %d", p.Budget, fmtRate(bias), pressureCol(m.PressureFacts), m.Seed)
	for _, c := range sortedRateClasses(m.Rates) {
		fmt.Fprintf(w, ", %s %s", c, fmtRate(m.Rates[c]))
	}
	fmt.Fprintln(w)

	if perSession {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "session\tevents\tp\tρ\tarm\tretries\tcompactions\trefused\trepaired\tfallbacks\tresumes\tlossy resumes\tfacts lost\tdivergent\tctx/raw tokens\t")
		quiet := 0
		for i := range rep.PerSession {
			s := &rep.PerSession[i]
			if !anyCompaction(s.Arms) {
				quiet++
				continue
			}
			for j := range s.Arms {
				a := &s.Arms[j]
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.Session, s.Events,
					fmtRate(a.DropRate), rhoCol(a), a.Arm, retriesCol(a),
					a.Compactions, a.Refused, a.Repaired, a.Fallbacks, a.Resumes, a.LossyResumes, a.StateLoss, a.Divergent, ratio(a))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		switch {
		case quiet == 1:
			fmt.Fprintln(w, "(1 session had no compaction under this policy and is not listed)")
		case quiet > 1:
			fmt.Fprintf(w, "(%d sessions had no compaction under this policy and are not listed)\n", quiet)
		}
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "p\tρ\tarm\tretries\tcompactions\tcommitted\trefused\trepaired\tpredicted\tunsound\tfallbacks\tresumes\tlossy resumes\tfacts lost\tdivergent\tctx/raw tokens\t")
	for i := range rep.Arms {
		a := &rep.Arms[i]
		predicted := "-"
		if a.Compactions > 0 {
			predicted = fmt.Sprintf("%.1f±%.1f", a.PredictedRefused, math.Sqrt(a.PredictedVar))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%s\t%d\t%d\t%s\t\n", fmtRate(a.DropRate), rhoCol(a), a.Arm, retriesCol(a),
			a.Compactions, a.Committed, a.Refused, a.Repaired, predicted, a.Unsound, pct(a.Fallbacks, a.Resumes), a.Resumes,
			pct(a.LossyResumes, a.Resumes), a.StateLoss, a.Divergent, ratio(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i := range rep.Arms {
		a := &rep.Arms[i]
		what := "refused attempts"
		if a.Arm == ArmNaive {
			what = "unsound markers"
		}
		fmt.Fprintf(w, "p %s ρ %s %s %s: %d %s (%s); facts lost by class: open %d, failures %d, dispositions %d, constraints %d, artifacts %d\n",
			fmtRate(a.DropRate), rhoCol(a), a.Arm, retriesCol(a), a.RefusedAttempts, what, classesCol(a.RefusalsByClass),
			a.LossByClass.Open, a.LossByClass.Failures, a.LossByClass.Dispositions, a.LossByClass.Constraints, a.LossByClass.Artifacts)
	}
	_, err := fmt.Fprintln(w, `p: the base drop rate; ρ: the stickiness of a dropped fact on a retry (- for arms that never retry);
refused: compactions still refused after the retries; repaired: those strata-repair committed with the claims from raw;
predicted: what the model predicts for refused (strata-repair: repaired; naive: unsound markers), ±1σ;
fallbacks: resumes after a compaction round served raw where a summary was due, and their share of the rounds;
ctx/raw: context tokens over the raw log's.`)
	return err
}

func anyCompaction(as []Arm) bool {
	for i := range as {
		if as[i].Compactions > 0 {
			return true
		}
	}
	return false
}

func retriesCol(a *Arm) string {
	if a.Arm == ArmNaive {
		return "-"
	}
	return fmt.Sprint(a.Retries)
}

func rhoCol(a *Arm) string {
	if a.Arm == ArmNaive || a.Retries == 0 {
		return "-"
	}
	return fmtRate(a.Stickiness)
}

func pressureCol(n float64) string {
	if n <= 0 {
		return "off"
	}
	return fmt.Sprintf("×2 at %s facts", fmtRate(n))
}

func pct(n, of int) string {
	if of == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(of))
}

func ratio(a *Arm) string {
	if a.RawTokens == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(a.ContextTokens)/float64(a.RawTokens))
}

func classesCol(m map[string]int) string {
	var parts []string
	for _, c := range marker.Classes {
		if n := m[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func fmtRate(r float64) string { return fmt.Sprintf("%g", r) }

func sortedRateClasses(m map[string]float64) []string {
	var out []string
	for _, c := range compaction.ProbabilisticClasses {
		if _, ok := m[c]; ok {
			out = append(out, c)
		}
	}
	return out
}

// plural returns "1 session", "2 sessions".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
