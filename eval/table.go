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
// session that had a compaction; then the totals, one row per arm — naive,
// then strata at each retry count, which is the fallback-versus-retries
// curve.
func WriteText(w io.Writer, rep *Report, perSession bool) error {
	p := rep.Policy
	fmt.Fprintf(w, "strata eval: %d sessions, %d events; L1 every %d turns / %d events (0 = off), fold %d, budget %d; drop rate %s",
		rep.Sessions, rep.Events, p.EveryTurns, p.EveryEvents, p.Fold, p.Budget, fmtRate(rep.DropRate))
	for _, c := range sortedRateClasses(rep.Rates) {
		fmt.Fprintf(w, ", %s %s", c, fmtRate(rep.Rates[c]))
	}
	fmt.Fprintf(w, "; seed %d\n", rep.Seed)

	if perSession {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "session\tevents\tarm\tretries\tcompactions\trefused\tfallbacks\tresumes\tlossy resumes\tfacts lost\tdivergent\tctx/raw tokens\t")
		quiet := 0
		for i := range rep.PerSession {
			s := &rep.PerSession[i]
			if s.Naive.Compactions == 0 && !anyCompaction(s.Strata) {
				quiet++
				continue
			}
			row := func(name string, a *Arm) {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", name, s.Events, a.Arm, retriesCol(a),
					a.Compactions, a.Refused, a.Fallbacks, a.Resumes, a.LossyResumes, a.StateLoss, a.Divergent, ratio(a))
			}
			row(s.Session, &s.Naive)
			for j := range s.Strata {
				row(s.Session, &s.Strata[j])
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if quiet > 0 {
			fmt.Fprintf(w, "(%d sessions had no compaction under this policy and are not listed)\n", quiet)
		}
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "arm\tretries\tcompactions\tcommitted\trefused\tpredicted\tunsound\tfallbacks\tresumes\tlossy resumes\tfacts lost\tdivergent\tctx/raw tokens\t")
	rows := append([]Arm{rep.Naive}, rep.Strata...)
	for i := range rows {
		a := &rows[i]
		predicted := "-"
		if a.Compactions > 0 {
			predicted = fmt.Sprintf("%.1f±%.1f", a.PredictedRefused, math.Sqrt(a.PredictedVar))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%s\t%d\t%d\t%s\t\n", a.Arm, retriesCol(a),
			a.Compactions, a.Committed, a.Refused, predicted, a.Unsound, pct(a.Fallbacks, a.Resumes), a.Resumes,
			pct(a.LossyResumes, a.Resumes), a.StateLoss, a.Divergent, ratio(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i := range rows {
		a := &rows[i]
		what := "refused attempts"
		if a.Arm == ArmNaive {
			what = "unsound markers"
		}
		fmt.Fprintf(w, "%s %s: %d %s (%s); facts lost by class: open %d, dispositions %d, constraints %d, artifacts %d\n",
			a.Arm, retriesCol(a), a.RefusedAttempts, what, classesCol(a.RefusalsByClass),
			a.LossByClass.Open, a.LossByClass.Dispositions, a.LossByClass.Constraints, a.LossByClass.Artifacts)
	}
	_, err := fmt.Fprintln(w, `predicted: refused compactions (naive: unsound markers) that independent drops predict, ±1σ;
fallbacks: resumes after a compaction served raw where a summary was due; ctx/raw: context tokens over the raw log's.`)
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
