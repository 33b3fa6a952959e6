package compaction

import (
	"context"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Policy says when compaction is due. Of its L1 rules — EveryTokens,
// EveryTurns, EveryEvents — each one set proposes a boundary, and the
// earliest due wins.
type Policy struct {
	// EveryTokens makes an L1 node as soon as the uncompacted tail reaches
	// this many tokens, as a context resumed then would carry it: each raw
	// event as the context renders it (checkpoint.EventTextLen, with its
	// seq, turn, kind, id, name, key and text), estimated as everywhere in
	// strata (tier.TokensOfBytes of the lengths summed; store.Info's
	// TailTokens). The span ends at the first event at which the tail
	// reaches the budget — just over it, by at most that event — even
	// mid-turn with calls open, which the node claims UNRESOLVED. After a
	// refused span ending where the tail held r tokens, the next ends where
	// it reaches the next multiple of EveryTokens above r. 0 = off.
	EveryTokens int
	// EveryTurns makes an L1 node every this many complete turns; 0 = off.
	EveryTurns int
	// EveryEvents makes an L1 node as soon as the uncompacted tail holds this
	// many events, even mid-turn with calls open; 0 = off.
	EveryEvents int
	// Fold makes a depth d+1 node whenever this many consecutive roots of
	// depth d have accumulated; 0 = never.
	Fold int
	// MaxRoots bounds the frame: while it holds more roots than this, the
	// first two are folded into a digest (store.PlanDigest), whatever their
	// depths, so that a resumed context stays the same size however long
	// the session runs. 0 = no bound: the frame holds O(log n) roots.
	MaxRoots int
	// Budget is the token budget of each node; 0 = DefaultBudget.
	Budget int
}

// Defaults of Policy, as the CLI uses them: DefaultPolicy, the policy of
// Window{Tokens: DefaultWindow, Share: DefaultShare} (docs/design.md,
// "The default policy").
const (
	// DefaultWindow is the model's context window the default policy is
	// sized for: 200,000 tokens, the window of the Claude models Claude
	// Code runs (it compacts near 155k of it); Codex's models have larger
	// ones, Gemini's up to 1M.
	DefaultWindow = 200_000
	// DefaultShare is the share of the window a resumed context may take:
	// a quarter, so that an agent resumed from it has three quarters of
	// its window for its prompt and its work, and half of it before the
	// earliest compaction threshold of the field (Gemini CLI compacts at
	// half its window, keeping the last 30% of its history — about the
	// quarter it then holds; Claude Code near 78%, Codex at 70–98%).
	DefaultShare = 0.25
	// DefaultMaxRoots is how many summaries the frame of a Window policy
	// holds at most: past it, the first two are folded into a digest.
	DefaultMaxRoots = 4
	// DefaultFold folds every 4 roots of a depth into one of the next.
	DefaultFold = 4
	// DefaultBudget is the token budget of each summary node.
	DefaultBudget = 2048
	// DefaultEveryTokens is the default policy's L1 boundary: what the
	// frame's summaries leave of the resumed context's share,
	// DefaultWindow·DefaultShare − DefaultMaxRoots·DefaultBudget = 41,808
	// tokens of raw tail.
	DefaultEveryTokens = int(DefaultWindow*DefaultShare) - DefaultMaxRoots*DefaultBudget
)

// DefaultPolicy is Window{Tokens: DefaultWindow, Share: DefaultShare}'s
// policy: a resumed context of at most 50,000 tokens, a quarter of a
// 200k window — an L1 node each time the raw tail reaches
// DefaultEveryTokens tokens, a fold every DefaultFold roots, and at most
// DefaultMaxRoots summaries of DefaultBudget tokens in the frame.
var DefaultPolicy = Policy{EveryTokens: DefaultEveryTokens, Fold: DefaultFold, MaxRoots: DefaultMaxRoots, Budget: DefaultBudget}

// Options configures a Compactor.
type Options struct {
	Summarizer Summarizer // required
	Policy     Policy
	// Retries is how many times a refused summary is asked for again, from
	// the raw span, told what was missing. 0 = no retry.
	Retries int
	// Repair, after the last attempt is refused, commits the summarizer's
	// narrative with the claims the store computed from the raw span
	// (tier.Required.Claims), validated as usual, in place of the refusal.
	// The refused attempts' audit records stay, and the node's summary
	// names the last one (store.Summary.Repairs), so the summarizer's losses
	// stay counted while the agent resumes from the node, not from raw. An
	// answer that could not be used at all (marker.ClassOutput) is repaired
	// with Extractive's narrative. This is the one repair the design allows:
	// at compaction time, from the raw log, while it is resident. false =
	// a refusal stands and resume falls back to the checkpoint.
	Repair bool
	// BackgroundRuns is how many sessions' Runs a Background makes at
	// once; 0 means DefaultBackgroundRuns, 1 one Run at a time.
	BackgroundRuns int
}

// Compactor runs compactions on a store under a policy.
type Compactor struct {
	db   *store.DB
	opts Options
}

// NewCompactor returns a Compactor over db. Options.Summarizer is required;
// a zero Policy.Budget means DefaultBudget.
func NewCompactor(db *store.DB, opts Options) (*Compactor, error) {
	if opts.Summarizer == nil {
		return nil, errors.New("compaction: Options.Summarizer is required")
	}
	if opts.Policy.Budget <= 0 {
		opts.Policy.Budget = DefaultBudget
	}
	return &Compactor{db: db, opts: opts}, nil
}

// Result is one compaction: what was planned, and either the node and
// marker committed or the refusal.
type Result struct {
	Session  string
	Kind     store.PlanKind
	Depth    tier.Depth
	From, To uint64
	Attempts int // summarizer calls made

	Node       uint64 // 0 when refused
	Marker     uint64
	Checkpoint uint64 // at the boundary when committed; at the span start when refused

	InvalidatedMarkers     []uint64
	InvalidatedCheckpoints []uint64

	// Refused is the validation failure of the last attempt, when no marker
	// was committed.
	Refused *marker.InvalidError

	// Repaired is, for a node committed by Options.Repair, the audit id of
	// the refused attempt it repairs; Missed is what that attempt lacked,
	// as its audit record lists it. 0 and nil otherwise.
	Repaired uint64
	Missed   []marker.Failure
}

// Committed reports whether a node and marker were committed.
func (r *Result) Committed() bool { return r.Node != 0 }

// maxConflicts bounds re-planning after store.ErrConflict.
const maxConflicts = 8

// Run compacts session as far as the policy makes due: L1 nodes over the
// uncompacted tail, each followed by the folds it makes due. A refused
// compaction is a Result, not an error, and Run goes on past it; errors are
// for what stops compaction itself. Where compactions fall depends only on
// the events' seqs and turns, not on how often Run is called.
func (c *Compactor) Run(ctx context.Context, session string) ([]Result, error) {
	var out []Result
	p := c.opts.Policy
	var info store.Info
	planSpan := func() (plan *store.Plan, err error) {
		plan, info, err = p.planSpan(c.db, session)
		return plan, err
	}
	for {
		r, due, err := c.step(ctx, planSpan)
		if err != nil {
			return out, err
		}
		if !due && !p.frameDue(info.Roots) {
			// Nothing is due, and the frame the span's plan read has
			// too few roots for a fold or a digest: no need to read it
			// again to know.
			return out, nil
		}
		if due {
			out = append(out, r)
			if !r.Committed() {
				// The next span is due at the policy's next boundary
				// past this one: PlanSpan finds it if the tail already
				// reaches it.
				continue
			}
		}
		// After each new root — and once at the end, for a frame that
		// another policy or a re-compaction left over its bounds.
		folds, err := c.fold(ctx, session)
		out = append(out, folds...)
		if err != nil {
			return out, err
		}
		digests, err := c.digest(ctx, session)
		out = append(out, digests...)
		if err != nil || !due {
			return out, err
		}
	}
}

// RunSessions compacts what the store holds: it runs Run on each of
// sessions in turn, or on every session the store holds when none is
// named, and hands each session's Results to each (nil: none wanted). The
// policy runs over each session's uncompacted tail as it would have after
// every append, so the compactions fall where an agent that compacted as
// it went would have had them. What is compacted, and a span refused, is
// not asked for again: a second call adds nothing, and a call after one
// that stopped (a summarizer that did not answer) goes on where it
// stopped. A named session the store does not hold is
// store.ErrSessionNotFound, before anything is compacted.
func (c *Compactor) RunSessions(ctx context.Context, sessions []string, each func(session string, rs []Result)) error {
	if len(sessions) == 0 {
		ids, err := c.db.Sessions()
		if err != nil {
			return err
		}
		sessions = ids
	}
	for _, id := range sessions {
		if _, err := c.db.Info(id); err != nil {
			return errors.Wrapf(err, "compaction: session %q", id)
		}
	}
	for _, id := range sessions {
		rs, err := c.Run(ctx, id)
		if each != nil && len(rs) > 0 {
			each(id, rs)
		}
		if err != nil {
			return errors.Wrapf(err, "compaction: session %q", id)
		}
	}
	return nil
}

// CompactTo compacts session's uncompacted tail through seq to into one L1
// node, whatever the policy's L1 rules say — a boundary the caller chose,
// such as the point where the agent is about to cut its own context —
// then runs the folds and digests the policy makes due, as Run does. A
// tail that does not reach past the compacted prefix to seq to is nothing
// to compact: no Result for it, and the folds still run. A refusal is a
// Result, not an error.
func (c *Compactor) CompactTo(ctx context.Context, session string, to uint64) ([]Result, error) {
	var out []Result
	r, due, err := c.step(ctx, func() (*store.Plan, error) { return c.db.PlanSpan(session, to, c.opts.Policy.budget()) })
	if err != nil {
		return nil, err
	}
	if due {
		out = append(out, r)
	}
	folds, err := c.fold(ctx, session)
	out = append(out, folds...)
	if err != nil {
		return out, err
	}
	digests, err := c.digest(ctx, session)
	return append(out, digests...), err
}

// digest folds the first two roots into one while the frame holds more
// than MaxRoots.
func (c *Compactor) digest(ctx context.Context, session string) ([]Result, error) {
	if c.opts.Policy.MaxRoots < 1 {
		return nil, nil
	}
	return c.while(ctx, func() (*store.Plan, error) { return c.opts.Policy.PlanDigest(c.db, session) })
}

// fold makes depth d+1 nodes while K consecutive roots of a depth exist.
func (c *Compactor) fold(ctx context.Context, session string) ([]Result, error) {
	if c.opts.Policy.Fold < 2 {
		return nil, nil
	}
	return c.while(ctx, func() (*store.Plan, error) { return c.opts.Policy.PlanFold(c.db, session) })
}

// while runs the compactions plan makes due, one after another, until it
// finds nothing due or one is refused.
func (c *Compactor) while(ctx context.Context, plan func() (*store.Plan, error)) ([]Result, error) {
	var out []Result
	for {
		r, due, err := c.step(ctx, plan)
		if !due || err != nil {
			return out, err
		}
		out = append(out, r)
		if !r.Committed() {
			return out, nil
		}
	}
}

// step plans one compaction and runs it, planning again when another
// compaction committed first (store.ErrConflict). due is false when the plan
// finds nothing to compact.
func (c *Compactor) step(ctx context.Context, plan func() (*store.Plan, error)) (r Result, due bool, err error) {
	for conflicts := 0; ; conflicts++ {
		p, err := plan()
		if errors.Is(err, store.ErrNothingToCompact) {
			return Result{}, false, nil
		}
		if err != nil {
			return Result{}, true, err
		}
		r, err := c.compact(ctx, p)
		if errors.Is(err, store.ErrConflict) && conflicts < maxConflicts {
			continue
		}
		return r, true, err
	}
}

// Recompact summarizes root node again with budget and, if the summary is
// valid, supersedes the root with it — invalidating the old node's marker and
// every checkpoint whose prefix held it, in the same transaction. A refusal
// comes back as an error that errors.Is(err, marker.ErrMarkerInvalid), with
// the Result.
func (c *Compactor) Recompact(ctx context.Context, session string, node uint64, budget int) (Result, error) {
	plan, err := c.db.PlanRecompact(session, node, budget)
	if err != nil {
		return Result{}, err
	}
	r, err := c.compact(ctx, plan)
	if err == nil && r.Refused != nil {
		err = r.Refused
	}
	return r, err
}

// compact summarizes and commits one plan, retrying a refused summary from
// the raw span up to Options.Retries times, then repairing the last refusal
// when Options.Repair says so.
func (c *Compactor) compact(ctx context.Context, plan *store.Plan) (Result, error) {
	r := Result{Session: plan.Session, Kind: plan.Kind, Depth: plan.Depth, From: plan.From, To: plan.To}
	name := c.opts.Summarizer.Name()
	var missing []marker.Failure // what the previous attempt lacked
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		// Each attempt gets an input of its own (NewInput): nothing a
		// summarizer does to it reaches the plan or the next attempt.
		out, err := c.opts.Summarizer.Summarize(ctx, NewInput(plan, attempt, missing))
		r.Attempts++
		sum := store.Summary{Narrative: out.Narrative, Claims: out.Claims, Summarizer: name, Attempt: attempt}
		var cr store.CommitResult
		var unusable *UnusableOutputError
		switch {
		case err == nil:
			cr, err = c.db.Commit(plan, sum)
		case errors.As(err, &unusable) && ctx.Err() == nil:
			// Refused like a summary that fails the conditions: a
			// checkpoint and an audit record saying why.
			cr, err = c.db.Refuse(plan, store.Summary{Summarizer: name, Attempt: attempt}, marker.Failure{
				Class: marker.ClassOutput, Item: unusable.Reason, Detail: clip(err.Error(), maxOutputDetail)})
			// A repair has no narrative of the model's to keep.
			out.Narrative = ""
		default:
			return r, errors.Wrapf(err, "compaction: summarizer %s on seq %d..%d", name, plan.From, plan.To)
		}
		var ie *marker.InvalidError
		switch {
		case err == nil:
			r.accepted(&cr)
			return r, nil
		case errors.As(err, &ie):
			r.Checkpoint, r.Refused = cr.Checkpoint, ie
			if attempt < c.opts.Retries {
				missing = ie.Failures
				continue
			}
			if c.opts.Repair && cr.Refusal != nil {
				return c.repair(ctx, plan, r, out.Narrative, cr.Refusal, attempt+1)
			}
			return r, nil
		default:
			return r, err
		}
	}
}

// repair commits, after refusal (the last attempt's audit record), the
// claims the store computed from the raw span with narrative: the
// summarizer's, or Extractive's when it gave none, one over the size
// limits or one that could not be used (not UTF-8) (Options.Repair).
func (c *Compactor) repair(ctx context.Context, plan *store.Plan, r Result, narrative string, refusal *store.Refusal, attempt int) (Result, error) {
	claims := plan.Required.Claims()
	if narrative == "" || slices.ContainsFunc(refusal.Failures, func(f marker.Failure) bool {
		return f.Class == marker.ClassSize || f.Class == marker.ClassOutput
	}) {
		out, err := Extractive{}.Summarize(ctx, NewInput(plan, attempt, refusal.Failures))
		if err != nil {
			return r, err
		}
		narrative = out.Narrative
	}
	cr, err := c.db.Commit(plan, store.Summary{Narrative: narrative, Claims: claims, Summarizer: c.opts.Summarizer.Name(),
		Attempt: attempt, Repairs: refusal.ID})
	var ie *marker.InvalidError
	switch {
	case err == nil:
		r.accepted(&cr)
		r.Repaired, r.Missed = refusal.ID, refusal.Failures
		return r, nil
	case errors.As(err, &ie):
		// The claims from raw are refused too (over the size limits): the
		// refusal stands, now recorded twice.
		r.Checkpoint, r.Refused = cr.Checkpoint, ie
		return r, nil
	}
	return r, err
}

// accepted records a committed node in r.
func (r *Result) accepted(cr *store.CommitResult) {
	r.Node, r.Marker, r.Checkpoint = cr.Node.ID, cr.Marker, cr.Checkpoint
	r.InvalidatedMarkers, r.InvalidatedCheckpoints = cr.InvalidatedMarkers, cr.InvalidatedCheckpoints
	r.Refused = nil
}

// maxOutputDetail bounds the detail an unusable answer leaves in the audit:
// the error may quote the model's output.
const maxOutputDetail = 512

// clip returns s cut to at most n bytes, on a rune boundary, marked "…",
// with what is not UTF-8 in it (a summarizer's output it quotes) as U+FFFD.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	return tier.TruncateUTF8(s, n) + "…"
}
