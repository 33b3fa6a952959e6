package compaction

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Input is what a summarizer is given: the raw span, or for depth ≥ 2 also
// the child nodes, the target depth, a token budget, and the claims it must
// carry.
type Input struct {
	Session  string
	Depth    tier.Depth
	From, To uint64
	Budget   int          // tokens the node should fit in
	Events   []tier.Event // the raw span [From, To]
	Children []tier.Node  // depth ≥ 2: the nodes being folded or re-compacted
	Required tier.Required
	// Missing lists what the previous attempt lacked, on a retry (Attempt ≥ 1).
	Missing []marker.Failure
	Attempt int
}

// NewInput returns the input of a summarizer for plan, on attempt attempt
// with what the previous attempt missed: the store's own copy of the plan's
// events, children and required facts, sharing no memory with plan, so that
// a summarizer that edits its input in place changes neither the plan the
// compaction commits nor the input of a later attempt.
func NewInput(plan *store.Plan, attempt int, missing []marker.Failure) *Input {
	return &Input{Session: plan.Session, Depth: plan.Depth, From: plan.From, To: plan.To, Budget: plan.Budget,
		Events: tier.CloneEvents(plan.Events), Children: tier.CloneNodes(plan.Children), Required: plan.Required.Clone(),
		Missing: slices.Clone(missing), Attempt: attempt}
}

// Output is a summary: narrative text and the claims it makes.
type Output struct {
	Narrative string
	Claims    tier.Claims
}

// Summarizer makes a summary node's content. Implementations must not
// retain Input after returning. A Summarizer backed by a model should put
// every required claim in Output.Claims: the store refuses a summary that
// misses one. It must be safe for concurrent use: a Background calls it
// for several sessions at once (Options.BackgroundRuns).
type Summarizer interface {
	// Name is recorded on every node it makes.
	Name() string
	Summarize(ctx context.Context, in *Input) (Output, error)
}

// Claim classes a lossy summarizer can drop.
const (
	DropNegatives   = "negatives"   // failed calls and dispositions: rejected, failed, superseded
	DropArtifacts   = "artifacts"   // artifacts recorded in the span
	DropConstraints = "constraints" // constraints stated or withdrawn in the span
	DropOpen        = "open"        // calls and resources still open: UNRESOLVED
)

// DropClasses lists the classes in a fixed order.
var DropClasses = []string{DropNegatives, DropArtifacts, DropConstraints, DropOpen}

// ErrUnusableOutput marks a summarizer error meaning that its answer could
// not be used as a summary at all: not the JSON asked for, cut short, over
// budget. The Compactor records it as a refused compaction (reason class
// marker.ClassOutput, the item saying why) — never a crash, never a
// summary trusted — where any other summarizer error (a server down, a
// cancelled context) is returned and nothing is recorded. Make such errors
// with UnusableOutput.
var ErrUnusableOutput = errors.New("compaction: unusable summarizer output")

// UnusableOutputError is a summarizer error marked ErrUnusableOutput:
// Reason is a short word for the audit ("invalid_json", "truncated"...),
// Err what exactly went wrong.
type UnusableOutputError struct {
	Reason string
	Err    error
}

// UnusableOutput returns err as an *UnusableOutputError with reason.
func UnusableOutput(reason string, err error) error {
	return &UnusableOutputError{Reason: reason, Err: err}
}

// Error implements error.
func (e *UnusableOutputError) Error() string { return e.Err.Error() }

// Unwrap returns the error it marks.
func (e *UnusableOutputError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnusableOutput.
func (e *UnusableOutputError) Is(target error) bool { return target == ErrUnusableOutput }

// ErrUnknownSummarizer is returned by New for a name it does not know, and
// ErrUnknownDrop for a drop class.
var (
	ErrUnknownSummarizer = errors.New("compaction: unknown summarizer")
	ErrUnknownDrop       = errors.New("compaction: unknown claim class to drop")
)

// New returns the built-in summarizer called name: "extractive", or "lossy"
// dropping the classes in drop.
func New(name string, drop []string) (Summarizer, error) {
	switch name {
	case "extractive":
		return Extractive{}, nil
	case "lossy":
		return NewLossy(drop...)
	}
	return nil, errors.WithHint(errors.Wrapf(ErrUnknownSummarizer, "%q", name), "use extractive or lossy (a model: package compaction/openai)")
}

// Extractive is a deterministic summarizer that carries the required claims
// mechanically — valid by construction — with a narrative made of the span's
// messages (or the children's narratives), cut to the budget.
type Extractive struct{}

// Name returns "extractive".
func (Extractive) Name() string { return "extractive" }

// Summarize implements Summarizer.
func (Extractive) Summarize(_ context.Context, in *Input) (Output, error) {
	out := Output{Claims: in.Required.Claims()}
	out.Narrative = fitNarrative(in, &out.Claims, extract(in))
	return out, nil
}

// Lossy is a deterministic summarizer that drops whole classes of claims, the
// way a fluency-tuned model forgets what it found unremarkable: it mentions
// what it dropped in passing ("explored approaches: ...") without the state
// that makes it a fact. The store refuses what it makes whenever a dropped
// class was required.
type Lossy struct {
	drop map[string]bool
}

// NewLossy returns a Lossy dropping the given classes (DropNegatives, ...).
func NewLossy(classes ...string) (*Lossy, error) {
	l := &Lossy{drop: map[string]bool{}}
	for _, c := range classes {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(DropClasses, c) {
			return nil, errors.WithHintf(errors.Wrapf(ErrUnknownDrop, "%q", c), "use a comma list of %s", strings.Join(DropClasses, ", "))
		}
		l.drop[c] = true
	}
	return l, nil
}

// Name returns "lossy".
func (l *Lossy) Name() string { return "lossy" }

// Summarize implements Summarizer.
func (l *Lossy) Summarize(_ context.Context, in *Input) (Output, error) {
	c := in.Required.Claims()
	var mentions []string
	if l.drop[DropNegatives] {
		for _, d := range c.Dispositions {
			mentions = append(mentions, d.Key)
		}
		for _, f := range c.Failures {
			mentions = append(mentions, f.ID)
		}
		c.Dispositions, c.Failures = nil, nil
	}
	if l.drop[DropArtifacts] {
		c.Artifacts = nil
	}
	if l.drop[DropConstraints] {
		c.Constraints = nil
	}
	if l.drop[DropOpen] {
		c.Unresolved = nil
	}
	text := extract(in)
	if len(mentions) > 0 {
		text = "Explored approaches: " + strings.Join(mentions, ", ") + ".\n" + text
	}
	out := Output{Claims: c}
	out.Narrative = fitNarrative(in, &out.Claims, text)
	return out, nil
}

// extract returns the span's messages, one line each, or the children's
// narratives for depth ≥ 2.
func extract(in *Input) string {
	var b strings.Builder
	if len(in.Children) > 0 {
		for _, c := range in.Children {
			fmt.Fprintf(&b, "[%s %d, seq %d..%d] %s\n", c.Depth, c.ID, c.From, c.To, firstLine(c.Narrative, 400))
		}
		return b.String()
	}
	for i := range in.Events {
		e := &in.Events[i]
		switch e.Kind {
		case tier.KindUser, tier.KindAssistant, tier.KindSystem:
			fmt.Fprintf(&b, "%s: %s\n", e.Kind, firstLine(e.Text, 200))
		case tier.KindToolCall:
			fmt.Fprintf(&b, "call %s %s: %s\n", e.ID, e.Name, firstLine(e.Text, 120))
		}
	}
	if b.Len() == 0 {
		// A span of no message and no call — a system prompt given as a
		// constraint, a large tool result that ends a span alone — is
		// told by its other events.
		for i := range in.Events {
			e := &in.Events[i]
			fmt.Fprintf(&b, "%s %s: %s\n", e.Kind, cmp.Or(e.Key, e.ID, e.Name), firstLine(e.Text, 120))
		}
	}
	return b.String()
}

func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// fitNarrative cuts text so that the node — heading, narrative and claims,
// as a context renders it — fits the budget where it can. Claims are never
// cut: validity comes before size.
func fitNarrative(in *Input, c *tier.Claims, text string) string {
	if in.Budget <= 0 {
		return text
	}
	// tokens = ceil(bytes/4) ≤ budget ⟺ bytes ≤ 4·budget. The heading and
	// claims are rendered once; the narrative's rendering (indented lines)
	// is measured alone, without the claims, whose rendering is the costly
	// part.
	// The node's id is not known yet: the widest one stands for it.
	n := tier.Node{ID: ^uint64(0), Depth: in.Depth, From: in.From, To: in.To, Claims: *c}
	room := 4*in.Budget - checkpoint.NodeTextLen(&n)
	bare := tier.Node{ID: ^uint64(0), Depth: in.Depth, From: in.From, To: in.To}
	heading := checkpoint.NodeTextLen(&bare)
	fits := func(t string) bool {
		bare.Narrative = t
		return checkpoint.NodeTextLen(&bare)-heading <= room
	}
	if fits(text) {
		return text
	}
	// The longest prefix that fits (the rendering grows with the prefix),
	// then back to a line end where there is one.
	lo, hi := 0, len(text)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(cutRune(text, mid)) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	// Claims that fill the budget leave the narrative its floor, over the
	// budget: a node is read by a person too.
	lo = max(lo, min(len(text), 4*in.Budget/narrativeFloor))
	t := cutRune(text, lo)
	if i := strings.LastIndexByte(t, '\n'); i > 0 {
		t = t[:i+1]
	} else {
		t = ""
	}
	if strings.TrimSpace(t) == "" {
		// Never nothing where the span has words: the claims took the
		// budget, and the node goes over it by one line — the user's
		// first, where the span has one.
		t = keptLine(text)
	}
	return t
}

// narrativeFloor is the share of a node's budget (1/narrativeFloor) its
// narrative keeps however much of the budget its claims take.
const narrativeFloor = 16

// keptLine returns the line of an extract a narrative keeps whatever the
// budget: the first user line ("user: …"), else the first line.
func keptLine(text string) string {
	first := ""
	for line := range strings.Lines(text) {
		if first == "" && strings.TrimSpace(line) != "" {
			first = line
		}
		if strings.HasPrefix(line, "user: ") {
			return line
		}
	}
	return first
}

// cutRune returns s cut to at most n bytes, at a rune boundary.
func cutRune(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}
