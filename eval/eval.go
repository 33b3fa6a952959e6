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

	// The evaluation's databases are bbolt files it makes.
	_ "github.com/strata-go/strata/backend/boltfile"
)

// Arm names.
const (
	// ArmNaive commits every summary unchecked, as compaction schemes in
	// the field do.
	ArmNaive = "naive"
	// ArmRefuse is strata as built: a refused summary stays refused after
	// the retries, and resume falls back to the raw checkpoint.
	ArmRefuse = "strata-refuse"
	// ArmRepair is strata with compaction.Options.Repair: after the last
	// refused retry the claims computed from raw are committed with the
	// summarizer's narrative.
	ArmRepair = "strata-repair"
)

// ErrBadOptions is returned by Run for options it cannot run with.
var ErrBadOptions = errors.New("eval: bad options")

// Options configures Run. The zero value runs a drop rate of 0 (nothing
// dropped) under a zero policy (nothing compacted): set Policy and
// DropRates.
type Options struct {
	// Policy says when to compact, as compaction.Policy; a zero Budget
	// means compaction.DefaultBudget.
	Policy compaction.Policy
	// Model is the summarizer's forgetting model. Its Rate and Stickiness
	// are replaced by each cell's of the grid (DropRates × Stickiness);
	// its Rates, Bias, PressureFacts and Seed hold in every cell.
	Model compaction.Probabilistic
	// DropRates lists the base drop rates p to run (nil: {Model.Rate}), and
	// Stickiness the ρ of the retries (nil: {Model.Stickiness}).
	DropRates  []float64
	Stickiness []float64
	// Retries lists the strata arms' retry counts: one run of each strata
	// arm per value. Nil means {0}. The naive arm never retries: it never
	// refuses. An arm with no retry does not depend on ρ and runs once per p.
	Retries []int
	// Repair adds the strata-repair arm beside every strata-refuse arm.
	Repair bool
	// Parallel is how many runs (one arm of one session each) go at once;
	// zero means GOMAXPROCS.
	Parallel int
	// Dir is where the temporary directory of the databases is made; ""
	// means os.TempDir(). It is removed when Run returns.
	Dir string
	// CountOnly skips the resumes: only compactions, refusals and their
	// prediction are counted (no state loss, divergence, fallbacks or
	// context size). Each session is appended whole (in calls of at most
	// store.MaxAppendEvents) and compacted once, which makes the same
	// compactions (their boundaries are seqs and turns, however events are
	// batched) much faster. For checking the refusal rate over many spans.
	CountOnly bool
	// Verify runs store.Verify on every strata database after its run and
	// makes any problem an error. (Naive databases fail Verify by design.)
	Verify bool
	// Progress, when not nil, is called after each run ends with the runs
	// done and their total, from one goroutine at a time.
	Progress func(done, total int)
}

// Arm is what one arm measured: per session, or summed over sessions.
type Arm struct {
	Arm      string  `json:"arm"`       // ArmNaive, ArmRefuse or ArmRepair
	DropRate float64 `json:"drop_rate"` // the base drop rate p
	// Stickiness is the ρ the arm's retries ran with; an arm that never
	// retries (naive, retries 0) does not depend on it and carries 0.
	Stickiness float64 `json:"stickiness"`
	Retries    int     `json:"retries"` // strata: the retry count; naive: 0

	Compactions int `json:"compactions"` // compactions asked for (L1 spans and folds)
	Committed   int `json:"committed"`   // nodes and markers committed, repaired ones included
	Refused     int `json:"refused"`     // compactions refused after every retry (and not repaired)
	Repaired    int `json:"repaired"`    // strata-repair: compactions committed by the repair
	Attempts    int `json:"attempts"`    // summarizer calls
	// RefusedAttempts counts every refused attempt (the store's audit),
	// retried and repaired ones included; RefusalsByClass counts each of
	// them once in every reason class it failed. For naive, which refuses
	// nothing, both count the markers committed whose node fails validation
	// (Unsound).
	RefusedAttempts int            `json:"refused_attempts"`
	RefusalsByClass map[string]int `json:"refusals_by_class"`
	Unsound         int            `json:"unsound"` // naive: markers committed that validation would refuse
	RequiredFacts   int            `json:"required_facts"`
	// PredictedRefused is the expected number of compactions refused after
	// the retries (strata-repair: repaired; naive: unsound markers) that
	// the model predicts from each compaction's required facts
	// (compaction.Probabilistic.RefusalProbability); PredictedVar is its
	// variance.
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
	a.Repaired += o.Repaired
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

// empty returns an Arm with a's name and parameters and nothing counted.
func (a *Arm) empty() Arm {
	return Arm{Arm: a.Arm, DropRate: a.DropRate, Stickiness: a.Stickiness, Retries: a.Retries, RefusalsByClass: map[string]int{}}
}

// Is reports whether a is the arm called name at drop rate p, stickiness
// rho and retries retries (rho is not compared for an arm that does not
// retry).
func (a *Arm) Is(name string, p, rho float64, retries int) bool {
	return a.Arm == name && a.DropRate == p && a.Retries == retries && (retries == 0 || a.Arm == ArmNaive || a.Stickiness == rho)
}

// SessionReport is what the arms measured on one session, in the order of
// Report.Arms.
type SessionReport struct {
	Session string `json:"session"`
	Events  int    `json:"events"`
	Arms    []Arm  `json:"arms"`
}

// Policy is the compaction policy as a report states it.
type Policy struct {
	EveryTokens int `json:"every_tokens"`
	EveryTurns  int `json:"every_turns"`
	EveryEvents int `json:"every_events"`
	Fold        int `json:"fold"`
	MaxRoots    int `json:"max_roots,omitempty"`
	Budget      int `json:"budget"`
}

// Model is the forgetting model as a report states it: what holds in every
// cell of the grid.
type Model struct {
	Rates         map[string]float64 `json:"rates,omitempty"`
	Bias          float64            `json:"bias"`
	PressureFacts float64            `json:"pressure_facts"`
	Seed          uint64             `json:"seed"`
}

// Report is what Run measured: the totals, one per arm, then each session.
type Report struct {
	Sessions   int       `json:"sessions"`
	Events     int       `json:"events"`
	Policy     Policy    `json:"policy"`
	Model      Model     `json:"model"`
	DropRates  []float64 `json:"drop_rates"`
	Stickiness []float64 `json:"stickiness"`
	Retries    []int     `json:"retries"`
	Repair     bool      `json:"repair"`

	// Arms lists the totals of every arm run: for each drop rate, naive,
	// then for each retry count the strata-refuse and strata-repair arms —
	// once for no retry, else once per stickiness.
	Arms       []Arm           `json:"arms"`
	PerSession []SessionReport `json:"per_session"`
}

// Find returns the arm of r that Arm.Is, or nil.
func (r *Report) Find(name string, p, rho float64, retries int) *Arm {
	for i := range r.Arms {
		if r.Arms[i].Is(name, p, rho, retries) {
			return &r.Arms[i]
		}
	}
	return nil
}

// armSpec is one arm to run: its parameters and its summarizer.
type armSpec struct {
	arm Arm // parameters only
	sum *compaction.Probabilistic
}

// arms lists the arms opts asks for, in Report.Arms order.
func arms(opts *Options) ([]armSpec, error) {
	var out []armSpec
	for _, p := range opts.DropRates {
		model := func(rho float64) (*compaction.Probabilistic, error) {
			m := opts.Model
			m.Rate, m.Stickiness = p, rho
			s, err := compaction.NewProbabilistic(m)
			return s, errmark.Mark(err, ErrBadOptions)
		}
		sum, err := model(0)
		if err != nil {
			return nil, err
		}
		out = append(out, armSpec{Arm{Arm: ArmNaive, DropRate: p}, sum})
		for _, r := range opts.Retries {
			rhos := opts.Stickiness
			if r == 0 {
				rhos = []float64{0}
			}
			for _, rho := range rhos {
				sum, err := model(rho)
				if err != nil {
					return nil, err
				}
				names := []string{ArmRefuse}
				if opts.Repair {
					names = append(names, ArmRepair)
				}
				for _, name := range names {
					out = append(out, armSpec{Arm{Arm: name, DropRate: p, Stickiness: rho, Retries: r}, sum})
				}
			}
		}
	}
	return out, nil
}

// Run replays every session through every arm and returns what they
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
	if opts.DropRates == nil {
		opts.DropRates = []float64{opts.Model.Rate}
	}
	if opts.Stickiness == nil {
		opts.Stickiness = []float64{opts.Model.Stickiness}
	}
	for _, r := range opts.Retries {
		if r < 0 {
			return nil, errors.Wrapf(ErrBadOptions, "retries %d", r)
		}
	}
	for _, l := range []struct {
		name string
		n    int
		dup  bool
	}{
		{"retries", len(opts.Retries), hasDup(opts.Retries)},
		{"drop rates", len(opts.DropRates), hasDup(opts.DropRates)},
		{"stickiness", len(opts.Stickiness), hasDup(opts.Stickiness)},
	} {
		if l.n == 0 || l.dup {
			return nil, errors.Wrapf(ErrBadOptions, "%s: none, or one given twice", l.name)
		}
	}
	p := opts.Policy
	if p.EveryTokens < 0 || p.EveryTurns < 0 || p.EveryEvents < 0 || p.Fold < 0 || p.Fold == 1 || p.MaxRoots < 0 {
		return nil, errors.Wrapf(ErrBadOptions, "policy every %d tokens, every %d turns, every %d events, fold %d, max roots %d",
			p.EveryTokens, p.EveryTurns, p.EveryEvents, p.Fold, p.MaxRoots)
	}
	specs, err := arms(&opts)
	if err != nil {
		return nil, err
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

	rep := &Report{Sessions: len(sessions), Policy: Policy{p.EveryTokens, p.EveryTurns, p.EveryEvents, p.Fold, p.MaxRoots, p.Budget},
		Model:     Model{Rates: specs[0].sum.Rates, Bias: opts.Model.Bias, PressureFacts: opts.Model.PressureFacts, Seed: opts.Model.Seed},
		DropRates: slices.Clone(opts.DropRates), Stickiness: slices.Clone(opts.Stickiness), Retries: slices.Clone(opts.Retries),
		Repair: opts.Repair, PerSession: make([]SessionReport, len(sessions))}

	// One job per arm of each session.
	type job struct{ session, arm int }
	jobs := make(chan job)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		done     int
	)
	total := len(sessions) * len(specs)
	for i := range sessions {
		rep.PerSession[i] = SessionReport{Session: sessions[i].ID, Events: len(sessions[i].Events), Arms: make([]Arm, len(specs))}
	}
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				spec := &specs[j.arm]
				r := &runner{s: &sessions[j.session], opts: &opts, sum: spec.sum, arm: spec.arm.empty(),
					path: filepath.Join(dir, fmt.Sprintf("s%d-a%d.db", j.session, j.arm))}
				err := r.run(ctx)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = errors.Wrapf(err, "eval: session %q, %s arm", r.s.ID, r.arm.Arm)
					cancel()
				}
				rep.PerSession[j.session].Arms[j.arm] = r.arm
				done++
				if opts.Progress != nil && err == nil {
					opts.Progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range sessions {
		for a := range specs {
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

	rep.Arms = make([]Arm, len(specs))
	for j := range specs {
		rep.Arms[j] = specs[j].arm.empty()
	}
	for i := range rep.PerSession {
		s := &rep.PerSession[i]
		rep.Events += s.Events
		for j := range s.Arms {
			rep.Arms[j].add(&s.Arms[j])
		}
	}
	return rep, nil
}

func hasDup[T comparable](s []T) bool {
	seen := map[T]bool{}
	for _, x := range s {
		if seen[x] {
			return true
		}
		seen[x] = true
	}
	return false
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
	comp  *compaction.Compactor // strata arms
	rec   *recorder
	truth *Truth
	raw   []tier.Event // as stored: seq and turn assigned
}

func (r *runner) open() error {
	db, err := store.Open(r.path, store.Options{Create: true, NoSync: true, Clock: clock})
	if err != nil {
		return err
	}
	r.db = db
	if r.arm.Arm != ArmNaive {
		r.comp, err = compaction.NewCompactor(db, compaction.Options{Summarizer: r.rec, Policy: r.opts.Policy,
			Retries: r.arm.Retries, Repair: r.arm.Arm == ArmRepair})
	}
	return err
}

func (r *runner) run(ctx context.Context) (err error) {
	r.rec = &recorder{inner: r.sum, retries: r.arm.Retries, arm: &r.arm}
	r.truth = NewTruth()
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
		if r.comp != nil {
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
	if r.comp != nil {
		return r.audit()
	}
	return nil
}

// runCountOnly appends the whole session, compacts as far as is due and
// counts the compactions (Options.CountOnly).
func (r *runner) runCountOnly(ctx context.Context) error {
	if err := appendAll(r.db, r.s.ID, r.s.Events); err != nil {
		return err
	}
	var results []compaction.Result
	var err error
	if r.comp != nil {
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
	if r.comp != nil {
		return r.audit()
	}
	return nil
}

// appendAll appends events to session in calls of at most
// store.MaxAppendEvents, each ending between two source records: the
// events of one ref go to the store in one call.
func appendAll(db *store.DB, session string, events []tier.Event) error {
	for len(events) > 0 {
		n := min(len(events), store.MaxAppendEvents)
		for n < len(events) && n > 1 && events[n].Ref != "" && events[n].Ref == events[n-1].Ref {
			n--
		}
		if _, err := db.Append(session, events[:n]...); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}

// count counts one compaction.
func (r *runner) count(x compaction.Result) {
	r.arm.Compactions++
	r.arm.Attempts += x.Attempts
	if x.Committed() {
		r.arm.Committed++
		if x.Repaired != 0 {
			r.arm.Repaired++
		}
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

// audit counts the refused attempts of a strata arm from the store's audit,
// and verifies the database when asked.
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
		plan, err := p.PlanSpan(r.db, r.s.ID)
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
			plan, err := p.PlanFold(r.db, r.s.ID)
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
	out, err := r.rec.Summarize(ctx, compaction.NewInput(plan, 0, nil))
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
