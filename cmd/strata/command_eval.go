package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
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
	dropRates     string
	classRates    string
	bias          float64
	stickiness    string
	stickinessSet bool // --stickiness was given
	pressure      float64
	retries       string
	repair        bool
	grid          bool
	seed          uint64
	parallel      int
	dir           string
	json          bool
	perSession    bool
	files         []string

	opts eval.Options // built by validate
}

// The grid --grid runs: the figures docs/eval.md shows.
const (
	gridDropRates  = "0.02,0.05,0.1"
	gridStickiness = "0,0.7"
	gridRetries    = "0,3"
)

// newEvalCommand returns `strata eval`.
func newEvalCommand() *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval [--window N] [--share F] [--every-tokens N] [--every N] [--every-events M] [--fold K] [--max-roots R] [--drop-rate p,...] [--stickiness ρ,...] [--retries r,...] [--grid] [--json] FILE...",
		Short: "Measure what validation prevents and what it costs, on recorded sessions",
		Long: `Replay each session of the JSONL files (docs/events.md) event by event,
in temporary databases, through three arms, with a summarizer that forgets
like a model (reproducibly from --seed):

  naive          every summary committed and trusted without validation, as
                 every compaction scheme in the field works today;
  strata-refuse  as built: a marker only for a summary that carries the
                 required claims, re-asking the summarizer from the raw span
                 up to --retries times; still refused, the agent resumes from
                 the raw checkpoint;
  strata-repair  the same, then the summarizer's narrative committed with the
                 claims computed from the raw span (--repair=false skips it).

The summarizer drops each required fact with probability p (--drop-rate),
negatives and artifacts at --bias times p; under pressure: a span requiring
n facts has every rate times (1 + n/--pressure), capped at 1. On a retry it
carries what the store did not name missing, and drops a missing fact again
with probability ρ + (1−ρ)·rate (--stickiness ρ: the chance that a drop
sticks). --drop-rate, --stickiness and --retries take comma lists: every
combination runs, side by side, on the same sessions (an arm with no retry
does not depend on ρ and runs once per p). --grid runs the documented grid:
--drop-rate ` + gridDropRates + ` --stickiness ` + gridStickiness + ` --retries ` + gridRetries + `.

After every compaction round it resumes the session and counts, for every
arm: state loss (facts the raw log implies at that point — open calls,
dispositions, active constraints, artifacts, each with its state — that the
resumed context's claims and raw events lack or contradict), divergence (a
resume whose sha256 differs on a repeat, after a reopen or from a backup),
fallbacks (resumes served raw where a summary was due), refusals and
repairs, refusals per reason class, and context tokens against the raw
log's. Lines without a "session" belong to a session named after their file.

Prints a table per session (--per-session=false to skip it) and the totals,
one line per arm; --json prints everything as JSON. On a terminal, stderr
shows the runs done. The databases are temporary and unsynced (eval
measures logic, not durability).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("eval needs at least one FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			if o.grid {
				for _, name := range []string{"drop-rate", "stickiness", "retries"} {
					if cmd.Flags().Changed(name) {
						return usagef("--grid sets --%s: give one or the other", name)
					}
				}
				o.dropRates, o.stickiness, o.retries = gridDropRates, gridStickiness, gridRetries
			}
			o.stickinessSet = cmd.Flags().Changed("stickiness")
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.policyFlags.add(f)
	f.StringVar(&o.dropRates, "drop-rate", "0.05", "the base probability that the summarizer drops each required fact, in [0, 1]; a comma list runs each")
	f.StringVar(&o.classRates, "class-rate", "", "per-class drop rates replacing --drop-rate and --bias for a class, e.g. negatives=0.1,open=0.02 (classes: "+
		strings.Join(compaction.ProbabilisticClasses, ", ")+")")
	f.Float64Var(&o.bias, "bias", compaction.DefaultBias, "negatives and artifacts are dropped at this multiple of --drop-rate (1 = no bias)")
	f.Float64Var(&o.pressure, "pressure", compaction.DefaultPressureFacts, "a span requiring this many facts has its drop rates doubled, linearly in the facts (0 = no pressure)")
	f.StringVar(&o.stickiness, "stickiness", fmt.Sprint(compaction.DefaultStickiness), "ρ: the chance that a fact dropped stays dropped on a retry, else it is drawn afresh at its rate (0 = always afresh); a comma list runs each")
	f.StringVar(&o.retries, "retries", "0", "the strata arms' retries after a refusal: a count, or a comma list (0,1,2,3) to run once per count")
	f.BoolVar(&o.repair, "repair", true, "run the strata-repair arm beside strata-refuse")
	f.BoolVar(&o.grid, "grid", false, "run --drop-rate "+gridDropRates+" --stickiness "+gridStickiness+" --retries "+gridRetries+", the grid docs/eval.md shows")
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
	if pol := o.policy(); pol.EveryTokens == 0 && pol.EveryTurns == 0 && pol.EveryEvents == 0 {
		return usagef("--every-tokens, --every and --every-events are all 0: nothing would be compacted")
	}
	retries, err := parseList("retries", o.retries, func(s string) (int, bool) {
		r, err := strconv.Atoi(s)
		return r, err == nil && r >= 0
	}, "a count of 0 or more")
	if err != nil {
		return err
	}
	probability := func(s string) (float64, bool) {
		r, err := strconv.ParseFloat(s, 64)
		return r, err == nil && r >= 0 && r <= 1
	}
	rates, err := parseList("drop-rate", o.dropRates, probability, "a probability in [0, 1]")
	if err != nil {
		return err
	}
	rhos, err := parseList("stickiness", o.stickiness, probability, "a probability in [0, 1]")
	if err != nil {
		return err
	}
	if o.stickinessSet && !slices.ContainsFunc(retries, func(r int) bool { return r > 0 }) {
		return usagef("--stickiness applies only to retries: give --retries 1 or more")
	}
	var classRates map[string]float64
	for _, s := range strings.Split(o.classRates, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		class, v, ok := strings.Cut(s, "=")
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil {
			return usagef("--class-rate: %q is not class=rate", s)
		}
		if classRates == nil {
			classRates = map[string]float64{}
		}
		classRates[strings.TrimSpace(class)] = r
	}
	model := compaction.Probabilistic{Rate: rates[0], Rates: classRates, Bias: o.bias, Stickiness: rhos[0],
		PressureFacts: o.pressure, Seed: o.seed}
	if _, err := compaction.NewProbabilistic(model); err != nil {
		return &usageError{err: errors.Wrap(err, "--class-rate/--bias/--pressure")}
	}
	o.opts = eval.Options{
		Policy: o.policy(), Model: model, DropRates: rates, Stickiness: rhos, Retries: retries, Repair: o.repair,
		Parallel: o.parallel, Dir: o.dir,
	}
	return nil
}

// parseList parses the comma list of flag name, each value by parse; a bad
// value or one given twice is bad usage.
func parseList[T comparable](name, list string, parse func(string) (T, bool), want string) ([]T, error) {
	var out []T
	for _, s := range strings.Split(list, ",") {
		v, ok := parse(strings.TrimSpace(s))
		if !ok {
			return nil, usagef("--%s: %q is not %s", name, s, want)
		}
		if slices.Contains(out, v) {
			return nil, usagef("--%s: %v given twice", name, v)
		}
		out = append(out, v)
	}
	return out, nil
}

// run reads the files, runs the arms and prints the report; on a terminal,
// errOut shows the runs done.
func (o *evalOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sessions, err := eval.ReadFiles(o.files...)
	if err != nil {
		return err
	}
	prog := newProgress(errOut, "eval", "runs", 0)
	prog.setNote(plural(len(sessions), "session"))
	opts := o.opts
	if prog != nil {
		opts.Progress = func(done, total int) { prog.set(int64(done), int64(total)) }
	}
	rep, err := eval.Run(ctx, sessions, opts)
	prog.finish()
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
