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

// StateOf returns the state r (the Required of a span from seq 1)
// implies at its end, as FitState takes it: the task and the user's
// requests (in order), the failures, the calls open, the plan, the
// dispositions, the active constraints (withdrawn ones are no state) and
// the artifacts, each list but the requests and the plan newest first.
// The lists are copies.
func StateOf(r *tier.Required) tier.Claims {
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
	return c
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

// RejectionOf returns the failure of fs that rejected disposition d
// records, and whether there is one: a rejection is the failed result of
// a call the user refused, and an importer writes the rejected event
// right after that tool_result (transcript's builder), so the failure
// resolved at d.Seq−1 is its call. Seqs and kinds only, never a text.
func RejectionOf(d tier.Disposition, fs []tier.Resolution) (tier.Resolution, bool) {
	if d.State != tier.KindRejected || d.Seq < 2 {
		return tier.Resolution{}, false
	}
	i := slices.IndexFunc(fs, func(f tier.Resolution) bool { return f.Kind == tier.KindToolCall && f.At == d.Seq-1 })
	if i < 0 {
		return tier.Resolution{}, false
	}
	return fs[i], true
}

// sections returns the facts of c by class, in the order the budget keeps
// them: standing failures, open calls, the plan, rejections and
// constraints, older requests, artifacts, fixed failures. (The task and
// the newest request come before them, always: requestBlock.) A failure
// that is a rejection (RejectionOf) is listed once, as the rejection,
// with its call's target.
func sections(c *tier.Claims) []stateSection {
	rejections := map[uint64]tier.Resolution{} // by the disposition's seq
	rejectedAt := map[uint64]bool{}            // the failures that are rejections, by At
	for _, d := range c.Dispositions {
		if f, ok := RejectionOf(d, c.Failures); ok {
			rejections[d.Seq] = f
			rejectedAt[f.At] = true
		}
	}
	var failures []tier.Resolution
	for _, f := range c.Failures {
		if !rejectedAt[f.At] {
			failures = append(failures, f)
		}
	}
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
	var disps []string
	for _, d := range c.Dispositions {
		d.Reason = tier.ClipTo(d.Reason, maxFactText)
		f, ok := rejections[d.Seq]
		if !ok {
			disps = append(disps, ClaimLines(&tier.Claims{Dispositions: []tier.Disposition{d}})...)
			continue
		}
		var b strings.Builder
		b.WriteString("- rejected: ")
		if f.Target != "" {
			fmt.Fprintf(&b, "`%s`", oneLine(tier.ClipTo(f.Target, maxFactText)))
		} else {
			b.WriteString(oneLine(d.Key))
		}
		if f.Name != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(f.Name))
		}
		fmt.Fprintf(&b, ", call %s at seq %d", oneLine(f.ID), f.At)
		if d.Reason != "" {
			fmt.Fprintf(&b, " — %s", oneLine(d.Reason))
		}
		disps = append(disps, b.String())
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
		{title: "rejected, failed or superseded items, newest first", noun: "item", facts: disps},
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
// rejected is shown once, as its rejection (RejectionOf).
func FitState(head string, c *tier.Claims, budget int) Fitted {
	budget = max(budget, MinStateBudget)
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(requestBlock(c.Requests))
	var secs []stateSection
	for _, sec := range sections(c) {
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
func (c *Context) Fit(state *tier.Claims, budget int) Fitted {
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
