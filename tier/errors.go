package tier

import (
	"fmt"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// Sentinel causes of an *EventError. Each names one rule of the raw event
// format (docs/events.md); compare with errors.Is.
var (
	// ErrUnknownKind is returned when an event's kind is not one of the kinds
	// of the event format.
	ErrUnknownKind = errors.New("tier: unknown event kind")
	// ErrMissingID is returned when a call or resource event has no id.
	ErrMissingID = errors.New("tier: missing id")
	// ErrMissingKey is returned when a fact event has no key.
	ErrMissingKey = errors.New("tier: missing key")
	// ErrNotOpen is returned when a tool_result or close names an id that is
	// not open.
	ErrNotOpen = errors.New("tier: id is not open")
	// ErrWrongResource is returned when a tool_result resolves a handle or a
	// close closes a tool call.
	ErrWrongResource = errors.New("tier: id is open as another kind of resource")
	// ErrAlreadyOpen is returned when an id is opened while it is still open.
	ErrAlreadyOpen = errors.New("tier: id opened twice while open")
	// ErrNotActive is returned when a withdrawn event names a constraint that
	// is not active.
	ErrNotActive = errors.New("tier: constraint is not active")
	// ErrSeqOrder is returned when an event carries a seq that is not the
	// session's next seq.
	ErrSeqOrder = errors.New("tier: seq out of order")
	// ErrTurnOrder is returned when an event carries a turn lower than the
	// session's current turn.
	ErrTurnOrder = errors.New("tier: turn goes backwards")
	// ErrInvalidUTF8 is returned when a string field is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("tier: invalid UTF-8")
	// ErrTooLarge is returned when an event or one of its fields is over the
	// size limit.
	ErrTooLarge = errors.New("tier: over the size limit")
	// ErrBadField is returned when a field has a value the kind does not
	// allow (a control character in an id, "by" on a kind other than
	// superseded, ...).
	ErrBadField = errors.New("tier: bad field")
	// ErrStoredDiffers is returned when an event that names a seq the
	// session holds already differs from the event stored there
	// (Event.Mismatch): a log replayed again must be the one stored.
	ErrStoredDiffers = errors.New("tier: the event differs from the one stored at its seq")
)

// EventError is bad input: an event that the format or the ledger refuses.
// It names the event by its position in the call (Index), its seq (when
// known), kind, id and key. Err is one of the sentinels above, possibly
// wrapped with detail.
type EventError struct {
	Index  int    // position of the event in the Append call or input, from 0
	Seq    uint64 // the seq the event has or would have had; 0 if unknown
	Kind   string
	ID     string
	Key    string
	Err    error  // the sentinel cause
	Detail string // what exactly was wrong, for the person reading it
}

// Error implements error.
func (e *EventError) Error() string {
	s := "event"
	if e.Seq != 0 {
		s += fmt.Sprintf(" seq %d", e.Seq)
	}
	if e.Kind != "" {
		if _, err := ParseKind(e.Kind); err == nil {
			s += " kind " + e.Kind
		} else {
			s += fmt.Sprintf(" kind %q", clip(e.Kind)) // the input's: any bytes, any length
		}
	}
	if e.ID != "" {
		s += fmt.Sprintf(" id %q", clip(e.ID))
	}
	if e.Key != "" {
		s += fmt.Sprintf(" key %q", clip(e.Key))
	}
	s += ": " + e.Err.Error()
	if e.Detail != "" {
		s += " (" + clipDetail(e.Detail) + ")"
	}
	return s
}

// Unwrap returns the cause, one of the sentinels of this package.
func (e *EventError) Unwrap() error { return e.Err }

// clipBytes bounds an id, key or other input value quoted in an error
// message: a hostile one can be megabytes long (the full value stays in the
// EventError's field). maxDetailBytes bounds a Detail as a whole, whoever
// wrote it, so that no message grows with its input.
const (
	clipBytes      = 128
	maxDetailBytes = 4 * clipBytes
)

// clip returns s cut to about clipBytes bytes, at a rune boundary, with
// the number of bytes left out.
func clip(s string) string { return ClipTo(s, clipBytes) }

// clipDetail returns a Detail cut like clip, to maxDetailBytes.
func clipDetail(s string) string { return ClipTo(s, maxDetailBytes) }

// ClipTo returns s cut to at most n bytes at a rune boundary, followed by
// the number of bytes left out: "abc…(120 more bytes)". s of n bytes or
// fewer is returned as it is.
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := TruncateUTF8(s, n)
	return fmt.Sprintf("%s…(%d more bytes)", cut, len(s)-len(cut))
}

// Format implements fmt.Formatter through errors.FormatError.
func (e *EventError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

func eventErr(e *Event, cause error, detail string) *EventError {
	return &EventError{Seq: e.Seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key, Err: cause, Detail: detail}
}

// TruncateUTF8 returns the longest prefix of s of at most n bytes that
// ends on a rune boundary: what error messages and audits quote of a long
// text.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
