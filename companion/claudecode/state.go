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

// MinBudget is the smallest budget: the heading, the five section lines
// and the count of what is not shown always fit in it.
const MinBudget = 256

// maxFactText bounds the text of one fact in the injected state (a
// failed call's output, a rejection's reason): longer ones are cut and
// say how many bytes are left out; the resumed context holds them whole.
const maxFactText = 240

// maxSubjectBytes bounds what a call was about (State.Subjects) in the
// injected state, apart from its text: a command is named whole up to it.
const maxSubjectBytes = 200

// State is the state the raw log of a session implies at a boundary —
// what the hook injects after Claude Code compacts: every call open at
// the boundary (UNRESOLVED), every failed call, every disposition
// (rejected, failed, superseded, succeeded after a failure) with its
// reason, every active constraint, every artifact. It is computed from the
// raw events 1..Boundary by the ledger's rules (tier.RequiredBuilder),
// never from a summary.
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
	// Claims hold the facts, each list newest first. Resolved and
	// withdrawn constraints are left out: they are no state.
	Claims tier.Claims
	// Subjects name what each failed or open call was about, by its id:
	// the command, file, pattern or URL of its input (callSubjects), so
	// that a failure whose output says nothing of it — a tool use denied
	// — still says what it was.
	Subjects map[string]string
}

// computeState returns the state session's raw log implies at seq
// boundary.
func computeState(s *store.Snapshot, session string, boundary uint64) (*State, error) {
	st := &State{Session: session, Boundary: boundary}
	if boundary == 0 {
		return st, nil
	}
	b := tier.NewRequiredBuilder(nil)
	subjects := map[string]string{}
	if err := s.Events(session, 1, boundary, func(e tier.Event) error {
		if e.Kind == tier.KindToolCall {
			if sub := callSubject(e.Text); sub != "" {
				subjects[e.ID] = sub
			}
		}
		return b.Add(e)
	}); err != nil {
		return nil, err
	}
	st.Subjects = map[string]string{}
	req := b.Required()
	c := tier.Claims{Unresolved: req.Unresolved, Failures: req.Failures, Dispositions: req.Dispositions, Artifacts: req.Artifacts}
	for _, x := range req.Constraints {
		if !x.Withdrawn {
			c.Constraints = append(c.Constraints, x)
		}
	}
	for _, o := range c.Unresolved {
		if sub := subjects[o.ID]; sub != "" {
			st.Subjects[o.ID] = sub
		}
	}
	for _, r := range c.Failures {
		if sub := subjects[r.ID]; sub != "" {
			st.Subjects[r.ID] = sub
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

// section is one class of facts as the injected state lists them.
type section struct {
	title string // the heading, before ": N"
	noun  string // what "… and N more NOUNs not shown" counts, singular
	lines []string
}

// sections returns the facts of s by class, each line a claim line as a
// resumed context renders it (checkpoint.ClaimLines), its text cut to
// maxFactText.
func (s *State) sections() []section {
	c := s.Claims
	failures := clipped(c.Failures, func(r *tier.Resolution) *string { return &r.Reason })
	unresolved := slices.Clone(c.Unresolved)
	for i := range failures {
		failures[i].Name = s.about(failures[i].ID, failures[i].Name)
	}
	for i := range unresolved {
		unresolved[i].Name = s.about(unresolved[i].ID, unresolved[i].Name)
	}
	disps := clipped(c.Dispositions, func(d *tier.Disposition) *string { return &d.Reason })
	constraints := clipped(c.Constraints, func(x *tier.Constraint) *string { return &x.Text })
	artifacts := clipped(c.Artifacts, func(a *tier.Artifact) *string { return &a.Text })
	return []section{
		{"calls open at the boundary, no result (UNRESOLVED)", "open call", checkpoint.ClaimLines(&tier.Claims{Unresolved: unresolved})},
		{"failed tool calls, newest first", "failed tool call", checkpoint.ClaimLines(&tier.Claims{Failures: failures})},
		{"rejected, failed or superseded items, newest first", "item", checkpoint.ClaimLines(&tier.Claims{Dispositions: disps})},
		{"active constraints, newest first", "constraint", checkpoint.ClaimLines(&tier.Claims{Constraints: constraints})},
		{"artifacts (files written), newest first", "artifact", checkpoint.ClaimLines(&tier.Claims{Artifacts: artifacts})},
	}
}

// about returns a call's tool name with what the call was about, "Bash:
// make build", its subject cut to maxSubjectBytes; the name alone when its
// input names nothing.
func (s *State) about(id, name string) string {
	sub := s.Subjects[id]
	if sub == "" {
		return name
	}
	return name + ": " + oneLine(tier.ClipTo(sub, maxSubjectBytes))
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
// silently: the classes in the order above, each lists its facts newest
// first, every one that fits in what the budget has left, and says how
// many more it holds ("… and 3 more failed tool calls not shown").
// A fact's text over 240 bytes is cut, saying how many bytes are left out.
func (s *State) Render(db string, budget int) Rendered {
	if budget <= 0 {
		budget = DefaultBudget
	}
	budget = max(budget, MinBudget)
	var b strings.Builder
	b.WriteString("# strata: the state at Claude Code's compaction\n")
	fmt.Fprintf(&b, "Computed by strata from the raw transcript, not from a summary: what session %s implies at seq %d, where Claude Code compacted it.\n", oneLine(s.Session), s.Boundary)
	resume := fmt.Sprintf("strata resume --db %s --session %s", shell.Quote(db), shell.Quote(s.Session))
	if s.Marker != 0 {
		fmt.Fprintf(&b, "Every fact, unabridged: `%s --marker %d` (marker %d, sha256 %s) prints the whole context, %d bytes: the summary nodes with every fact as their claims, then the %d raw events after the boundary.\n",
			resume, s.Marker, s.Marker, s.SHA256, s.Bytes, s.Events)
	} else {
		fmt.Fprintf(&b, "No marker stands at the boundary; `%s` (sha256 %s) prints the whole context strata holds, %d bytes.\n", resume, s.SHA256, s.Bytes)
	}
	secs := s.sections()
	total := 0
	for _, sec := range secs {
		total += len(sec.lines)
	}
	// Room for the heading and a count line of every section, always.
	reserve := 0
	for _, sec := range secs {
		reserve += len(heading(sec)) + len(moreLine(sec, len(sec.lines)))
	}
	room := 4*budget - b.Len() - reserve
	shown := 0
	for _, sec := range secs {
		b.WriteString(heading(sec))
		n := 0
		for _, l := range sec.lines {
			if len(l)+1 > room {
				continue // counted; a shorter fact after it may fit
			}
			b.WriteString(l)
			b.WriteByte('\n')
			room -= len(l) + 1
			n++
		}
		b.WriteString(moreLine(sec, len(sec.lines)-n))
		shown += n
	}
	text := b.String()
	return Rendered{Text: text, Facts: total, Shown: shown, Tokens: tier.TokensOfBytes(len(text))}
}

func heading(sec section) string {
	return fmt.Sprintf("\n## %s: %d\n", sec.title, len(sec.lines))
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
