package companion

import (
	"fmt"
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
const MinBudget = checkpoint.MinStateBudget

// State is the state the raw log of a session implies at a boundary —
// what the hook injects after the agent compacts: the session's task
// and the user's requests, every failure by what failed and whether it
// still stands, every call open at the boundary (UNRESOLVED), the open
// items of the agent's plan, every disposition (rejected, failed,
// superseded, succeeded after a failure) with its reason, every active
// constraint, every artifact. It is computed from the raw events
// 1..Boundary by the ledger's rules (tier.RequiredBuilder), never from a
// summary.
type State struct {
	// Agent is the agent the state is injected into, by its title
	// ("Claude Code").
	Agent   string
	Session string
	// Boundary is the seq the facts hold at: the last event before the
	// agent's record of its compaction.
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
	// Rejected are the seqs of the failed results that are the user's
	// rejections of their calls (checkpoint.State).
	Rejected []uint64
}

// computeState returns the state session's raw log implies at seq
// boundary.
func computeState(s *store.Snapshot, session string, boundary uint64) (*State, error) {
	st := &State{Session: session, Boundary: boundary}
	if boundary == 0 {
		return st, nil
	}
	c, err := s.StateAt(session, boundary)
	if err != nil {
		return nil, err
	}
	st.Claims, st.Rejected = c.Claims, c.Rejected
	return st, nil
}

// Rendered is the injected state as text, and how much of it fit.
type Rendered struct {
	Text   string
	Facts  int // facts in the state
	Shown  int // facts listed in Text; the others are counted in it
	Tokens int // tier.TokensOfBytes(len(Text)), at most the budget
}

// Render returns s as the text injected into the agent's context,
// within budget tokens (at least MinBudget; 0 means DefaultBudget). db
// names the store in the `strata resume` command it gives. Below its
// heading, the state is fitted to the budget by checkpoint.FitState, the
// rule `strata resume --budget` shares: the task and the newest request
// always, then standing failures, open calls, plan items, rejections and
// constraints, earlier requests, artifacts and fixed failures, what does
// not fit counted.
func (s *State) Render(db string, budget int) Rendered {
	if budget <= 0 {
		budget = DefaultBudget
	}
	budget = max(budget, MinBudget)
	var b strings.Builder
	fmt.Fprintf(&b, "# strata: the state at %s's compaction\n", s.Agent)
	fmt.Fprintf(&b, "Computed by strata from the raw transcript, not from a summary: what session %s implies at seq %d, where %s compacted it. Every line below is a fact of the raw log; none is a summarizer's words.\n", oneLine(s.Session), s.Boundary, s.Agent)
	resume := fmt.Sprintf("strata resume --db %s --session %s", shell.Quote(db), shell.Quote(s.Session))
	if s.Marker != 0 {
		fmt.Fprintf(&b, "Every fact, unabridged: `%s --marker %d` (marker %d, sha256 %s) prints the whole context, %d bytes: the summary nodes with every fact as their claims, then the %s after the boundary.\n",
			resume, s.Marker, s.Marker, s.SHA256, s.Bytes, rawEvents(s.Events))
	} else {
		fmt.Fprintf(&b, "No marker stands at the boundary; `%s` (sha256 %s) prints the whole context strata holds, %d bytes.\n", resume, s.SHA256, s.Bytes)
	}
	f := checkpoint.FitState(b.String(), &checkpoint.State{Claims: s.Claims, Rejected: s.Rejected}, budget)
	return Rendered{Text: f.Text, Facts: f.Facts, Shown: f.Shown, Tokens: f.Tokens}
}

// rawEvents counts n raw events in words: "1 raw event", "3 raw events".
func rawEvents(n int) string {
	if n == 1 {
		return "1 raw event"
	}
	return fmt.Sprintf("%d raw events", n)
}
