package tier

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Open is a call, handle or process that has been opened and not yet
// resolved.
type Open struct {
	ID   string `msgpack:"i" json:"id"`
	Kind Kind   `msgpack:"k" json:"kind"` // KindToolCall or KindOpen
	Name string `msgpack:"n,omitempty" json:"name,omitempty"`
	Seq  uint64 `msgpack:"q,omitempty" json:"seq,omitempty"` // the opening event; 0 in a claim that does not say
	// Target is what the call works on (CallTarget), in a span's required
	// state and the claims made of it; the ledger's entries have none.
	Target string `msgpack:"t,omitempty" json:"target,omitempty"`
}

// Disposition is a fact about an item's outcome: its final state
// (KindRejected, KindFailed, KindSuperseded, or StateSucceeded for a key
// whose tool_result succeeded after it had failed), why, and by what.
type Disposition struct {
	Key    string `msgpack:"y" json:"key"`
	State  Kind   `msgpack:"s" json:"state"`
	Reason string `msgpack:"r,omitempty" json:"reason,omitempty"`
	By     string `msgpack:"b,omitempty" json:"by,omitempty"`
	Seq    uint64 `msgpack:"q,omitempty" json:"seq,omitempty"`
	// FailedAt is the seq of the failure a StateSucceeded key had.
	FailedAt uint64 `msgpack:"fa,omitempty" json:"failed_at,omitempty"`
}

// MarshalJSON encodes d with its state by name (StateName).
func (d Disposition) MarshalJSON() ([]byte, error) {
	if !d.State.IsDisposition() && d.State != StateSucceeded {
		return nil, ErrUnknownKind
	}
	type plain Disposition
	return json.Marshal(struct {
		State string `json:"state"`
		plain
	}{StateName(d.State), plain(d)})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (d *Disposition) UnmarshalJSON(b []byte) error {
	type plain Disposition
	var w struct {
		State string `json:"state"`
		plain
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = Disposition(w.plain)
	if w.State == StateName(StateSucceeded) {
		d.State = StateSucceeded
		return nil
	}
	k, err := ParseKind(w.State)
	if err != nil || !k.IsDisposition() {
		return ErrUnknownKind
	}
	d.State = k
	return nil
}

// StateSucceeded is the disposition state of a key whose tool_result
// succeeded ("ok": true) after the key had failed: the failure is no longer
// its state, and the disposition keeps it in FailedAt and FailedReason. It is
// the tool_result kind, since only a tool_result makes it; it is never the
// kind of a disposition event.
const StateSucceeded = KindToolResult

// StateName returns the name of a disposition state: the kind's name, or
// "succeeded" for StateSucceeded.
func StateName(k Kind) string {
	if k == StateSucceeded {
		return "succeeded"
	}
	return k.String()
}

// Resolution is a call, handle or process resolved inside a span: which
// invocation it was (ID and the seq that opened it, since an id may be
// opened again once resolved), how it ended, and, for a failure, the reason
// its result gave.
type Resolution struct {
	ID     string `msgpack:"i" json:"id"`
	Kind   Kind   `msgpack:"k" json:"kind"` // what opened it: KindToolCall or KindOpen
	Name   string `msgpack:"n,omitempty" json:"name,omitempty"`
	Seq    uint64 `msgpack:"q,omitempty" json:"seq,omitempty"` // the opening event; 0 in a claim that does not say
	At     uint64 `msgpack:"a,omitempty" json:"at,omitempty"`  // the resolving event
	Failed bool   `msgpack:"f,omitempty" json:"failed,omitempty"`
	Reason string `msgpack:"r,omitempty" json:"reason,omitempty"` // a failure's text
	// Target is what the call worked on, from its arguments (CallTarget):
	// the command it ran, the file it wrote. "" for a call that names
	// none, or one opened before the span the claim is of.
	Target string `msgpack:"t,omitempty" json:"target,omitempty"`
	// Fixed is, on a failure, the seq of the first successful result after
	// it of a call on the same target (SameTarget) within the span the
	// claim is of: the failure no longer stands. 0 while it stands.
	Fixed uint64 `msgpack:"fx,omitempty" json:"fixed,omitempty"`
}

// Matches reports whether claim names the invocation r: the same id, and
// the same opening seq unless the claim gives none.
func (r Resolution) Matches(claim Resolution) bool {
	return claim.ID == r.ID && (claim.Seq == 0 || claim.Seq == r.Seq)
}

// Constraint is a user constraint. In the ledger every Constraint is active;
// in claims, Withdrawn says that the constraint no longer applies.
type Constraint struct {
	Key       string `msgpack:"y" json:"key"`
	Text      string `msgpack:"x,omitempty" json:"text,omitempty"`
	Withdrawn bool   `msgpack:"w,omitempty" json:"withdrawn,omitempty"`
	Seq       uint64 `msgpack:"q,omitempty" json:"seq,omitempty"`
}

// Artifact is something the agent produced: a file or an object.
type Artifact struct {
	Key  string `msgpack:"y" json:"key"`
	Text string `msgpack:"x,omitempty" json:"text,omitempty"`
	Seq  uint64 `msgpack:"q,omitempty" json:"seq,omitempty"`
}

// Class names a class of ledger entries; each is its own bucket in the store
// and its own reason class when a marker is refused.
type Class uint8

// Ledger classes.
const (
	ClassOpen        Class = 1
	ClassDisposition Class = 2
	ClassConstraint  Class = 3
	ClassArtifact    Class = 4
)

// Ref names one ledger entry: a class and an id or key.
type Ref struct {
	Class Class
	Name  string
}

// Refs returns the ledger entries that applying e reads or writes. The store
// loads just these before Apply, so that an append costs O(events), not
// O(history).
func (e *Event) Refs() []Ref {
	switch {
	case e.Kind.Opens():
		return []Ref{{ClassOpen, e.ID}}
	case e.Kind == KindToolResult && e.Key != "":
		return []Ref{{ClassOpen, e.ID}, {ClassDisposition, e.Key}}
	case e.Kind.Resolves():
		return []Ref{{ClassOpen, e.ID}}
	case e.Kind == KindConstraint || e.Kind == KindWithdrawn:
		return []Ref{{ClassConstraint, e.Key}}
	case e.Kind.IsDisposition():
		return []Ref{{ClassDisposition, e.Key}}
	case e.Kind == KindArtifact:
		return []Ref{{ClassArtifact, e.Key}}
	}
	return nil
}

// Ledger is the state that the raw log implies: open resources,
// dispositions, active constraints and artifacts, each keyed by id or key.
// A Ledger may hold only some entries (the store loads the ones an append
// refers to); Apply needs exactly the entries that the event's Refs name.
// A zero Ledger is empty: Apply makes its maps when it first writes one, so
// that applying events that name no entry costs no allocation.
type Ledger struct {
	Open         map[string]Open
	Dispositions map[string]Disposition
	Constraints  map[string]Constraint
	Artifacts    map[string]Artifact
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{
		Open:         map[string]Open{},
		Dispositions: map[string]Disposition{},
		Constraints:  map[string]Constraint{},
		Artifacts:    map[string]Artifact{},
	}
}

// Apply checks e against the ledger and, if it is accepted, applies it. On
// error the ledger is unchanged and the error is an *EventError. On a
// tool_result or close, Apply sets e.Opener to the seq that opened the id,
// and on a tool_result with a key e.PriorFailure.
func (l *Ledger) Apply(e *Event) error {
	switch {
	case e.Kind.Opens():
		if o, ok := l.Open[e.ID]; ok {
			return eventErr(e, ErrAlreadyOpen, fmt.Sprintf("opened at seq %d", o.Seq))
		}
		l.makeMaps()
		l.Open[e.ID] = Open{ID: e.ID, Kind: e.Kind, Name: e.Name, Seq: e.Seq}
	case e.Kind.Resolves():
		o, ok := l.Open[e.ID]
		if !ok {
			return eventErr(e, ErrNotOpen, "")
		}
		want := KindToolCall
		if e.Kind == KindClose {
			want = KindOpen
		}
		if o.Kind != want {
			return eventErr(e, ErrWrongResource, fmt.Sprintf("opened by %s at seq %d", o.Kind, o.Seq))
		}
		delete(l.Open, e.ID)
		e.Opener = o.Seq
		if e.Kind == KindToolResult && e.Key != "" {
			l.keyResult(e)
		}
	case e.Kind == KindConstraint:
		l.makeMaps()
		l.Constraints[e.Key] = Constraint{Key: e.Key, Text: e.Text, Seq: e.Seq}
	case e.Kind == KindWithdrawn:
		if _, ok := l.Constraints[e.Key]; !ok {
			return eventErr(e, ErrNotActive, "")
		}
		delete(l.Constraints, e.Key)
	case e.Kind.IsDisposition():
		l.makeMaps()
		l.Dispositions[e.Key] = Disposition{Key: e.Key, State: e.Kind, Reason: e.Text, By: e.By, Seq: e.Seq}
	case e.Kind == KindArtifact:
		l.makeMaps()
		l.Artifacts[e.Key] = Artifact{Key: e.Key, Text: e.Text, Seq: e.Seq}
	}
	return nil
}

// keyResult records the outcome of a tool_result with a key: a failure is
// the key's disposition failed; a success after a failure makes it
// StateSucceeded (Reason the result's text, FailedAt the failure's seq) and
// sets e.PriorFailure. A success changes no other state: a key the user
// rejected stays rejected however its tool later ran.
func (l *Ledger) keyResult(e *Event) {
	l.makeMaps()
	e.PriorFailure = 0
	if e.Failed {
		l.Dispositions[e.Key] = Disposition{Key: e.Key, State: KindFailed, Reason: e.Text, Seq: e.Seq}
		return
	}
	if d, ok := l.Dispositions[e.Key]; ok && d.State == KindFailed {
		e.PriorFailure = d.Seq
		l.Dispositions[e.Key] = Disposition{Key: e.Key, State: StateSucceeded, Reason: e.Text, Seq: e.Seq, FailedAt: d.Seq}
	}
}

// makeMaps makes the maps a zero Ledger lacks.
func (l *Ledger) makeMaps() {
	if l.Open == nil {
		l.Open = map[string]Open{}
	}
	if l.Dispositions == nil {
		l.Dispositions = map[string]Disposition{}
	}
	if l.Constraints == nil {
		l.Constraints = map[string]Constraint{}
	}
	if l.Artifacts == nil {
		l.Artifacts = map[string]Artifact{}
	}
}

// OpenList returns the open entries sorted by id.
func (l *Ledger) OpenList() []Open { return sortedValues(l.Open, func(o Open) string { return o.ID }) }

// DispositionList returns the dispositions sorted by key.
func (l *Ledger) DispositionList() []Disposition {
	return sortedValues(l.Dispositions, func(d Disposition) string { return d.Key })
}

// ConstraintList returns the active constraints sorted by key.
func (l *Ledger) ConstraintList() []Constraint {
	return sortedValues(l.Constraints, func(c Constraint) string { return c.Key })
}

// ArtifactList returns the artifacts sorted by key.
func (l *Ledger) ArtifactList() []Artifact {
	return sortedValues(l.Artifacts, func(a Artifact) string { return a.Key })
}

func sortedValues[V any](m map[string]V, key func(V) string) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b V) int { return strings.Compare(key(a), key(b)) })
	return out
}

// Diff returns one line per entry in which l and o differ, in a stable
// order; none means the ledgers are equal.
func (l *Ledger) Diff(o *Ledger) []string {
	var out []string
	out = append(out, diffMap("open", l.Open, o.Open)...)
	out = append(out, diffMap("disposition", l.Dispositions, o.Dispositions)...)
	out = append(out, diffMap("constraint", l.Constraints, o.Constraints)...)
	out = append(out, diffMap("artifact", l.Artifacts, o.Artifacts)...)
	return out
}

func diffMap[V comparable](class string, a, b map[string]V) []string {
	var out []string
	for k, va := range a {
		vb, ok := b[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %q: only in the first", class, k))
		case va != vb:
			out = append(out, fmt.Sprintf("%s %q: %+v != %+v", class, k, va, vb))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s %q: only in the second", class, k))
		}
	}
	slices.Sort(out)
	return out
}
