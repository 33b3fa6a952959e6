package claudecode

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/shell"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// DefaultBudget is the default token budget of the injected state (at 4
// bytes a token, tier.TokensOfBytes): 8,000 bytes, under the 10,000
// characters above which Claude Code replaces a hook's added context by a
// preview.
const DefaultBudget = 2000

// MinBudget is the smallest budget: the heading, the task and the newest
// request, the section lines and the count of what is not shown always
// fit in it.
const MinBudget = 640

// maxFactText bounds the text of one fact in the injected state (a
// failed call's output, a rejection's reason): longer ones are cut and
// say how many bytes are left out; the resumed context holds them whole.
const maxFactText = 240

// State is the state the raw log of a session implies at a boundary —
// what the hook injects after Claude Code compacts: the session's task
// and the user's requests, every failure by what failed and whether it
// still stands, every call open at the boundary (UNRESOLVED), the open
// items of the agent's plan, every disposition (rejected, failed,
// superseded, succeeded after a failure) with its reason, every active
// constraint, every artifact. It is computed from the raw events
// 1..Boundary by the ledger's rules (tier.RequiredBuilder), never from a
// summary.
type State struct {
	Session string
	// Boundary is the seq the facts hold at: the last event before Claude
	// Code's compact_boundary record.
	Boundary uint64
	// Marker is the valid marker at Boundary (or the newest before it), 0
	// for none; SHA256 is the sha256 of the context `strata resume
	// --marker Marker` prints (of the latest context when Marker is 0).
	Marker uint64
	SHA256 string
	// Bytes is the size of that context, Events the raw events in it:
	// those after the marker's boundary (every event without a marker).
	Bytes, Events int
	// Claims hold the facts, each list newest first but Requests (in
	// order: the first is the task) and Plan (in the plan's order).
	// Resolved and withdrawn constraints are left out: they are no state.
	Claims tier.Claims
}

// computeState returns the state session's raw log implies at seq
// boundary.
func computeState(s *store.Snapshot, session string, boundary uint64) (*State, error) {
	st := &State{Session: session, Boundary: boundary}
	if boundary == 0 {
		return st, nil
	}
	b := tier.NewRequiredBuilder(nil)
	if err := s.Events(session, 1, boundary, b.Add); err != nil {
		return nil, err
	}
	req := b.Required()
	c := tier.Claims{Unresolved: req.Unresolved, Failures: req.Failures, Dispositions: req.Dispositions, Artifacts: req.Artifacts,
		Requests: req.Requests, RequestsLeftOut: req.RequestsLeftOut, Plan: req.Plan, PlanAt: req.PlanAt}
	for _, x := range req.Constraints {
		if !x.Withdrawn {
			c.Constraints = append(c.Constraints, x)
		}
	}
	newestFirst(c.Unresolved, func(o tier.Open) (uint64, string) { return o.Seq, o.ID })
	newestFirst(c.Failures, func(r tier.Resolution) (uint64, string) { return r.At, r.ID })
	newestFirst(c.Dispositions, func(d tier.Disposition) (uint64, string) { return d.Seq, d.Key })
	newestFirst(c.Constraints, func(x tier.Constraint) (uint64, string) { return x.Seq, x.Key })
	newestFirst(c.Artifacts, func(a tier.Artifact) (uint64, string) { return a.Seq, a.Key })
	st.Claims = c
	return st, nil
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

// section is one class of facts as the injected state lists them, in the
// order of what matters most when the budget is short.
type section struct {
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

// Text sizes of the injected state.
const (
	maxRequestText = 600 // the task and the newest request
	maxErrorLines  = 6   // lines of a failure's output
	maxErrorLine   = 160 // bytes of one of them
)

// sections returns the facts of s by class, in the order the budget keeps
// them: standing failures, open calls, the plan, rejections and
// constraints, older requests, artifacts, fixed failures. (The task and
// the newest request come before them, always: requestBlock.)
func (s *State) sections() []section {
	c := s.Claims
	var standing, fixed []string
	for _, g := range tier.GroupFailures(c.Failures) {
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
	disps := clipped(c.Dispositions, func(d *tier.Disposition) *string { return &d.Reason })
	constraints := clipped(c.Constraints, func(x *tier.Constraint) *string { return &x.Text })
	artifacts := clipped(c.Artifacts, func(a *tier.Artifact) *string { return &a.Text })
	planTitle := "open items of the agent's plan"
	if c.PlanAt != 0 {
		planTitle = fmt.Sprintf("open items of the agent's plan (its plan call at seq %d)", c.PlanAt)
	}
	return []section{
		{title: "failures that still stand, by what failed, newest first", noun: "standing failure", facts: standing},
		{title: "calls open at the boundary, no result (UNRESOLVED)", noun: "open call", facts: checkpoint.ClaimLines(&tier.Claims{Unresolved: c.Unresolved})},
		{title: planTitle, noun: "plan item", facts: plan, always: c.PlanAt != 0},
		{title: "rejected, failed or superseded items, newest first", noun: "item", facts: checkpoint.ClaimLines(&tier.Claims{Dispositions: disps})},
		{title: "active constraints, newest first", noun: "constraint", facts: checkpoint.ClaimLines(&tier.Claims{Constraints: constraints})},
		{title: "earlier requests of the user, newest first", noun: "request", facts: older, uncounted: c.RequestsLeftOut},
		{title: "artifacts (files written), newest first", noun: "artifact", facts: checkpoint.ClaimLines(&tier.Claims{Artifacts: artifacts})},
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
		b.WriteString(checkpoint.EscapeControls(tier.ClipTo(l, maxErrorLine)))
		shown++
	}
	if rest := len(lines) - shown; rest > 0 && shown == maxErrorLines {
		fmt.Fprintf(b, "\n    …(%d more lines)", rest)
	}
}

// requestBlock renders the task and the user's newest request, which the
// injected state always holds.
func (s *State) requestBlock() string {
	rs := s.Claims.Requests
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
		b.WriteString(checkpoint.EscapeControls(strings.TrimRight(l, "\r")))
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

// Rendered is the injected state as text, and how much of it fit.
type Rendered struct {
	Text   string
	Facts  int // facts in the state
	Shown  int // facts listed in Text; the others are counted in it
	Tokens int // tier.TokensOfBytes(len(Text)), at most the budget
}

// Render returns s as the text injected into Claude Code's context,
// within budget tokens (at least MinBudget; 0 means DefaultBudget). db
// names the store in the `strata resume` command it gives. The rendering
// is canonical — the same state gives the same bytes — and nothing is cut
// silently. The task and the user's newest request come first, always
// (each cut to 600 bytes); then the classes in the order of sections —
// standing failures, open calls, plan items, rejections and constraints,
// earlier requests, artifacts, fixed failures — each newest first, every
// fact that fits in what the budget has left, saying how many more it
// holds ("… and 3 more standing failures not shown"). A fact's text over
// 240 bytes is cut, saying how many bytes are left out; a failure shows
// the first 6 lines of its output.
func (s *State) Render(db string, budget int) Rendered {
	if budget <= 0 {
		budget = DefaultBudget
	}
	budget = max(budget, MinBudget)
	var b strings.Builder
	b.WriteString("# strata: the state at Claude Code's compaction\n")
	fmt.Fprintf(&b, "Computed by strata from the raw transcript, not from a summary: what session %s implies at seq %d, where Claude Code compacted it. Every line below is a fact of the raw log; none is a summarizer's words.\n", oneLine(s.Session), s.Boundary)
	resume := fmt.Sprintf("strata resume --db %s --session %s", shell.Quote(db), shell.Quote(s.Session))
	if s.Marker != 0 {
		fmt.Fprintf(&b, "Every fact, unabridged: `%s --marker %d` (marker %d, sha256 %s) prints the whole context, %d bytes: the summary nodes with every fact as their claims, then the %d raw events after the boundary.\n",
			resume, s.Marker, s.Marker, s.SHA256, s.Bytes, s.Events)
	} else {
		fmt.Fprintf(&b, "No marker stands at the boundary; `%s` (sha256 %s) prints the whole context strata holds, %d bytes.\n", resume, s.SHA256, s.Bytes)
	}
	b.WriteString(s.requestBlock())
	var secs []section
	for _, sec := range s.sections() {
		if len(sec.facts)+sec.uncounted > 0 || sec.always {
			secs = append(secs, sec)
		}
	}
	total := min(len(s.Claims.Requests), 2)
	for _, sec := range secs {
		total += len(sec.facts) + sec.uncounted
	}
	// Room for the heading and a count line of every section, always.
	reserve := 0
	for _, sec := range secs {
		reserve += len(heading(sec)) + len(moreLine(sec, len(sec.facts)+sec.uncounted))
	}
	room := 4*budget - b.Len() - reserve
	shown := min(len(s.Claims.Requests), 2)
	for _, sec := range secs {
		b.WriteString(heading(sec))
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
		b.WriteString(moreLine(sec, len(sec.facts)-n+sec.uncounted))
		shown += n
	}
	text := b.String()
	return Rendered{Text: text, Facts: total, Shown: shown, Tokens: tier.TokensOfBytes(len(text))}
}

func heading(sec section) string {
	return fmt.Sprintf("\n## %s: %d\n", sec.title, len(sec.facts)+sec.uncounted)
}

// moreLine counts the facts of sec not shown, "" when there are none.
func moreLine(sec section, n int) string {
	if n == 0 {
		return ""
	}
	noun := sec.noun
	if n != 1 {
		noun += "s"
	}
	return fmt.Sprintf("… and %d more %s not shown\n", n, noun)
}
