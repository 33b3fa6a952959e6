package tier

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// ErrBadJSON is returned when a line of the event format is not a JSON
// object of the documented fields.
var ErrBadJSON = errors.New("tier: bad JSON")

// EventJSON is an event in the JSONL form of docs/events.md.
// Optional integers and "ok" are pointers so that absence can be told from
// zero.
type EventJSON struct {
	Seq     *uint64 `json:"seq,omitempty"`
	Session string  `json:"session,omitempty"`
	Kind    string  `json:"kind"`
	Turn    *uint64 `json:"turn,omitempty"`
	Time    string  `json:"time,omitempty"`
	ID      string  `json:"id,omitempty"`
	Key     string  `json:"key,omitempty"`
	Name    string  `json:"name,omitempty"`
	OK      *bool   `json:"ok,omitempty"`
	By      string  `json:"by,omitempty"`
	Text    string  `json:"text,omitempty"`
	Ref     string  `json:"ref,omitempty"`
}

// ToJSON returns e in the event format, with every field the store knows
// (seq, turn and time included), so that replaying it reproduces e.
func (e *Event) ToJSON(session string) EventJSON {
	seq, turn := e.Seq, e.Turn
	j := EventJSON{
		Seq: &seq, Session: session, Kind: e.Kind.String(), Turn: &turn,
		ID: e.ID, Key: e.Key, Name: e.Name, By: e.By, Text: e.Text, Ref: e.Ref,
	}
	if e.Time != 0 {
		j.Time = time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano)
	}
	if e.Kind.Resolves() {
		ok := !e.Failed
		j.OK = &ok
	}
	return j
}

// Event converts j into an Event, checking what the format alone decides:
// kind, time syntax, and Event.Check's rules. Seq and turn are taken as
// given (0 when absent); the store checks them against the session.
func (j *EventJSON) Event(lim Limits) (Event, error) {
	e := Event{ID: j.ID, Key: j.Key, Name: j.Name, By: j.By, Text: j.Text, Ref: j.Ref}
	if j.Seq != nil {
		e.Seq = *j.Seq
	}
	if j.Turn != nil {
		e.Turn = *j.Turn
	}
	// The kind first, so that every error names the kind the line has.
	k, err := ParseKind(j.Kind)
	if err != nil {
		ee := eventErr(&e, ErrUnknownKind, fmt.Sprintf("%q", clip(j.Kind)))
		ee.Kind = j.Kind
		return e, ee
	}
	e.Kind = k
	if j.Seq != nil && e.Seq == 0 {
		return e, eventErr(&e, ErrSeqOrder, "seq starts at 1")
	}
	if j.OK != nil {
		if !k.Resolves() {
			return e, eventErr(&e, ErrBadField, "ok is only for tool_result and close")
		}
		e.Failed = !*j.OK
	}
	if j.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, j.Time)
		if err != nil {
			return e, eventErr(&e, ErrBadField, fmt.Sprintf("time %q is not RFC 3339", clip(j.Time)))
		}
		// UnixNano is undefined outside int64 nanoseconds (years 1678 to
		// 2262): refuse rather than store a wrapped-around time.
		if t.Before(minTime) || t.After(maxTime) {
			return e, eventErr(&e, ErrBadField, fmt.Sprintf("time %q is outside the years 1678 to 2262", clip(j.Time)))
		}
		e.Time = t.UnixNano()
	}
	if err := e.Check(lim); err != nil {
		return e, err
	}
	return e, nil
}

// The times an int64 of Unix nanoseconds can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// LineError is bad input in a JSONL file: the file, the line (from 1) and
// why. Err is an *EventError, or wraps ErrBadJSON, ErrTooLarge or
// ErrInvalidUTF8.
type LineError struct {
	File string
	Line int
	Err  error
}

// Error implements error.
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// Format implements fmt.Formatter through errors.FormatError.
func (e *LineError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// Record is one event read from a JSONL stream, with where it came from.
type Record struct {
	Line    int
	Session string // the line's "session", or "" when absent
	Event   Event
}

// Reader reads events in the JSONL form, one line at a time, never holding
// more than one line (bounded by the event size limit) in memory.
type Reader struct {
	r    *bufio.Reader
	file string
	line int
	lim  Limits
	max  int
}

// NewReader returns a Reader of r; file names r in errors.
func NewReader(r io.Reader, file string, lim Limits) *Reader {
	lim = lim.withDefaults()
	// A line holds the strings of an event, JSON-escaped (up to 6 bytes per
	// byte for \u00XX) plus field names: allow for that before refusing.
	max := lim.MaxEventBytes*6 + 64<<10
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), file: file, lim: lim, max: max}
}

// Next returns the next event, io.EOF at the end, or a *LineError.
func (rd *Reader) Next() (Record, error) {
	for {
		b, err := rd.readLine()
		if err != nil {
			return Record{}, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		return rd.parse(b)
	}
}

// Buffered returns how many bytes of the input the Reader holds unread.
// At 0 the next call to Next reads the underlying reader, which may block
// on a pipe or a terminal: a caller that batches events stores its batch
// first, so that a live stream is stored as it arrives.
func (rd *Reader) Buffered() int { return rd.r.Buffered() }

func (rd *Reader) lineErr(err error) error {
	return &LineError{File: rd.file, Line: rd.line, Err: err}
}

func (rd *Reader) readLine() ([]byte, error) {
	b, err := ReadLine(rd.r, rd.max)
	switch {
	case err == nil:
		rd.line++
		return b, nil
	case errors.Is(err, ErrLineTooLong):
		rd.line++
		return nil, rd.lineErr(errors.Wrapf(ErrTooLarge, "line longer than %d bytes", rd.max))
	case err == io.EOF:
		return nil, io.EOF
	}
	return nil, errors.Wrapf(err, "reading %s", rd.file)
}

// ErrLineTooLong is returned by ReadLine for a line over its limit.
var ErrLineTooLong = errors.New("tier: line too long")

// ReadLine reads one line from r, its '\n' included (the last line of the
// input may lack it), holding at most max bytes of it: a longer line is
// read to its end and dropped, and ErrLineTooLong returned, so that the
// next call reads the next line. It returns io.EOF at the end of the input,
// and r's error as it is.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(buf)+len(frag) > max {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return nil, ErrLineTooLong
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(buf) == 0 {
				return nil, io.EOF
			}
			return buf, nil
		default:
			return nil, err
		}
	}
}

func (rd *Reader) parse(b []byte) (Record, error) {
	if !utf8.Valid(b) {
		return Record{}, rd.lineErr(errors.Wrap(ErrInvalidUTF8, "line is not valid UTF-8"))
	}
	var j EventJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Record{}, rd.lineErr(errors.Wrap(ErrBadJSON, jsonDetail(err)))
	}
	if dec.More() {
		return Record{}, rd.lineErr(errors.Wrap(ErrBadJSON, "more than one JSON value on the line"))
	}
	// encoding/json decodes an escaped lone surrogate ("\ud800") to U+FFFD:
	// the text would be stored altered. Refuse it as the invalid UTF-8 it
	// stands for.
	if field, esc, ok := loneSurrogate(b); ok {
		ee := &EventError{Kind: j.Kind, ID: j.ID, Key: j.Key, Err: ErrInvalidUTF8,
			Detail: fmt.Sprintf("lone surrogate %s in %s", esc, field)}
		if j.Seq != nil {
			ee.Seq = *j.Seq
		}
		return Record{}, rd.lineErr(ee)
	}
	e, err := j.Event(rd.lim)
	if err != nil {
		return Record{}, rd.lineErr(err)
	}
	return Record{Line: rd.line, Session: j.Session, Event: e}, nil
}

// jsonDetail describes an error of encoding/json without the input it
// quotes whole: a number of a million digits, a field name of a megabyte.
func jsonDetail(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		if te.Field == "" {
			return fmt.Sprintf("json: cannot unmarshal %s into %s", clip(te.Value), te.Type)
		}
		return fmt.Sprintf("json: cannot unmarshal %s into field %s of type %s", clip(te.Value), clip(te.Field), te.Type)
	}
	return clipDetail(err.Error())
}

// loneSurrogate finds the first \u escape in the JSON line b that encodes
// half of a UTF-16 surrogate pair without its other half, and returns the
// name of the field it is in and the escape. b must be one valid JSON
// object whose values are scalars (what decoding an EventJSON accepted).
func loneSurrogate(b []byte) (field, esc string, found bool) {
	if !bytes.Contains(b, []byte(`\ud`)) && !bytes.Contains(b, []byte(`\uD`)) {
		return "", "", false // no escape of a surrogate at all: the common line
	}
	inString, isKey, expectKey := false, false, false
	start := 0 // of the string being read, its quote included
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			switch c {
			case '{', ',':
				expectKey = true
			case '"':
				inString, isKey, expectKey, start = true, expectKey, false, i
			}
			continue
		}
		switch c {
		case '"':
			inString = false
			if isKey {
				field = string(b[start : i+1])
			}
		case '\\':
			if i+1 < len(b) && b[i+1] != 'u' {
				i++ // \n, \", \\ …: one escaped byte
				continue
			}
			n, lone, ok := SurrogateEscape(b, i)
			if !ok {
				continue // not valid JSON: the decoder refused it already
			}
			if !lone {
				i += n - 1
				continue
			}
			var name string
			if isKey || json.Unmarshal([]byte(field), &name) != nil {
				name = "a field name"
			}
			return clip(name), string(b[i : i+6]), true
		}
	}
	return "", "", false
}

// SurrogateEscape reads the \u escape at b[i:] (b[i] is '\\', b[i+1] is
// 'u'): n is the bytes it spans (12 for a surrogate pair, else 6) and lone
// whether it is a surrogate without its pair — what JSON decoders silently
// turn into U+FFFD. ok is false when four hex digits do not follow.
func SurrogateEscape(b []byte, i int) (n int, lone, ok bool) {
	r, ok := hex4(b, i+2)
	switch {
	case !ok:
		return 0, false, false
	case r >= 0xd800 && r < 0xdc00:
		if lo, ok := hex4(b, i+8); ok && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xdc00 && lo < 0xe000 {
			return 12, false, true
		}
		return 6, true, true
	case r >= 0xdc00 && r < 0xe000:
		return 6, true, true
	}
	return 6, false, true
}

// hex4 returns the value of the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
