package eval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Arm names.
const (
	ArmNaive  = "naive"
	ArmStrata = "strata"
)

// ErrBadOptions is returned by Run for options it cannot run with.
var ErrBadOptions = errors.New("eval: bad options")

// Options configures Run. The zero value runs a drop rate of 0 (nothing
// dropped) under a zero policy (nothing compacted): set Policy and DropRate.
type Options struct {
	// Policy says when to compact, as compaction.Policy; a zero Budget
	// means compaction.DefaultBudget.
	Policy compaction.Policy
	// DropRate is the probability that the summarizer drops each required
	// fact; Rates overrides it per class (compaction.ProbabilisticClasses).
	DropRate float64
	Rates    map[string]float64
	// Seed selects the drops (compaction.Probabilistic.Seed).
	Seed uint64
	// Retries lists the strata arm's retry counts: one strata run per
	// value, so that the fallback-versus-retries curve can be read off. Nil
	// means {0}. The naive arm never retries: it never refuses.
	Retries []int
	// Parallel is how many runs (one arm of one session each) go at once;
	// zero means GOMAXPROCS.
	Parallel int
	// Dir is where the temporary directory of the databases is made; ""
	// means os.TempDir(). It is removed when Run returns.
	Dir string
	// CountOnly skips the resumes: only compactions, refusals and their
	// prediction are counted (no state loss, divergence, fallbacks or
	// context size). Each session is appended whole and compacted once,
	// which makes the same compactions (their boundaries are seqs and
	// turns, however events are batched) much faster. For checking the
	// refusal rate over many spans.
	CountOnly bool
	// Verify runs store.Verify on every strata database after its run and
	// makes any problem an error. (Naive databases fail Verify by design.)
	Verify bool
}

// Arm is what one arm measured: per session, or summed over sessions.
type Arm struct {
	Arm     string `json:"arm"`     // ArmNaive or ArmStrata
	Retries int    `json:"retries"` // strata: the retry count; naive: 0

	Compactions int `json:"compactions"` // compactions asked for (L1 spans and folds)
	Committed   int `json:"committed"`   // nodes and markers committed
	Refused     int `json:"refused"`     // compactions refused after every retry
	Attempts    int `json:"attempts"`    // summarizer calls
	// RefusedAttempts counts every refused attempt (the store's audit),
	// retried ones included; RefusalsByClass counts each of them once in
	// every reason class it failed. For naive, which refuses nothing, both
	// count the markers committed whose node fails validation (Unsound).
	RefusedAttempts int            `json:"refused_attempts"`
	RefusalsByClass map[string]int `json:"refusals_by_class"`
	Unsound         int            `json:"unsound"` // naive: markers committed that validation would refuse
	RequiredFacts   int            `json:"required_facts"`
	// PredictedRefused is the expected number of refused compactions (for
	// naive: of unsound markers) that independent drops predict from each
	// compaction's required facts; PredictedVar is its variance.
	PredictedRefused float64 `json:"predicted_refused"`
	PredictedVar     float64 `json:"predicted_var"`

	Resumes        int   `json:"resumes"`         // one after every compaction round
	Fallbacks      int   `json:"fallbacks"`       // resumes whose context is raw where a summary was due
	FromCheckpoint int   `json:"from_checkpoint"` // resumes store.Resume labels "checkpoint"
	LossyResumes   int   `json:"lossy_resumes"`   // resumes with state loss above zero
	StateLoss      int   `json:"state_loss"`      // facts lost, summed over resumes
	LossByClass    Loss  `json:"loss_by_class"`
	Divergent      int   `json:"divergent"`      // resumes whose sha256 differs on a repeat, after a reopen or from a backup
	ContextTokens  int64 `json:"context_tokens"` // summed over resumes
	RawTokens      int64 `json:"raw_tokens"`     // the raw log at the same points
}

func (a *Arm) add(o *Arm) {
	a.Compactions += o.Compactions
	a.Committed += o.Committed
	a.Refused += o.Refused
	a.Attempts += o.Attempts
	a.RefusedAttempts += o.RefusedAttempts
	for c, n := range o.RefusalsByClass {
		a.RefusalsByClass[c] += n
	}
	a.Unsound += o.Unsound
	a.RequiredFacts += o.RequiredFacts
	a.PredictedRefused += o.PredictedRefused
	a.PredictedVar += o.PredictedVar
	a.Resumes += o.Resumes
	a.Fallbacks += o.Fallbacks
	a.FromCheckpoint += o.FromCheckpoint
	a.LossyResumes += o.LossyResumes
	a.StateLoss += o.StateLoss
	a.LossByClass.add(o.LossByClass)
	a.Divergent += o.Divergent
	a.ContextTokens += o.ContextTokens
	a.RawTokens += o.RawTokens
}

func newArm(name string, retries int) Arm {
	return Arm{Arm: name, Retries: retries, RefusalsByClass: map[string]int{}}
}

// SessionReport is what both arms measured on one session.
type SessionReport struct {
	Session string `json:"session"`
	Events  int    `json:"events"`
	Naive   Arm    `json:"naive"`
	Strata  []Arm  `json:"strata"` // one per Options.Retries value
}

// Policy is the compaction policy as a report states it.
type Policy struct {
	EveryTurns  int `json:"every_turns"`
	EveryEvents int `json:"every_events"`
	Fold        int `json:"fold"`
	Budget      int `json:"budget"`
}

// Report is what Run measured: the totals, then each session.
type Report struct {
	Sessions int                `json:"sessions"`
	Events   int                `json:"events"`
	Policy   Policy             `json:"policy"`
	DropRate float64            `json:"drop_rate"`
	Rates    map[string]float64 `json:"rates,omitempty"`
	Seed     uint64             `json:"seed"`
	Retries  []int              `json:"retries"`

	Naive      Arm             `json:"naive"`
	Strata     []Arm           `json:"strata"` // one per Retries value
	PerSession []SessionReport `json:"per_session"`
}

// Run replays every session through both arms and returns what they
// measured (see the package documentation). Sessions and arms run
// concurrently, each in its own database; the report does not depend on
// Parallel.
func Run(ctx context.Context, sessions []Session, opts Options) (*Report, error) {
	if opts.Policy.Budget <= 0 {
		opts.Policy.Budget = compaction.DefaultBudget
	}
	if opts.Retries == nil {
		opts.Retries = []int{0}
	}
	for _, r := range opts.Retries {
		if r < 0 {
			return nil, errors.Wrapf(ErrBadOptions, "retries %d", r)
		}
	}
	p := opts.Policy
	if p.EveryTurns < 0 || p.EveryEvents < 0 || p.Fold < 0 || p.Fold == 1 {
		return nil, errors.Wrapf(ErrBadOptions, "policy every %d turns, every %d events, fold %d", p.EveryTurns, p.EveryEvents, p.Fold)
	}
	sum, err := compaction.NewProbabilistic(opts.DropRate, opts.Rates, opts.Seed)
	if err != nil {
		return nil, errmark.Mark(err, ErrBadOptions)
	}
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	dir, err := os.MkdirTemp(opts.Dir, "strata-eval-")
	if err != nil {
		return nil, errors.Wrap(err, "eval")
	}
	defer os.RemoveAll(dir)

	rep := &Report{Sessions: len(sessions), Policy: Policy{p.EveryTurns, p.EveryEvents, p.Fold, p.Budget},
		DropRate: opts.DropRate, Rates: sum.Rates, Seed: opts.Seed, Retries: slices.Clone(opts.Retries),
		PerSession: make([]SessionReport, len(sessions))}

	// One job per arm of each session: naive, then strata per retry count.
	type job struct{ session, arm int }
	arms := 1 + len(opts.Retries)
	jobs := make(chan job)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for i := range sessions {
		rep.PerSession[i] = SessionReport{Session: sessions[i].ID, Events: len(sessions[i].Events),
			Strata: make([]Arm, len(opts.Retries))}
	}
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r := &runner{s: &sessions[j.session], opts: &opts, sum: sum,
					path: filepath.Join(dir, fmt.Sprintf("s%d-a%d.db", j.session, j.arm))}
				if j.arm == 0 {
					r.arm = newArm(ArmNaive, 0)
				} else {
					r.arm = newArm(ArmStrata, opts.Retries[j.arm-1])
				}
				err := r.run(ctx)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = errors.Wrapf(err, "eval: session %q, %s arm", r.s.ID, r.arm.Arm)
					cancel()
				}
				if j.arm == 0 {
					rep.PerSession[j.session].Naive = r.arm
				} else {
					rep.PerSession[j.session].Strata[j.arm-1] = r.arm
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range sessions {
		for a := 0; a < arms; a++ {
			select {
			case jobs <- job{i, a}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rep.Naive = newArm(ArmNaive, 0)
	rep.Strata = make([]Arm, len(opts.Retries))
	for j, r := range opts.Retries {
		rep.Strata[j] = newArm(ArmStrata, r)
	}
	for i := range rep.PerSession {
		s := &rep.PerSession[i]
		rep.Events += s.Events
		rep.Naive.add(&s.Naive)
		for j := range s.Strata {
			rep.Strata[j].add(&s.Strata[j])
		}
	}
	return rep, nil
}

// clock stamps events that carry no time, so that a run's databases do not
// depend on when it ran.
func clock() time.Time { return time.Unix(1_700_000_000, 0) }

// runner replays one session through one arm.
type runner struct {
	s    *Session
	opts *Options
	sum  *compaction.Probabilistic
	path string
	arm  Arm

	db    *store.DB
	comp  *compaction.Compactor // strata
	rec   *recorder
	truth *tier.Ledger
	raw   []tier.Event // as stored: seq and turn assigned
}

func (r *runner) open() error {
	db, err := store.Open(r.path, store.Options{Create: true, NoSync: true, Clock: clock})
	if err != nil {
		return err
	}
	r.db = db
	if r.arm.Arm == ArmStrata {
		r.comp, err = compaction.NewCompactor(db, compaction.Options{Summarizer: r.rec, Policy: r.opts.Policy, Retries: r.arm.Retries})
	}
	return err
}

func (r *runner) run(ctx context.Context) (err error) {
	r.rec = &recorder{inner: r.sum, retries: r.arm.Retries, arm: &r.arm}
	r.truth = tier.NewLedger()
	r.raw = make([]tier.Event, 0, len(r.s.Events))
	if err := r.open(); err != nil {
		return err
	}
	defer func() {
		if r.db != nil {
			err = errors.CombineErrors(err, r.db.Close())
		}
	}()
	if r.opts.CountOnly {
		return r.runCountOnly(ctx)
	}
	for i := range r.s.Events {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := r.db.Append(r.s.ID, r.s.Events[i])
		if err != nil {
			return errors.Wrapf(err, "event %d", i+1)
		}
		e := r.s.Events[i]
		e.Seq, e.Turn = res.First, res.Turn
		if err := r.truth.Apply(&e); err != nil {
			return errors.NewAssertionErrorWithWrappedErrf(err, "the store accepted event %d, the ledger replay refuses it", e.Seq)
		}
		r.raw = append(r.raw, e)

		var results []compaction.Result
		if r.arm.Arm == ArmStrata {
			results, err = r.comp.Run(ctx, r.s.ID)
		} else {
			results, err = r.naiveRun(ctx)
		}
		if err != nil {
			return err
		}
		if len(results) == 0 {
			continue
		}
		var to uint64
		for _, x := range results {
			r.count(x)
			to = max(to, x.To)
		}
		if err := r.measure(to); err != nil {
			return err
		}
	}
	if r.arm.Arm == ArmStrata {
		return r.audit()
	}
	return nil
}

// runCountOnly appends the whole session, compacts as far as is due and
// counts the compactions (Options.CountOnly).
func (r *runner) runCountOnly(ctx context.Context) error {
	if _, err := r.db.Append(r.s.ID, r.s.Events...); err != nil {
		return err
	}
	var results []compaction.Result
	var err error
	if r.arm.Arm == ArmStrata {
		results, err = r.comp.Run(ctx, r.s.ID)
	} else {
		results, err = r.naiveRun(ctx)
	}
	if err != nil {
		return err
	}
	for _, x := range results {
		r.count(x)
	}
	if r.arm.Arm == ArmStrata {
		return r.audit()
	}
	return nil
}

// count counts one compaction.
func (r *runner) count(x compaction.Result) {
	r.arm.Compactions++
	r.arm.Attempts += x.Attempts
	if x.Committed() {
		r.arm.Committed++
	} else {
		r.arm.Refused++
	}
}

// measure resumes the session after a compaction round whose spans end at
// to, and counts state loss, divergence, fallbacks and context size.
func (r *runner) measure(to uint64) error {
	latest := store.Latest
	if r.arm.Arm == ArmNaive {
		latest = store.LatestUnchecked // what a scheme that trusts every summary resumes
	}
	ctx, err := r.db.Resume(r.s.ID, latest)
	if err != nil {
		return err
	}
	sum := ctx.SHA256()
	divergent := false
	check := func(c *checkpoint.Context) {
		if c.SHA256() != sum {
			divergent = true
		}
	}
	again, err := r.db.Resume(r.s.ID, latest)
	if err != nil {
		return err
	}
	check(again)

	bak := r.path + ".bak"
	f, err := os.Create(bak)
	if err != nil {
		return errors.Wrap(err, "eval: backup")
	}
	_, err = r.db.Backup(f)
	if err = errors.CombineErrors(err, f.Close()); err != nil {
		return err
	}
	defer os.Remove(bak)
	err = r.db.Close()
	r.db = nil
	if err != nil {
		return err
	}
	if err := r.open(); err != nil {
		return err
	}
	reopened, err := r.db.Resume(r.s.ID, latest)
	if err != nil {
		return err
	}
	check(reopened)
	b, err := store.Open(bak, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	fromBackup, err := b.Resume(r.s.ID, latest)
	if err = errors.CombineErrors(err, b.Close()); err != nil {
		return err
	}
	check(fromBackup)

	a := &r.arm
	a.Resumes++
	if divergent {
		a.Divergent++
	}
	if ctx.Boundary < to {
		a.Fallbacks++
	}
	if ctx.Source == checkpoint.SourceCheckpoint {
		a.FromCheckpoint++
	}
	loss, _ := StateLoss(r.truth, ctx)
	if loss.Total() > 0 {
		a.LossyResumes++
		a.StateLoss += loss.Total()
		a.LossByClass.add(loss)
	}
	raw := checkpoint.Context{Session: r.s.ID, Source: checkpoint.SourceCheckpoint, Head: ctx.Head, Events: r.raw}
	a.ContextTokens += int64(tier.EstimateTokens(string(ctx.Text())))
	a.RawTokens += int64(tier.EstimateTokens(string(raw.Text())))
	return nil
}

// audit counts the refused attempts of the strata arm from the store's
// audit, and verifies the database when asked.
func (r *runner) audit() error {
	err := r.db.View(func(s *store.Snapshot) error {
		return s.Refusals(r.s.ID, func(x store.Refusal) error {
			r.arm.RefusedAttempts++
			countClasses(r.arm.RefusalsByClass, x.Failures)
			return nil
		})
	})
	if err != nil || !r.opts.Verify {
		return err
	}
	rep, err := r.db.Verify(store.VerifyOptions{})
	if err != nil {
		return err
	}
	if len(rep.Problems) > 0 {
		return errors.Newf("eval: verify: %d problems, the first: %s", len(rep.Problems), rep.Problems[0])
	}
	return nil
}

// countClasses counts a refusal once in each class it failed.
func countClasses(m map[string]int, fs []marker.Failure) {
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.Class] {
			seen[f.Class] = true
			m[f.Class]++
		}
	}
}

// recorder passes calls to the probabilistic summarizer and adds, for each
// compaction asked for, its required facts and refusal probability to the
// arm.
type recorder struct {
	inner   *compaction.Probabilistic
	retries int
	arm     *Arm
}

// Name returns the summarizer's name.
func (r *recorder) Name() string { return r.inner.Name() }

// Summarize implements compaction.Summarizer.
func (r *recorder) Summarize(ctx context.Context, in *compaction.Input) (compaction.Output, error) {
	if in.Attempt == 0 {
		r.arm.RequiredFacts += in.Required.Count()
		p := r.inner.RefusalProbability(&in.Required, r.retries)
		r.arm.PredictedRefused += p
		r.arm.PredictedVar += p * (1 - p)
	}
	return r.inner.Summarize(ctx, in)
}

// naiveRun compacts as far as the policy makes due, as compaction.Compactor
// does — L1 spans, each followed by the folds it makes due — but commits
// every summary unchecked.
func (r *runner) naiveRun(ctx context.Context) ([]compaction.Result, error) {
	var out []compaction.Result
	p := r.opts.Policy
	for {
		plan, err := r.db.PlanSpan(r.s.ID, store.SpanPolicy{Turns: p.EveryTurns, Events: p.EveryEvents}, p.Budget)
		if errors.Is(err, store.ErrNothingToCompact) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		x, err := r.naiveCompact(ctx, plan)
		if err != nil {
			return out, err
		}
		out = append(out, x)
		for p.Fold >= 2 {
			plan, err := r.db.PlanFold(r.s.ID, p.Fold, p.Budget)
			if errors.Is(err, store.ErrNothingToCompact) {
				break
			}
			if err != nil {
				return out, err
			}
			x, err := r.naiveCompact(ctx, plan)
			if err != nil {
				return out, err
			}
			out = append(out, x)
		}
	}
}

// naiveCompact summarizes plan once and commits it unchecked, counting the
// marker as unsound when validation would have refused it.
func (r *runner) naiveCompact(ctx context.Context, plan *store.Plan) (compaction.Result, error) {
	x := compaction.Result{Session: plan.Session, Kind: plan.Kind, Depth: plan.Depth, From: plan.From, To: plan.To, Attempts: 1}
	in := &compaction.Input{Session: plan.Session, Depth: plan.Depth, From: plan.From, To: plan.To, Budget: plan.Budget,
		Events: plan.Events, Children: plan.Children, Required: plan.Required}
	out, err := r.rec.Summarize(ctx, in)
	if err != nil {
		return x, err
	}
	cr, err := r.db.CommitUnchecked(plan, store.Summary{Narrative: out.Narrative, Claims: out.Claims, Summarizer: r.rec.Name()})
	if err != nil {
		return x, err
	}
	x.Node, x.Marker, x.Checkpoint = cr.Node.ID, cr.Marker, cr.Checkpoint
	frame := marker.Frame{Version: plan.FrameVersion, RootDepth: plan.Depth}
	var ie *marker.InvalidError
	if err := marker.Validate(frame, frame, &plan.Required, plan.Depth, &out.Claims); errors.As(err, &ie) {
		r.arm.Unsound++
		r.arm.RefusedAttempts++
		countClasses(r.arm.RefusalsByClass, ie.Failures)
	}
	return x, nil
}
