package tier

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Depth is a node's tier: 1 for a turn summary (L1), 2 for a session digest
// (L2), and so on. The raw log is depth 0 and has no nodes.
type Depth int

// String returns "L1", "L2", ...
func (d Depth) String() string { return fmt.Sprintf("L%d", int(d)) }

// Claims is what a summary node asserts about the state at its boundary.
// Every list is kept sorted by id or key (see Normalize) so that a node
// encodes and renders the same way every time.
//
// A summarizer's claims are identities and states: which calls are open or
// were resolved, which items are rejected, failed or superseded, which
// constraints stand. Validation compares those. The texts a committed node
// carries — a constraint's wording, a disposition's reason, a tool's name —
// are the raw log's: the store commits Required.Claims() in place of the
// summarizer's claims once they are valid, so that no word of a claim line
// comes from the summarizer.
type Claims struct {
	Resolved     []Resolution  `msgpack:"r,omitempty" json:"resolved,omitempty"`   // calls the span resolved
	Unresolved   []Open        `msgpack:"u,omitempty" json:"unresolved,omitempty"` // open at the boundary: UNRESOLVED
	Failures     []Resolution  `msgpack:"f,omitempty" json:"failures,omitempty"`   // calls that failed in the span
	Dispositions []Disposition `msgpack:"d,omitempty" json:"dispositions,omitempty"`
	Constraints  []Constraint  `msgpack:"c,omitempty" json:"constraints,omitempty"`
	Artifacts    []Artifact    `msgpack:"a,omitempty" json:"artifacts,omitempty"`
	// Requests are the user's requests in the span, in their words (the
	// first and the newest, Required.Requests), and RequestsLeftOut how
	// many more the span holds.
	Requests        []Request `msgpack:"rq,omitempty" json:"requests,omitempty"`
	RequestsLeftOut int       `msgpack:"rl,omitempty" json:"requests_left_out,omitempty"`
	// Plan is the agent's plan at the boundary: the open items of the
	// newest plan call, which PlanAt names (0: no plan call up to the
	// boundary).
	Plan   []PlanItem `msgpack:"p,omitempty" json:"plan,omitempty"`
	PlanAt uint64     `msgpack:"pa,omitempty" json:"plan_at,omitempty"`
}

// Normalize sorts every list and removes exact duplicates.
func (c *Claims) Normalize() {
	sortResolutions(c.Resolved)
	sortResolutions(c.Failures)
	sortBy(c.Unresolved, func(o Open) string { return o.ID })
	sortBy(c.Dispositions, func(d Disposition) string { return d.Key })
	sortBy(c.Constraints, func(x Constraint) string { return x.Key })
	sortBy(c.Artifacts, func(a Artifact) string { return a.Key })
	slices.SortStableFunc(c.Requests, func(a, b Request) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.SortStableFunc(c.Plan, func(a, b PlanItem) int { return cmp.Compare(a.Index, b.Index) })
	c.Requests = slices.Compact(c.Requests)
	c.Plan = slices.Compact(c.Plan)
	c.Resolved = slices.Compact(c.Resolved)
	c.Failures = slices.Compact(c.Failures)
	c.Unresolved = slices.Compact(c.Unresolved)
	c.Dispositions = slices.Compact(c.Dispositions)
	c.Constraints = slices.Compact(c.Constraints)
	c.Artifacts = slices.Compact(c.Artifacts)
}

// Count returns the number of claims: one per entry of each list, one for
// a count of requests left out, one for a plan with no open item.
func (c *Claims) Count() int {
	n := len(c.Resolved) + len(c.Unresolved) + len(c.Failures) + len(c.Dispositions) + len(c.Constraints) + len(c.Artifacts) +
		len(c.Requests) + len(c.Plan)
	if c.RequestsLeftOut > 0 {
		n++
	}
	if c.PlanAt != 0 && len(c.Plan) == 0 {
		n++
	}
	return n
}

// Equal reports whether c and o claim the same, texts included (an empty
// list and a nil one are the same).
func (c *Claims) Equal(o *Claims) bool {
	return slices.Equal(c.Resolved, o.Resolved) && slices.Equal(c.Unresolved, o.Unresolved) &&
		slices.Equal(c.Failures, o.Failures) && slices.Equal(c.Dispositions, o.Dispositions) &&
		slices.Equal(c.Constraints, o.Constraints) && slices.Equal(c.Artifacts, o.Artifacts) &&
		slices.Equal(c.Requests, o.Requests) && c.RequestsLeftOut == o.RequestsLeftOut &&
		slices.Equal(c.Plan, o.Plan) && c.PlanAt == o.PlanAt
}

// sortResolutions sorts by id, then by the opening seq.
func sortResolutions(s []Resolution) {
	slices.SortStableFunc(s, func(a, b Resolution) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
}

func sortBy[V any](s []V, key func(V) string) {
	slices.SortStableFunc(s, func(a, b V) int { return strings.Compare(key(a), key(b)) })
}

// Required is the state that a raw span [From, To] implies at its boundary
// To, which a node covering the span must claim:
//
//   - Unresolved: every call, handle or process open at To (closure);
//   - Resolved: every invocation opened before From and resolved inside the
//     span — its id, the seq that opened it and whether it failed — so that
//     an earlier node's UNRESOLVED claim is not left standing (closure);
//   - Failures: every call or resource whose result failed ("ok": false)
//     inside the span, with the result's text (negative-fact retention);
//   - Dispositions: the final disposition of every key whose disposition
//     changed inside the span (negative-fact retention);
//   - Constraints: the final state — active with its text, or withdrawn — of
//     every constraint stated or withdrawn inside the span;
//   - Artifacts: every artifact recorded inside the span, as last recorded;
//   - Requests: the user's requests inside the span — every user event is
//     one — in their words, the first and the newest (MaxRequests), the
//     others counted in RequestsLeftOut;
//   - Plan: the open items of the newest plan call (PlanOf) up to To, and
//     PlanAt its seq — carried from before the span like the open calls
//     (closure), until a newer plan call replaces the list.
//
// Failures and resolutions name their target (CallTarget) where the call
// opened in the span or its Open carries one, and a failure followed by a
// success on the same target (SameTarget) inside the span is Fixed.
//
// It is computed from raw events only, never from other nodes' claims.
type Required struct {
	From, To   uint64
	Unresolved []Open
	Resolved   []Resolution
	// ResolvedInside lists every invocation the span resolved (Resolved
	// and those both opened and resolved inside it): a node may claim
	// these resolved, and nothing else.
	ResolvedInside []Resolution
	Failures       []Resolution
	Dispositions   []Disposition
	Constraints    []Constraint
	Artifacts      []Artifact
	Requests       []Request
	// RequestsLeftOut counts the requests of the span Requests leaves out.
	RequestsLeftOut int
	Plan            []PlanItem
	PlanAt          uint64
	// Successes lists, per target (SameTarget), the first successful
	// result in the span of a call on it: what fixes a failure before the
	// span (ExtendPrefix). Not a claim.
	Successes []Success
	// Rejections lists, in order, the seqs of the failed results in the
	// span that the user's rejection of their call made: a failed
	// tool_result followed at the next seq by a rejected event, as the
	// importers write a refused tool use. Kinds and seqs only, never a
	// text. Not a claim, nor a node's recorded fact: a state computed from
	// the raw events (store's StateAt) shows such a failure once, as the
	// rejection.
	Rejections []uint64
}

// Success is the first successful result of a call on a target in a
// span.
type Success struct {
	Key string `msgpack:"y" json:"key"` // SameTarget
	At  uint64 `msgpack:"a" json:"at"`
}

// Before is the state a span starts on: what is open at its first seq − 1,
// and the plan standing there (Required.Plan and PlanAt of the span
// before it).
type Before struct {
	Open   []Open
	Plan   []PlanItem
	PlanAt uint64
}

// ComputeRequired replays span (consecutive events, already accepted by the
// ledger) on top of the calls and resources open before it, and returns what
// a node covering the span must claim. An error means the events are not a
// valid continuation of openBefore: a damaged or inconsistent store.
func ComputeRequired(openBefore []Open, span []Event) (Required, error) {
	return ComputeRequiredAfter(Before{Open: openBefore}, span)
}

// ComputeRequiredAfter is ComputeRequired on top of the calls open and
// the plan standing before the span.
func ComputeRequiredAfter(before Before, span []Event) (Required, error) {
	if len(span) == 0 {
		return Required{}, fmt.Errorf("tier: empty span")
	}
	b := NewRequiredBuilderAfter(before)
	for i := range span {
		if err := b.Add(span[i]); err != nil {
			return Required{}, err
		}
	}
	return b.Required(), nil
}

// RequiredBuilder computes Required one event at a time, so that a long
// span need not be held in memory.
type RequiredBuilder struct {
	from, to uint64
	l        *Ledger
	disp     map[string]bool
	constr   map[string]bool
	art      map[string]bool
	resolved []Resolution      // in the order the span resolved them
	standing map[string][]int  // indexes in resolved of the failures on a SameTarget key not fixed in the span
	success  map[string]uint64 // the first success on a key in the span
	requests []Request
	plan     []PlanItem
	planAt   uint64
	// failedResult is the seq of the last event added when it was a
	// failed tool_result, else 0; rejections are those a rejected event
	// followed.
	failedResult uint64
	rejections   []uint64
}

// NewRequiredBuilder starts a span on top of the calls and resources open
// before it.
func NewRequiredBuilder(openBefore []Open) *RequiredBuilder {
	return NewRequiredBuilderAfter(Before{Open: openBefore})
}

// NewRequiredBuilderAfter starts a span on top of the calls open and the
// plan standing before it.
func NewRequiredBuilderAfter(before Before) *RequiredBuilder {
	b := &RequiredBuilder{l: NewLedger(), disp: map[string]bool{}, constr: map[string]bool{},
		art: map[string]bool{}, standing: map[string][]int{}, success: map[string]uint64{},
		plan: slices.Clone(before.Plan), planAt: before.PlanAt}
	for _, o := range before.Open {
		b.l.Open[o.ID] = o
	}
	return b
}

// Add applies the span's next event (a copy: Add does not modify e).
func (b *RequiredBuilder) Add(e Event) error {
	if b.from == 0 {
		b.from = e.Seq
	} else if e.Seq != b.to+1 {
		return fmt.Errorf("tier: span not consecutive: seq %d after %d", e.Seq, b.to)
	}
	b.to = e.Seq
	// The builder holds only the open set from before the span; the
	// store's ledger already accepted these events against the rest.
	if _, ok := b.l.Constraints[e.Key]; e.Kind == KindWithdrawn && !ok {
		b.l.Constraints[e.Key] = Constraint{Key: e.Key} // stated before the span
	}
	if _, ok := b.l.Dispositions[e.Key]; e.Kind == KindToolResult && e.PriorFailure != 0 && !ok {
		b.l.Dispositions[e.Key] = Disposition{Key: e.Key, State: KindFailed, Seq: e.PriorFailure} // failed before it
	}
	if e.Kind == KindRejected && b.failedResult != 0 && b.failedResult == e.Seq-1 {
		b.rejections = append(b.rejections, b.failedResult)
	}
	b.failedResult = 0
	if e.Kind == KindToolResult && e.Failed {
		b.failedResult = e.Seq
	}
	var opened Open
	if e.Kind.Resolves() {
		opened = b.l.Open[e.ID]
	}
	if err := b.l.Apply(&e); err != nil {
		return err
	}
	switch {
	case e.Kind == KindToolCall:
		o := b.l.Open[e.ID]
		o.Target = CallTarget(e.Name, e.Text)
		b.l.Open[e.ID] = o
		if items, ok := PlanOf(&e); ok {
			b.plan, b.planAt = items, e.Seq
		}
	case e.Kind == KindUser:
		b.requests = append(b.requests, Request{Seq: e.Seq, Text: ClipTo(e.Text, MaxRequestBytes)})
	}
	switch {
	case e.Kind.Resolves():
		r := Resolution{ID: e.ID, Kind: opened.Kind, Name: opened.Name, Seq: e.Opener, At: e.Seq, Failed: e.Failed, Target: opened.Target}
		if e.Failed {
			r.Reason = e.Text
		}
		if k := SameTarget(r.Name, r.Target); k != "" && e.Kind == KindToolResult {
			if e.Failed {
				b.standing[k] = append(b.standing[k], len(b.resolved))
			} else {
				for _, i := range b.standing[k] {
					b.resolved[i].Fixed = e.Seq
				}
				delete(b.standing, k)
				if _, ok := b.success[k]; !ok {
					b.success[k] = e.Seq
				}
			}
		}
		b.resolved = append(b.resolved, r)
		if e.Kind == KindToolResult && e.Key != "" && (e.Failed || e.PriorFailure != 0) {
			b.disp[e.Key] = true
		}
	case e.Kind.IsDisposition():
		b.disp[e.Key] = true
	case e.Kind == KindConstraint || e.Kind == KindWithdrawn:
		b.constr[e.Key] = true
	case e.Kind == KindArtifact:
		b.art[e.Key] = true
	}
	return nil
}

// Open returns what is open after the events added so far.
func (b *RequiredBuilder) Open() []Open { return b.l.OpenList() }

// Required returns what a node over the events added so far must claim.
func (b *RequiredBuilder) Required() Required {
	r := Required{From: b.from, To: b.to, Unresolved: b.l.OpenList(), Plan: slices.Clone(b.plan), PlanAt: b.planAt}
	r.Requests, r.RequestsLeftOut = keepRequests(slices.Clone(b.requests))
	r.Rejections = slices.Clone(b.rejections)
	for _, k := range sortedKeys2(b.success) {
		r.Successes = append(r.Successes, Success{Key: k, At: b.success[k]})
	}
	for _, x := range b.resolved {
		if x.Failed {
			r.Failures = append(r.Failures, x)
		}
		x.Reason, x.Fixed = "", 0 // a resolution says how it ended; the failure says why, and whether it stands
		r.ResolvedInside = append(r.ResolvedInside, x)
		if x.Seq < b.from {
			r.Resolved = append(r.Resolved, x)
		}
	}
	sortResolutions(r.Resolved)
	sortResolutions(r.ResolvedInside)
	sortResolutions(r.Failures)
	for _, k := range sortedKeys(b.disp) {
		r.Dispositions = append(r.Dispositions, b.l.Dispositions[k])
	}
	for _, k := range sortedKeys(b.constr) {
		c, ok := b.l.Constraints[k]
		if !ok {
			c = Constraint{Key: k, Withdrawn: true}
		}
		r.Constraints = append(r.Constraints, c)
	}
	for _, k := range sortedKeys(b.art) {
		r.Artifacts = append(r.Artifacts, b.l.Artifacts[k])
	}
	return r
}

func sortedKeys2(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Claims returns claims that carry r exactly, with the raw log's texts:
// what an extractive summarizer emits, and what the store commits for a
// valid summary.
func (r *Required) Claims() Claims {
	c := Claims{
		Resolved:     slices.Clone(r.Resolved),
		Unresolved:   slices.Clone(r.Unresolved),
		Failures:     slices.Clone(r.Failures),
		Dispositions: slices.Clone(r.Dispositions),
		Constraints:  slices.Clone(r.Constraints),
		Artifacts:    slices.Clone(r.Artifacts),
		Requests:     slices.Clone(r.Requests),
		Plan:         slices.Clone(r.Plan),

		RequestsLeftOut: r.RequestsLeftOut,
		PlanAt:          r.PlanAt,
	}
	c.Normalize()
	return c
}

// Count returns the number of required facts.
func (r *Required) Count() int {
	return len(r.Unresolved) + len(r.Resolved) + len(r.Failures) + len(r.Dispositions) + len(r.Constraints) + len(r.Artifacts) +
		len(r.Requests) + len(r.Plan)
}

// Node is a summary at depth ≥ 1 covering the raw span [From, To] and, for
// depth ≥ 2, a run of depth−1 children.
type Node struct {
	ID           uint64   `json:"id"`
	Depth        Depth    `json:"depth"`
	From         uint64   `json:"from"`
	To           uint64   `json:"to"`
	Children     []uint64 `json:"children,omitempty"`
	Narrative    string   `json:"narrative"`
	Claims       Claims   `json:"claims"`
	FrameVersion uint64   `json:"frame_version"` // the frame version it was planned under
	Summarizer   string   `json:"summarizer"`
	Tokens       int      `json:"tokens"` // estimated tokens of its rendering
	Budget       int      `json:"budget"` // the token budget it was asked to fit
	SpanHash     []byte   `json:"-"`      // sha256 of the raw span's stored records

	// Parent is the node that folded this one in, and SupersededBy the node
	// that re-compacted it; 0 while the node is a root.
	Parent       uint64 `json:"parent,omitempty"`
	SupersededBy uint64 `json:"superseded_by,omitempty"`

	// Unchecked says the node was committed without validation
	// (store.DB.CommitUnchecked): its claims are the summarizer's, and its
	// marker promises nothing.
	Unchecked bool `json:"unchecked,omitempty"`
	// Repairs is the audit id of the refused attempt whose missing claims
	// this node's claims, computed from the raw span, make good (a repair
	// at compaction time); 0 for none.
	Repairs uint64 `json:"repairs,omitempty"`
}

// IsRoot reports whether n is neither covered by a parent nor superseded.
func (n *Node) IsRoot() bool { return n.Parent == 0 && n.SupersededBy == 0 }

// Status is the state of a recovery marker or a raw checkpoint: valid until
// a frame change makes it stale. The marker and checkpoint packages name it
// marker.Status and checkpoint.Status.
type Status uint8

// Statuses. Stored on disk: never renumber.
const (
	StatusValid   Status = 1
	StatusInvalid Status = 2
)

// String returns "valid" or "invalid".
func (s Status) String() string {
	switch s {
	case StatusValid:
		return "valid"
	case StatusInvalid:
		return "invalid"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalJSON encodes s as its name.
func (s Status) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// Equal reports whether r and o require the same: the same span, open set,
// resolutions (both lists), failures, dispositions, constraints and artifacts, in
// the same order (an empty list and a nil one are the same).
func (r *Required) Equal(o *Required) bool {
	return r.From == o.From && r.To == o.To && slices.Equal(r.Unresolved, o.Unresolved) &&
		slices.Equal(r.Resolved, o.Resolved) && slices.Equal(r.ResolvedInside, o.ResolvedInside) &&
		slices.Equal(r.Failures, o.Failures) &&
		slices.Equal(r.Dispositions, o.Dispositions) && slices.Equal(r.Constraints, o.Constraints) &&
		slices.Equal(r.Artifacts, o.Artifacts) && slices.Equal(r.Requests, o.Requests) &&
		r.RequestsLeftOut == o.RequestsLeftOut && slices.Equal(r.Plan, o.Plan) && r.PlanAt == o.PlanAt &&
		slices.Equal(r.Successes, o.Successes)
}

// ExtendPrefix returns the Required of the prefix span 1..next.To, composed
// from two mechanical records instead of the raw events of the whole prefix:
// prefix, the Required of the span 1..next.From−1 as computed from its raw
// events when a node over it was committed (its ResolvedInside is not used),
// and next, the Required of the span right after it, computed from its raw
// events on top of the calls open at its start. The open set at the end is
// next's; the failures are both spans'; a disposition, constraint or
// artifact takes next's state where next changed it and prefix's otherwise;
// and nothing is open before seq 1, so nothing is Resolved.
//
// ResolvedInside is what a node over the prefix may claim resolved: the
// invocations claimedResolved (what the node over 1..next.From−1 claims,
// validated when it was committed) and next's. It is a subset of the exact
// set — an invocation resolved deep in the prefix that no node claimed is not
// in it — and equal to it when claimedResolved is prefix's exact
// ResolvedInside.
func ExtendPrefix(prefix *Required, claimedResolved []Resolution, next *Required) (Required, error) {
	if prefix.From != 1 || next.From != prefix.To+1 || next.To < next.From {
		return Required{}, fmt.Errorf("tier: cannot extend the span %d..%d with %d..%d", prefix.From, prefix.To, next.From, next.To)
	}
	r := Required{From: 1, To: next.To, Unresolved: slices.Clone(next.Unresolved)}
	r.ResolvedInside = append(slices.Clone(claimedResolved), next.ResolvedInside...)
	sortResolutions(r.ResolvedInside)
	r.ResolvedInside = slices.Compact(r.ResolvedInside)
	r.Failures = slices.Clone(prefix.Failures)
	for i := range r.Failures {
		// A failure the prefix left standing is fixed by the first
		// success on its target after it: the next span's.
		f := &r.Failures[i]
		if f.Fixed != 0 {
			continue
		}
		k := SameTarget(f.Name, f.Target)
		if j := slices.IndexFunc(next.Successes, func(s Success) bool { return s.Key == k }); k != "" && j >= 0 {
			f.Fixed = next.Successes[j].At
		}
	}
	r.Failures = append(r.Failures, next.Failures...)
	sortResolutions(r.Failures)
	r.Successes = mergeByKey(prefix.Successes, next.Successes, func(s Success) string { return s.Key })
	for i := range r.Successes {
		// The first success is the prefix's where it has one.
		if j := slices.IndexFunc(prefix.Successes, func(s Success) bool { return s.Key == r.Successes[i].Key }); j >= 0 {
			r.Successes[i] = prefix.Successes[j]
		}
	}
	r.Requests, r.RequestsLeftOut = keepRequests(append(slices.Clone(prefix.Requests), next.Requests...))
	r.RequestsLeftOut += prefix.RequestsLeftOut + next.RequestsLeftOut
	r.Plan, r.PlanAt = slices.Clone(prefix.Plan), prefix.PlanAt
	if next.PlanAt != 0 {
		r.Plan, r.PlanAt = slices.Clone(next.Plan), next.PlanAt
	}
	r.Dispositions = mergeByKey(prefix.Dispositions, next.Dispositions, func(d Disposition) string { return d.Key })
	r.Constraints = mergeByKey(prefix.Constraints, next.Constraints, func(c Constraint) string { return c.Key })
	r.Artifacts = mergeByKey(prefix.Artifacts, next.Artifacts, func(a Artifact) string { return a.Key })
	return r, nil
}

// mergeByKey returns the entries of a and b, one per key — b's where both
// have it — sorted by key.
func mergeByKey[V any](a, b []V, key func(V) string) []V {
	m := make(map[string]V, len(a)+len(b))
	for _, v := range a {
		m[key(v)] = v
	}
	for _, v := range b {
		m[key(v)] = v
	}
	return sortedValues(m, key)
}
