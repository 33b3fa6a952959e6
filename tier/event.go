package tier

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Kind is the kind of a raw event. The zero Kind is invalid.
type Kind uint8

// The event kinds of docs/events.md. Their numeric values are stored
// on disk: never renumber, only append.
const (
	KindUser       Kind = 1  // a user message; starts a new turn unless the event has a turn
	KindAssistant  Kind = 2  // an assistant message
	KindSystem     Kind = 3  // a system message
	KindToolCall   Kind = 4  // opens call ID (Name = tool, Text = arguments)
	KindToolResult Kind = 5  // resolves call ID; with a Key also records its outcome for Key
	KindOpen       Kind = 6  // opens resource ID (Name = file, process, ...)
	KindClose      Kind = 7  // closes resource ID
	KindConstraint Kind = 8  // a user constraint Key, active until withdrawn
	KindWithdrawn  Kind = 9  // withdraws constraint Key
	KindRejected   Kind = 10 // disposition of Key: rejected (Text = reason)
	KindFailed     Kind = 11 // disposition of Key: failed
	KindSuperseded Kind = 12 // disposition of Key: superseded (By = the replacing key)
	KindArtifact   Kind = 13 // something the agent produced; Key = path or name
	maxKind             = KindArtifact
)

var kindNames = [...]string{
	KindUser:       "user",
	KindAssistant:  "assistant",
	KindSystem:     "system",
	KindToolCall:   "tool_call",
	KindToolResult: "tool_result",
	KindOpen:       "open",
	KindClose:      "close",
	KindConstraint: "constraint",
	KindWithdrawn:  "withdrawn",
	KindRejected:   "rejected",
	KindFailed:     "failed",
	KindSuperseded: "superseded",
	KindArtifact:   "artifact",
}

// Kinds lists every valid kind in numeric order.
func Kinds() []Kind {
	ks := make([]Kind, 0, maxKind)
	for k := Kind(1); k <= maxKind; k++ {
		ks = append(ks, k)
	}
	return ks
}

// String returns the kind's name in the event format ("tool_call").
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return k >= 1 && k <= maxKind }

// ParseKind returns the kind named s, or ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	for k := Kind(1); k <= maxKind; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, ErrUnknownKind
}

// Opens reports whether events of kind k open an id (tool_call, open).
func (k Kind) Opens() bool { return k == KindToolCall || k == KindOpen }

// Resolves reports whether events of kind k resolve an id (tool_result, close).
func (k Kind) Resolves() bool { return k == KindToolResult || k == KindClose }

// NeedsID reports whether events of kind k must carry an id.
func (k Kind) NeedsID() bool { return k.Opens() || k.Resolves() }

// NeedsKey reports whether events of kind k must carry a key.
func (k Kind) NeedsKey() bool { return k >= KindConstraint && k <= KindArtifact }

// IsDisposition reports whether k is a negative fact (rejected, failed,
// superseded).
func (k Kind) IsDisposition() bool { return k >= KindRejected && k <= KindSuperseded }

// Event is one raw record (L0). The store assigns Seq, Turn and Time where
// they are zero, Opener on events that resolve an id, and PriorFailure.
type Event struct {
	Seq    uint64 // 1, 2, 3… gapless per session
	Turn   uint64 // turn number; each user event starts one when absent
	Time   int64  // Unix nanoseconds
	Kind   Kind
	ID     string // the call or resource opened or resolved
	Key    string // the item a fact is about
	Name   string // the tool, or the resource kind
	Failed bool   // tool_result/close: the call or process failed ("ok": false)
	By     string // superseded: the key that replaces Key
	Text   string // content: message, arguments, output, reason
	// Ref is the id of the record of a source (a transcript's message or
	// line) the event was made from; the events made from one record share
	// it. Optional. The store refuses an append that carries a ref the
	// session holds already, so that a source imported again adds nothing
	// (it is not a ledger entry's Ref: those are what Refs returns).
	Ref string

	// Opener is the seq of the event that opened ID, set by the store on
	// tool_result and close events. It lets the ledger at an earlier seq be
	// recomputed from the raw events after it.
	Opener uint64
	// PriorFailure is, on a successful tool_result with a key, the seq of
	// the failure of that key it clears (the key's disposition becomes
	// StateSucceeded); 0 otherwise. The store sets it, as it sets Opener,
	// so that a span's facts follow from its own events.
	PriorFailure uint64
}

// The largest Seq and Turn an event may carry: 2^53. It is the largest
// integer every JSON reader holds exactly — those that read numbers as
// float64 (JavaScript, jq) round anything above — so a log dumped, piped
// through such a tool and replayed keeps its numbers; and it leaves the
// store 2^64−2^53 of room to count on from them (the next turn, the turn a
// span of N turns ends on) without wrapping a uint64. No real session comes
// near it: a gapless seq of 2^53 is a million events a second for 285
// years.
const (
	MaxSeq  = 1 << 53
	MaxTurn = 1 << 53
)

// Limits bounds the size of an event. The zero value of a field means its
// default.
type Limits struct {
	MaxEventBytes int // all string fields together; default DefaultMaxEventBytes
	MaxIDBytes    int // ID, Key, Name, By and Ref each; default DefaultMaxIDBytes
}

// Default limits.
const (
	DefaultMaxEventBytes = 4 << 20
	DefaultMaxIDBytes    = 4 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = DefaultMaxEventBytes
	}
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = DefaultMaxIDBytes
	}
	return l
}

// Check applies the rules that need no ledger: a known kind, the id or key
// the kind requires, a superseded event's by other than its key, Seq and
// Turn at most MaxSeq and MaxTurn, valid UTF-8, no control characters in
// identifiers (id, key, name, by, ref), and the size limits. It returns an *EventError. (Time needs
// no bound: every int64 of Unix nanoseconds is a time the JSONL form writes
// and reads back, and nothing counts on from it.)
func (e *Event) Check(lim Limits) error {
	lim = lim.withDefaults()
	if !e.Kind.Valid() {
		return eventErr(e, ErrUnknownKind, "")
	}
	if e.Seq > MaxSeq {
		return eventErr(e, ErrBadField, fmt.Sprintf("seq %d is over the limit %d (2^53)", e.Seq, uint64(MaxSeq)))
	}
	if e.Turn > MaxTurn {
		return eventErr(e, ErrBadField, fmt.Sprintf("turn %d is over the limit %d (2^53)", e.Turn, uint64(MaxTurn)))
	}
	ids := [...]struct{ name, v string }{{"id", e.ID}, {"key", e.Key}, {"name", e.Name}, {"by", e.By}, {"ref", e.Ref}}
	total := len(e.Text)
	for _, f := range ids {
		total += len(f.v)
		if len(f.v) > lim.MaxIDBytes {
			return eventErr(e, ErrTooLarge, fmt.Sprintf("%s is %d bytes, limit %d", f.name, len(f.v), lim.MaxIDBytes))
		}
		if !utf8.ValidString(f.v) {
			return eventErr(e, ErrInvalidUTF8, "in "+f.name)
		}
		if i := controlIndex(f.v); i >= 0 {
			return eventErr(e, ErrBadField, fmt.Sprintf("control character at byte %d of %s", i, f.name))
		}
	}
	if total > lim.MaxEventBytes {
		return eventErr(e, ErrTooLarge, fmt.Sprintf("event is %d bytes, limit %d", total, lim.MaxEventBytes))
	}
	if !utf8.ValidString(e.Text) {
		return eventErr(e, ErrInvalidUTF8, "in text")
	}
	if e.Kind.NeedsID() && e.ID == "" {
		return eventErr(e, ErrMissingID, "")
	}
	if e.Kind.NeedsKey() && e.Key == "" {
		return eventErr(e, ErrMissingKey, "")
	}
	if e.By != "" && e.Kind != KindSuperseded {
		return eventErr(e, ErrBadField, "by is only for superseded")
	}
	if e.Kind == KindSuperseded && e.By != "" && e.By == e.Key {
		return eventErr(e, ErrBadField, "superseded by its own key")
	}
	if e.Failed && !e.Kind.Resolves() {
		return eventErr(e, ErrBadField, "ok is only for tool_result and close")
	}
	return nil
}

// controlIndex returns the byte index of the first control character in s,
// or -1. Identifiers are printed on terminals and used as bucket names.
func controlIndex(s string) int {
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return i
		}
	}
	return -1
}

// EstimateTokens estimates the tokens of s the same way everywhere in strata:
// one token per four bytes, rounded up.
func EstimateTokens(s string) int { return TokensOfBytes(len(s)) }

// TokensOfBytes is EstimateTokens of a text of n bytes.
func TokensOfBytes(n int) int { return (n + 3) / 4 }

// MarshalJSON encodes k as its name. (Kind deliberately has no MarshalText:
// msgpack would use it and store names instead of numbers.)
func (k Kind) MarshalJSON() ([]byte, error) {
	if !k.Valid() {
		return nil, ErrUnknownKind
	}
	return []byte(`"` + kindNames[k] + `"`), nil
}

// UnmarshalJSON decodes a kind's name.
func (k *Kind) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return ErrUnknownKind
	}
	v, err := ParseKind(s)
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// Mismatch returns the first field in which e, an event read from a log,
// differs from stored, the event the store holds at e's seq, or "" when e
// is that event: the same kind, id, key, name, ok, by, text and ref, and
// the same seq, turn and time where e gives them (where a log leaves them
// out the store assigns them, so they are nothing to compare). This is how
// a log replayed again is recognised: by each event's seq — given, or its
// place in the session's lines — and its fields.
func (e *Event) Mismatch(stored *Event) string {
	switch {
	case e.Seq != 0 && e.Seq != stored.Seq:
		return "seq"
	case e.Kind != stored.Kind:
		return "kind"
	case e.Turn != 0 && e.Turn != stored.Turn:
		return "turn"
	case e.Time != 0 && e.Time != stored.Time:
		return "time"
	case e.ID != stored.ID:
		return "id"
	case e.Key != stored.Key:
		return "key"
	case e.Name != stored.Name:
		return "name"
	case e.Failed != stored.Failed:
		return "ok"
	case e.By != stored.By:
		return "by"
	case e.Text != stored.Text:
		return "text"
	case e.Ref != stored.Ref:
		return "ref"
	}
	return ""
}
