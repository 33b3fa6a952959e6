package checkpoint

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-go/strata/tier"
)

// MinStateBudget is the smallest budget FitState takes, in tokens: the
// heading, the task and the newest request, the section lines and the
// count of what is not shown always fit in it.
const MinStateBudget = 640

// maxFactText bounds the text of one fact in a fitted state (a failed
// call's output, a rejection's reason): longer ones are cut and say how
// many bytes are left out; the whole context holds them whole.
const maxFactText = 240

// Text sizes of a fitted state.
const (
	maxRequestText = 600 // the task and the newest request
	maxErrorLines  = 6   // lines of a failure's output
	maxErrorLine   = 160 // bytes of one of them
)

// State is the state the raw log implies at a seq, as FitState renders
// it: its facts, each list newest first but Requests (in order: the first
// is the task) and Plan (in the plan's order), without resolutions and
// withdrawn constraints, which are no state; and Rejected, the seqs of
// the failed results that are the user's rejections of their calls
// (tier.Required.Rejections).
type State struct {
	Claims   tier.Claims
	Rejected []uint64
}

// StateOf returns the state r (the Required of a span from seq 1)
// implies at its end: the task and the user's requests (in order), the
// failures, the calls open, the plan, the dispositions, the active
// constraints and the artifacts, and which failures are rejections. The
// lists are copies.
func StateOf(r *tier.Required) State {
	c := tier.Claims{Unresolved: slices.Clone(r.Unresolved), Failures: slices.Clone(r.Failures),
		Dispositions: slices.Clone(r.Dispositions), Artifacts: slices.Clone(r.Artifacts),
		Requests: slices.Clone(r.Requests), RequestsLeftOut: r.RequestsLeftOut, Plan: slices.Clone(r.Plan), PlanAt: r.PlanAt}
	for _, x := range r.Constraints {
		if !x.Withdrawn {
			c.Constraints = append(c.Constraints, x)
		}
	}
	newestFirst(c.Unresolved, func(o tier.Open) (uint64, string) { return o.Seq, o.ID })
	newestFirst(c.Failures, func(r tier.Resolution) (uint64, string) { return r.At, r.ID })
	newestFirst(c.Dispositions, func(d tier.Disposition) (uint64, string) { return d.Seq, d.Key })
	newestFirst(c.Constraints, func(x tier.Constraint) (uint64, string) { return x.Seq, x.Key })
	newestFirst(c.Artifacts, func(a tier.Artifact) (uint64, string) { return a.Seq, a.Key })
	return State{Claims: c, Rejected: slices.Clone(r.Rejections)}
}

// newestFirst sorts s by seq, highest first, then by name.
func newestFirst[V any](s []V, key func(V) (uint64, string)) {
	slices.SortStableFunc(s, func(a, b V) int {
		sa, na := key(a)
		sb, nb := key(b)
		if c := cmp.Compare(sb, sa); c != 0 {
			return c
		}
		return strings.Compare(na, nb)
	})
}

// Fitted is a state rendered within a token budget (FitState): the text,
// how many facts the state holds and how many the text lists, and, per
// class, how many it counts without listing them.
type Fitted struct {
	Text   string
	Facts  int // facts in the state
	Shown  int // facts listed in Text; the others are counted in it
	Tokens int // tier.TokensOfBytes(len(Text)), at most the budget
	// LeftOut counts the facts not listed, by class, in the order of
	// priority; a class with none left out is not in it.
	LeftOut []LeftOut
}

// LeftOut is how many facts of a class a fitted state counts without
// listing them. Class is the noun its text counts them by ("standing
// failure", "request", …).
type LeftOut struct {
	Class string `json:"class"`
	Count int    `json:"count"`
}

// stateSection is one class of facts as a fitted state lists them.
type stateSection struct {
	title string // the heading, before ": N"
	noun  string // what "… and N more NOUNs not shown" counts, singular
	facts []string
	// uncounted is how many more facts of the class the state holds but
	// does not list (the requests a span's required state leaves out).
	uncounted int
	// always shows the heading of a class with no fact: a plan whose
	// every item is done.
	always bool
}

// sections returns the facts of s by class, in the order the budget keeps
// them: standing failures, open calls, the plan, rejections and
// constraints, older requests, artifacts, fixed failures. (The task and
// the newest request come before them, always: requestBlock.) A failure
// the user's rejection made (State.Rejected) is listed once, as a
// rejection, by its call's target, with the first lines of its result
// (where Claude Code keeps the user's words); a rejected disposition the
// importer wrote beside it (at the next seq) is that same rejection.
func sections(s *State) []stateSection {
	c := &s.Claims
	rejected := map[uint64]bool{}
	for _, at := range s.Rejected {
		rejected[at] = true
	}
	type dated struct {
		seq  uint64
		line string
	}
	// The rejected disposition beside a rejected failure, by the failure's
	// seq: its key says what the call was about when its input names no
	// target, its reason the user's words (the importer's reading).
	paired := map[uint64]tier.Disposition{}
	var disps []dated
	for _, d := range c.Dispositions {
		if d.State == tier.KindRejected && d.Seq > 0 && rejected[d.Seq-1] {
			paired[d.Seq-1] = d // the failure before it says it
			continue
		}
		d.Reason = tier.ClipTo(d.Reason, maxFactText)
		disps = append(disps, dated{d.Seq, ClaimLines(&tier.Claims{Dispositions: []tier.Disposition{d}})[0]})
	}
	var failures []tier.Resolution
	for _, f := range c.Failures {
		if !rejected[f.At] {
			failures = append(failures, f)
			continue
		}
		var b strings.Builder
		b.WriteString("- rejected: ")
		d, ok := paired[f.At]
		what := d.Key
		if f.Target != "" {
			what = "`" + f.Target + "`"
		}
		name := ""
		if f.Name != "" {
			name = " (" + oneLine(f.Name) + ")"
		}
		if what == "" {
			fmt.Fprintf(&b, "call %s%s at seq %d", oneLine(f.ID), name, f.At)
		} else {
			fmt.Fprintf(&b, "%s%s, call %s at seq %d", oneLine(tier.ClipTo(what, maxFactText)), name, oneLine(f.ID), f.At)
		}
		if ok && d.Reason != "" {
			fmt.Fprintf(&b, " — %s", oneLine(tier.ClipTo(d.Reason, maxFactText)))
		} else {
			writeOutput(&b, f.Reason)
		}
		disps = append(disps, dated{f.At, b.String()})
	}
	slices.SortStableFunc(disps, func(a, b dated) int { return cmp.Compare(b.seq, a.seq) })
	var standing, fixed []string
	for _, g := range tier.GroupFailures(failures) {
		if g.Fixed == 0 {
			standing = append(standing, failureFact(g))
		} else {
			fixed = append(fixed, fixedFact(g))
		}
	}
	var plan []string
	for _, p := range c.Plan {
		plan = append(plan, fmt.Sprintf("- [%s] %s", oneLine(p.Status), oneLine(tier.ClipTo(p.Key, maxFactText))))
	}
	var older []string
	if n := len(c.Requests); n > 2 {
		for i := n - 2; i >= 1; i-- {
			r := c.Requests[i]
			older = append(older, fmt.Sprintf("- seq %d: %s", r.Seq, oneLine(tier.ClipTo(r.Text, maxFactText))))
		}
	}
	var rejections []string
	for _, d := range disps {
		rejections = append(rejections, d.line)
	}
	constraints := clipped(c.Constraints, func(x *tier.Constraint) *string { return &x.Text })
	artifacts := clipped(c.Artifacts, func(a *tier.Artifact) *string { return &a.Text })
	planTitle := "open items of the agent's plan"
	if c.PlanAt != 0 {
		planTitle = fmt.Sprintf("open items of the agent's plan (its plan call at seq %d)", c.PlanAt)
	}
	return []stateSection{
		{title: "failures that still stand, by what failed, newest first", noun: "standing failure", facts: standing},
		{title: "calls open at the boundary, no result (UNRESOLVED)", noun: "open call", facts: ClaimLines(&tier.Claims{Unresolved: c.Unresolved})},
		{title: planTitle, noun: "plan item", facts: plan, always: c.PlanAt != 0},
		{title: "rejected, failed or superseded items, newest first", noun: "item", facts: rejections},
		{title: "active constraints, newest first", noun: "constraint", facts: ClaimLines(&tier.Claims{Constraints: constraints})},
		{title: "earlier requests of the user, newest first", noun: "request", facts: older, uncounted: c.RequestsLeftOut},
		{title: "artifacts (files written), newest first", noun: "artifact", facts: ClaimLines(&tier.Claims{Artifacts: artifacts})},
		{title: "failures since fixed (a later call on the same target succeeded)", noun: "fixed failure", facts: fixed},
	}
}

// failureFact renders a target's standing failure: what failed, how
// often, the newest call, and the first lines of its output.
func failureFact(g tier.FailureGroup) string {
	var b strings.Builder
	b.WriteString("- FAILED ")
	writeWhat(&b, g)
	fmt.Fprintf(&b, " — %s, newest at seq %d (call %s)", times(g.Count), g.Newest.At, oneLine(g.Newest.ID))
	writeOutput(&b, g.Newest.Reason)
	return b.String()
}

// fixedFact renders a target's failures that a later success fixed.
func fixedFact(g tier.FailureGroup) string {
	var b strings.Builder
	b.WriteString("- fixed: ")
	writeWhat(&b, g)
	fmt.Fprintf(&b, " — failed %s, newest at seq %d; succeeded at seq %d", times(g.Count), g.Newest.At, g.Fixed)
	return b.String()
}

// writeWhat writes what a failure was of: the target and the tool, or
// the call when it names no target.
func writeWhat(b *strings.Builder, g tier.FailureGroup) {
	r := g.Newest
	if r.Target == "" {
		fmt.Fprintf(b, "call %s", oneLine(r.ID))
	} else {
		fmt.Fprintf(b, "`%s`", oneLine(tier.ClipTo(r.Target, maxFactText)))
	}
	if r.Name != "" {
		fmt.Fprintf(b, " (%s)", oneLine(r.Name))
	}
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// writeOutput writes the first lines of a failure's output, each on its
// own indented line, control characters escaped, saying how much is left
// out.
func writeOutput(b *strings.Builder, text string) {
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n")), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return
	}
	shown := 0
	for _, l := range lines {
		if shown == maxErrorLines {
			break
		}
		l = strings.TrimRight(l, " \t\r")
		if l == "" && shown == 0 {
			continue
		}
		b.WriteString("\n    ")
		b.WriteString(EscapeControls(tier.ClipTo(l, maxErrorLine)))
		shown++
	}
	if rest := len(lines) - shown; rest > 0 && shown == maxErrorLines {
		fmt.Fprintf(b, "\n    …(%d more lines)", rest)
	}
}

// requestBlock renders the task and the user's newest request, which a
// fitted state always holds.
func requestBlock(rs []tier.Request) string {
	var b strings.Builder
	if len(rs) == 0 {
		b.WriteString("\n## the task: no request of the user's before the boundary\n")
		return b.String()
	}
	writeRequest(&b, fmt.Sprintf("the task (the user's first request, seq %d)", rs[0].Seq), rs[0].Text)
	if n := len(rs); n > 1 {
		writeRequest(&b, fmt.Sprintf("the user's newest request (seq %d)", rs[n-1].Seq), rs[n-1].Text)
	}
	return b.String()
}

// writeRequest writes a heading and the user's words under it, their
// lines kept, indented, control characters escaped.
func writeRequest(b *strings.Builder, title, text string) {
	fmt.Fprintf(b, "\n## %s, in the user's words:\n", title)
	for _, l := range strings.Split(strings.TrimSpace(tier.ClipTo(text, maxRequestText)), "\n") {
		b.WriteString("  ")
		b.WriteString(EscapeControls(strings.TrimRight(l, "\r")))
		b.WriteByte('\n')
	}
}

// clipped returns a copy of s with the text of each fact cut to
// maxFactText.
func clipped[V any](s []V, text func(*V) *string) []V {
	out := slices.Clone(s)
	for i := range out {
		p := text(&out[i])
		*p = tier.ClipTo(*p, maxFactText)
	}
	return out
}

// FitState renders state c (as StateOf returns it) after head, within
// budget tokens (at 4 bytes a token, tier.TokensOfBytes; at least
// MinStateBudget), head included. It is the one rule of what a budget
// keeps, for the Claude Code companion's injection and `strata resume
// --budget`. The rendering is canonical — the same state gives the same
// bytes — and nothing is cut silently. The task and the user's newest
// request come first, always (each cut to 600 bytes); then the classes by
// priority — standing failures, open calls, open plan items, rejections
// and constraints, earlier requests, artifacts, fixed failures — each
// newest first, every fact that fits in what the budget has left, saying
// how many more it holds ("… and 3 more standing failures not shown"). A
// fact's text over 240 bytes is cut, saying how many bytes are left out;
// a failure shows the first 6 lines of its output. A failed call the user
// rejected is shown once, as its rejection (State.Rejected).
func FitState(head string, s *State, budget int) Fitted {
	budget = max(budget, MinStateBudget)
	c := &s.Claims
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(requestBlock(c.Requests))
	var secs []stateSection
	for _, sec := range sections(s) {
		if len(sec.facts)+sec.uncounted > 0 || sec.always {
			secs = append(secs, sec)
		}
	}
	total := min(len(c.Requests), 2)
	for _, sec := range secs {
		total += len(sec.facts) + sec.uncounted
	}
	// Room for the heading and a count line of every section, always.
	reserve := 0
	for _, sec := range secs {
		reserve += len(sectionHeading(sec)) + len(moreLine(sec, len(sec.facts)+sec.uncounted))
	}
	room := 4*budget - b.Len() - reserve
	f := Fitted{Shown: min(len(c.Requests), 2)}
	for _, sec := range secs {
		b.WriteString(sectionHeading(sec))
		n := 0
		for _, l := range sec.facts {
			if len(l)+1 > room {
				continue // counted; a shorter fact after it may fit
			}
			b.WriteString(l)
			b.WriteByte('\n')
			room -= len(l) + 1
			n++
		}
		left := len(sec.facts) - n + sec.uncounted
		b.WriteString(moreLine(sec, left))
		if left > 0 {
			f.LeftOut = append(f.LeftOut, LeftOut{Class: sec.noun, Count: left})
		}
		f.Shown += n
	}
	f.Text, f.Facts = b.String(), total
	f.Tokens = tier.TokensOfBytes(len(f.Text))
	return f
}

func sectionHeading(sec stateSection) string {
	return fmt.Sprintf("\n## %s: %d\n", sec.title, len(sec.facts)+sec.uncounted)
}

// moreLine counts the facts of sec not shown, "" when there are none.
func moreLine(sec stateSection, n int) string {
	if n == 0 {
		return ""
	}
	noun := sec.noun
	if n != 1 {
		noun += "s"
	}
	return fmt.Sprintf("… and %d more %s not shown\n", n, noun)
}

// Fit renders state, the state at c's head (StateOf), within budget
// tokens (FitState), under a heading that names c — its session, what
// served it, its size and its sha256 — so that the full context can be
// asked for and checked. The heading says that every line under it is a
// fact of the raw log, none a summarizer's words.
func (c *Context) Fit(state *State, budget int) Fitted {
	var b strings.Builder
	fmt.Fprintf(&b, "# strata state, fitted to %d tokens\nsession: %s\n", max(budget, MinStateBudget), oneLine(c.Session))
	switch c.Source {
	case SourceMarker:
		fmt.Fprintf(&b, "source: marker %d\n", c.Marker)
	default:
		fmt.Fprintf(&b, "source: checkpoint %d\n", c.Checkpoint)
	}
	text := c.Text()
	sum := sha256.Sum256(text)
	fmt.Fprintf(&b, "head: seq %d\nwhole context: %d bytes, sha256 %s (strata resume without --budget prints it)\n", c.Head, len(text), hex.EncodeToString(sum[:]))
	b.WriteString("Every line below is a fact the raw log implies at the head, computed from the raw events; none is a summarizer's words.\n")
	return FitState(b.String(), state, budget)
}
