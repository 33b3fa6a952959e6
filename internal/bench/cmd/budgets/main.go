// Command budgets measures, on the project's development data, how many L1
// summaries a session gets under a size policy (compaction.Policy's
// EveryTokens) at each candidate budget — the default policy's,
// compaction.DefaultEveryTokens, among them (docs/performance.md, "The
// default policy"). It replays the
// recorded sessions (../shared/data/real) and the Claude Code transcripts
// (../shared/data/claude-code, imported as `strata import --format
// claude-code` does) with the extractive summarizer and prints markdown
// tables: per budget and kind of session, the distribution of summaries
// per session.
//
//	go run ./internal/bench/cmd/budgets [-budgets 1000,2000,...]
//
// It exits with a message when the data is absent.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/bench"
)

var flagBudgets = flag.String("budgets", "500,1000,2000,3000,4000,6000,8000,16000,32000", "the candidate budgets, in tokens, comma-separated")

func main() {
	flag.Parse()
	var budgets []int
	for _, f := range strings.Split(*flagBudgets, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || b <= 0 {
			fail(fmt.Errorf("-budgets: %q is not a positive number", f))
		}
		budgets = append(budgets, b)
	}
	real, cc := bench.RealDir(), bench.ClaudeCodeDir()
	if real == "" || cc == "" {
		fail(fmt.Errorf("the development data is absent (../shared/data/real: %q, ../shared/data/claude-code: %q)", real, cc))
	}
	sessions, err := bench.LoadReal(real)
	check(err)
	imported, err := bench.LoadClaudeCode(cc)
	check(err)
	sessions = append(sessions, imported...)

	policies := make([]compaction.Policy, len(budgets))
	for i, b := range budgets {
		policies[i] = compaction.Policy{EveryTokens: b, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}
	}
	dir, err := os.MkdirTemp("", "strata-budgets-")
	check(err)
	defer os.RemoveAll(dir)
	m, err := bench.MeasureSizes(dir, sessions, policies)
	check(err)

	groups := []struct {
		name string
		in   func(id string) bool
	}{
		{"all", func(string) bool { return true }},
		{"coding", func(id string) bool { return bench.Kind(id) == "coding" }},
		{"support", func(id string) bool { return bench.Kind(id) == "support" }},
		{"claude code", func(id string) bool { return strings.HasPrefix(id, "claude_") }},
	}
	pick := func(xs []int, in func(string) bool) []int {
		var out []int
		for i, s := range sessions {
			if in(s.ID) {
				out = append(out, xs[i])
			}
		}
		return out
	}
	fmt.Printf("%d sessions, %d events (%s, %s)\n\n", len(sessions), bench.Count(sessions), real, cc)
	fmt.Println("Tokens per session, as a resumed context carries it raw:")
	fmt.Println()
	fmt.Println("| sessions | n | min | p25 | median | p75 | max |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, g := range groups {
		xs := pick(m.Tokens, g.in)
		q := bench.Quantiles(xs)
		fmt.Printf("| %s | %d | %d | %d | %d | %d | %d |\n", g.name, len(xs), q[0], q[1], q[2], q[3], q[4])
	}
	fmt.Println()
	fmt.Println("L1 summaries per session, by budget (EveryTokens), folds of 4:")
	fmt.Println()
	fmt.Println("| budget | sessions | none | min | p25 | median | p75 | max | resumed context ÷ raw, median |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, b := range budgets {
		for _, g := range groups {
			xs := pick(m.Summaries[i], g.in)
			none := 0
			for _, x := range xs {
				if x == 0 {
					none++
				}
			}
			q := bench.Quantiles(xs)
			var ratios []float64
			for j, s := range sessions {
				if g.in(s.ID) && m.Tokens[j] > 0 {
					ratios = append(ratios, float64(m.Context[i][j])/float64(m.Tokens[j]))
				}
			}
			slices.Sort(ratios)
			ratio := 0.0
			if len(ratios) > 0 {
				ratio = ratios[len(ratios)/2]
			}
			fmt.Printf("| %d | %s | %d | %d | %d | **%d** | %d | %d | %.2f |\n", b, g.name, none, q[0], q[1], q[2], q[3], q[4], ratio)
		}
	}
}

func check(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "budgets:", err)
	os.Exit(1)
}
