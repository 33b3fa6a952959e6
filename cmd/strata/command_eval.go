package main

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/eval"
)

// evalOptions are the flags and arguments of `strata eval`.
type evalOptions struct {
	policyFlags
	dropRate   float64
	classRates string
	retries    string
	seed       uint64
	parallel   int
	dir        string
	json       bool
	perSession bool
	files      []string

	opts eval.Options // built by validate
}

// newEvalCommand returns `strata eval`.
func newEvalCommand() *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval [--every N] [--every-events M] [--fold K] [--drop-rate p] [--retries r|r1,r2,...] [--seed s] [--json] FILE...",
		Short: "Measure what validation prevents and what it costs, on recorded sessions",
		Long: `Replay each session of the JSONL files (shared/spec/events.md) twice, event by
event, in temporary databases, with a summarizer that drops each required
fact independently with probability --drop-rate (reproducibly from --seed):

  naive   every summary committed and trusted without validation, as every
          compaction scheme in the field works today;
  strata  as built: a marker only for a summary that carries the required
          claims, re-asking the summarizer from the raw span up to --retries
          times (a comma list runs strata once per value).

After every compaction it resumes the session and counts, for both: state
loss (facts the raw log implies at that point — open calls, dispositions,
active constraints, artifacts, each with its state — that the resumed
context's claims and raw events lack or contradict), divergence (a resume
whose sha256 differs on a repeat, after a reopen or from a backup),
fallbacks (resumes served raw where a summary was due), refusals per reason
class, and context tokens against the raw log's. Lines without a "session"
belong to a session named after their file.

Prints a table per session (--per-session=false to skip it) and the totals,
one line per arm and retry count; --json prints everything as JSON. The
databases are temporary and unsynced (eval measures logic, not durability).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("eval needs at least one FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	o.policyFlags.add(f)
	f.Float64Var(&o.dropRate, "drop-rate", 0.05, "the probability that the summarizer drops each required fact, in [0, 1]")
	f.StringVar(&o.classRates, "class-rate", "", "per-class drop rates overriding --drop-rate, e.g. negatives=0.1,open=0.02 (classes: "+
		strings.Join(compaction.ProbabilisticClasses, ", ")+")")
	f.StringVar(&o.retries, "retries", "0", "strata's retries after a refusal: a count, or a comma list (0,1,2,3) to run once per count")
	f.Uint64Var(&o.seed, "seed", 1, "the seed of the summarizer's drops")
	f.IntVar(&o.parallel, "parallel", 0, "runs (one arm of one session each) at once (0 = one per CPU)")
	f.StringVar(&o.dir, "dir", "", "where the temporary databases go (default $TMPDIR)")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.BoolVar(&o.perSession, "per-session", true, "print the per-session table before the totals")
	return cmd
}

// validate checks the flags and builds the eval options; its errors are bad
// usage.
func (o *evalOptions) validate() error {
	if err := o.policyFlags.validate(); err != nil {
		return err
	}
	if o.parallel < 0 {
		return usagef("--parallel must be 0 or more, got %d", o.parallel)
	}
	if o.every == 0 && o.everyEvents == 0 {
		return usagef("--every and --every-events are both 0: nothing would be compacted")
	}
	var retries []int
	seen := map[int]bool{}
	for _, s := range strings.Split(o.retries, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || r < 0 {
			return usagef("--retries: %q is not a count of 0 or more", s)
		}
		if seen[r] {
			return usagef("--retries: %d given twice", r)
		}
		seen[r] = true
		retries = append(retries, r)
	}
	var rates map[string]float64
	for _, s := range strings.Split(o.classRates, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		class, v, ok := strings.Cut(s, "=")
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil {
			return usagef("--class-rate: %q is not class=rate", s)
		}
		if rates == nil {
			rates = map[string]float64{}
		}
		rates[strings.TrimSpace(class)] = r
	}
	if _, err := compaction.NewProbabilistic(o.dropRate, rates, o.seed); err != nil {
		return &usageError{err: errors.Wrap(err, "--drop-rate/--class-rate")}
	}
	o.opts = eval.Options{
		Policy:   o.policy(),
		DropRate: o.dropRate, Rates: rates, Seed: o.seed, Retries: retries, Parallel: o.parallel, Dir: o.dir,
	}
	return nil
}

// run reads the files, runs both arms and prints the report.
func (o *evalOptions) run(ctx context.Context, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sessions, err := eval.ReadFiles(o.files...)
	if err != nil {
		return err
	}
	rep, err := eval.Run(ctx, sessions, o.opts)
	if err != nil {
		return err
	}
	if o.json {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(b, '\n'))
		return err
	}
	return eval.WriteText(out, rep, o.perSession)
}
