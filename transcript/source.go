package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sort"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// errRecordTooLarge stops a json.Decoder that has read more than one
// record may hold.
var errRecordTooLarge = errors.New("transcript: record too large")

// lineCounter passes reads through, remembering the offset of every newline
// so that an offset can be turned into a line, and refusing to read past
// limit. Newlines before the record being read are forgotten (counted in
// before): memory follows the record, not the file.
type lineCounter struct {
	r      io.Reader
	off    int64
	nl     []int64 // the offsets of the newlines not forgotten, ascending
	before int     // newlines forgotten
	limit  int64
}

func (c *lineCounter) Read(p []byte) (int, error) {
	if c.off >= c.limit {
		return 0, errRecordTooLarge
	}
	if room := c.limit - c.off; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		if j < 0 {
			break
		}
		c.nl = append(c.nl, c.off+int64(i+j))
		i += j + 1
	}
	c.off += int64(n)
	return n, err
}

// lineAt returns the line (from 1) of the byte at offset off, which must
// not be before the offset last given to forget.
func (c *lineCounter) lineAt(off int64) int {
	return 1 + c.before + sort.Search(len(c.nl), func(i int) bool { return c.nl[i] >= off })
}

// forget drops the newlines before offset off: no line before it will be
// asked for again. The slice is cut from the front, so an append that
// outgrows it copies only the newlines still held.
func (c *lineCounter) forget(off int64) {
	i := sort.Search(len(c.nl), func(i int) bool { return c.nl[i] >= off })
	c.before += i
	c.nl = c.nl[i:]
}

// valueSource yields the top-level JSON values of a stream (one document,
// or JSONL, or values one after another), the elements of a top-level
// array each as a record of its own, read one at a time. A top-level
// object over bigValue bytes is read member by member when the input can
// be read again (ra): it is returned as a bigObject (big), its lists of
// messages not held.
type valueSource struct {
	c    *lineCounter
	dec  *json.Decoder
	file string
	max  int64
	ra   io.ReaderAt // the input again, from its start; nil: values are read whole
	base int64       // the offset in the input of dec's first byte

	arr *elements  // the top-level array being read
	big *bigObject // the value next returned, when it is a bigObject (its raw is nil)
	// listed says whether the last value returned is one of a list: an
	// element of a top-level array, or one of several top-level values.
	listed bool
	values int // top-level values returned
}

// bigValue is the size from which a top-level object of an input that can
// be read again is read member by member, its messages streamed: below it,
// an object is read whole, the faster way for the many small ones of JSONL.
var bigValue int64 = 1 << 20

// slack is how far the decoder may read past a record's limit: what it
// reads ahead of the value it decodes.
const slack = 64 << 10

func newValueSource(r io.Reader, file string, max int) *valueSource {
	c := &lineCounter{r: r, limit: int64(max) + slack}
	s := &valueSource{c: c, dec: json.NewDecoder(c), file: file, max: int64(max)}
	s.ra, _ = r.(io.ReaderAt)
	return s
}

func (s *valueSource) next() ([]byte, int, error) {
	for {
		if s.arr != nil {
			raw, line, err := s.arr.next()
			if err != io.EOF {
				return raw, line, err
			}
			s.arr = nil
		}
		s.limit(s.offset())
		c, ok := s.peek()
		if !ok {
			_, _, err := s.read(false) // io.EOF, or what is wrong there
			return nil, 0, err
		}
		s.values++
		if c == '[' {
			line := s.c.lineAt(s.offset())
			if _, err := s.dec.Token(); err != nil {
				return nil, 0, s.decodeErr(err)
			}
			s.arr = &elements{c: s.c, dec: s.dec, base: s.base, file: s.file, max: s.max, line: line}
			s.listed = true
			continue
		}
		raw, line, err := s.read(c == '{')
		if err != nil {
			return nil, 0, err
		}
		// Alone, or one of several: the next value says.
		s.limit(s.offset())
		s.listed = s.values > 1 || s.dec.More()
		return raw, line, nil
	}
}

// offset returns the offset in the input of the next byte dec decodes.
func (s *valueSource) offset() int64 { return s.base + s.dec.InputOffset() }

// limit lets the decoder read a record of at most max bytes from start.
func (s *valueSource) limit(start int64) {
	s.c.forget(start)
	s.c.limit = start + s.max + slack
}

// peek returns the first byte of the next top-level value, or false at the
// end of the input or where no value starts.
func (s *valueSource) peek() (byte, bool) {
	if !s.dec.More() {
		return 0, false
	}
	var b [1]byte
	r := s.dec.Buffered()
	for {
		if _, err := r.Read(b[:]); err != nil {
			return 0, false
		}
		if c := b[0]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, true
		}
	}
}

// read decodes the next top-level value: whole, or when it is an object
// over bigValue bytes of an input that can be read again, as a bigObject
// (s.big, the raw nil).
func (s *valueSource) read(object bool) ([]byte, int, error) {
	start := s.offset()
	big := object && s.ra != nil && s.max > bigValue
	if big {
		s.c.limit = start + bigValue
	}
	var raw json.RawMessage
	err := s.dec.Decode(&raw)
	if big && errors.Is(err, errRecordTooLarge) {
		return s.readBig(start)
	}
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, s.decodeErr(err)
	}
	end := s.offset()
	if end-start > s.max {
		return nil, 0, &LineError{File: s.file, Line: s.c.lineAt(start), Err: errors.Wrapf(ErrTooLarge, "a JSON value of %d bytes, limit %d", end-start, s.max)}
	}
	return raw, s.c.lineAt(end) - bytes.Count(raw, []byte{'\n'}), nil
}

// readBig reads the object at offset start again, member by member, from
// a decoder that reads what was read of it from s.ra and the rest from the
// input.
func (s *valueSource) readBig(start int64) ([]byte, int, error) {
	line := s.c.lineAt(start)
	again := io.MultiReader(io.NewSectionReader(s.ra, start, s.c.off-start), s.c.r)
	s.c = &lineCounter{r: again, off: start, before: line - 1}
	s.dec, s.base = json.NewDecoder(s.c), start
	s.limit(start)
	big, err := s.scan(start, line)
	if err != nil {
		return nil, 0, err
	}
	s.big = big
	return nil, line, nil
}

// bigObject is a top-level object read member by member: its members but
// the lists under messageKeys, and where those lists are in the input.
type bigObject struct {
	start, end int64
	line       int
	members    map[string]json.RawMessage // a list under messageKeys: nil
	lists      map[string]*listInfo
}

// listInfo is a list under one of messageKeys of a bigObject: where it is,
// and whether it holds a message or a step, or nothing.
type listInfo struct {
	start, end int64 // of its '[', and past its ']'
	line       int   // of its '['
	message    bool
	empty      bool
}

// scan reads the object starting at offset start (on line) from s.dec.
func (s *valueSource) scan(start int64, line int) (*bigObject, error) {
	o := &bigObject{start: start, line: line, members: map[string]json.RawMessage{}, lists: map[string]*listInfo{}}
	if _, err := s.dec.Token(); err != nil { // {
		return nil, s.decodeErr(err)
	}
	for s.dec.More() {
		t, err := s.dec.Token()
		if err != nil {
			return nil, s.decodeErr(err)
		}
		key, _ := t.(string)
		delete(o.lists, key) // the last of a key counts, as in a map
		s.limit(s.offset())
		if !slices.Contains(messageKeys, key) {
			var raw json.RawMessage
			if err := s.dec.Decode(&raw); err != nil {
				return nil, s.decodeErr(err)
			}
			o.members[key] = raw
			continue
		}
		o.members[key] = nil
		t, err = s.dec.Token()
		if err != nil {
			return nil, s.decodeErr(err)
		}
		switch t {
		case json.Delim('['):
			at := s.offset() - 1
			l := &listInfo{start: at, line: s.c.lineAt(at), empty: true}
			e := &elements{c: s.c, dec: s.dec, base: s.base, file: s.file, max: s.max}
			for {
				raw, _, err := e.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return nil, err
				}
				l.empty = false
				l.message = l.message || holdsMessage(raw) // a message found: the rest are only read
			}
			l.end = s.offset()
			o.lists[key] = l
		case json.Delim('{'):
			if err := skipValue(s.dec, 1); err != nil {
				return nil, s.decodeErr(err)
			}
		}
	}
	if _, err := s.dec.Token(); err != nil { // }
		return nil, s.decodeErr(err)
	}
	o.end = s.offset()
	return o, nil
}

// skipValue reads the tokens of a value whose first depth delimiters are
// read.
func skipValue(dec *json.Decoder, depth int) error {
	for depth > 0 {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// raw returns the bytes of o, read again: for an object over bigValue that
// is a message after all, bounded by max.
func (s *valueSource) raw(o *bigObject) ([]byte, error) {
	if o.end-o.start > s.max {
		return nil, &LineError{File: s.file, Line: o.line, Err: errors.Wrapf(ErrTooLarge, "a JSON value of %d bytes, limit %d", o.end-o.start, s.max)}
	}
	b := make([]byte, o.end-o.start)
	if _, err := s.ra.ReadAt(b, o.start); err != nil {
		return nil, errors.Wrapf(err, "reading %s again", s.file)
	}
	return b, nil
}

// list returns the elements of list l of a bigObject, read again.
func (s *valueSource) list(l *listInfo) (*elements, error) {
	c := &lineCounter{r: io.NewSectionReader(s.ra, l.start, l.end-l.start), off: l.start, before: l.line - 1, limit: l.start + s.max + slack}
	dec := json.NewDecoder(c)
	if _, err := dec.Token(); err != nil { // [
		return nil, errors.Wrapf(err, "reading %s again", s.file)
	}
	return &elements{c: c, dec: dec, base: l.start, file: s.file, max: s.max}, nil
}

// elements reads the elements of a JSON array one at a time, its '['
// read: its memory is one element's.
type elements struct {
	c    *lineCounter
	dec  *json.Decoder
	base int64 // the offset in the input of dec's first byte
	file string
	max  int64
	line int // of the '[': an error at its end names it
}

// offset returns the offset in the input of the next byte dec decodes.
func (e *elements) offset() int64 { return e.base + e.dec.InputOffset() }

// next returns the next element and the line it starts on, or io.EOF once
// the ']' is read.
func (e *elements) next() ([]byte, int, error) {
	start := e.offset()
	e.c.forget(start)
	e.c.limit = start + e.max + slack
	if !e.dec.More() {
		if _, err := e.dec.Token(); err != nil { // ]
			return nil, 0, decodeErr(e.c, e.dec, e.base, e.file, e.max, err)
		}
		return nil, 0, io.EOF
	}
	var raw json.RawMessage
	if err := e.dec.Decode(&raw); err != nil {
		return nil, 0, decodeErr(e.c, e.dec, e.base, e.file, e.max, err)
	}
	end := e.offset()
	line := e.c.lineAt(end) - bytes.Count(raw, []byte{'\n'})
	if int64(len(raw)) > e.max {
		return nil, 0, &LineError{File: e.file, Line: line, Err: errors.Wrapf(ErrTooLarge, "a JSON value of %d bytes, limit %d", len(raw), e.max)}
	}
	return raw, line, nil
}

// decodeErr names the line of a JSON error.
func (s *valueSource) decodeErr(err error) error {
	return decodeErr(s.c, s.dec, s.base, s.file, s.max, err)
}

// decodeErr names the line of a JSON error of dec, which reads c from
// offset base of the input.
func decodeErr(c *lineCounter, dec *json.Decoder, base int64, file string, limit int64, err error) error {
	line := c.lineAt(max(c.off-1, 0)) // the last byte read
	var se *json.SyntaxError
	switch {
	case errors.Is(err, errRecordTooLarge):
		return &LineError{File: file, Line: c.lineAt(base + dec.InputOffset()), Err: errors.Wrapf(ErrTooLarge, "a JSON value over %d bytes", limit)}
	case errors.As(err, &se):
		line = c.lineAt(base + syntaxErrorAt(dec))
		return &LineError{File: file, Line: line, Err: errors.Wrap(ErrBadJSON, se.Error())}
	case errors.Is(err, io.ErrUnexpectedEOF), err == io.EOF:
		return &LineError{File: file, Line: line, Err: errors.Wrap(ErrBadJSON, "the input ends inside a JSON value")}
	}
	return errors.Wrapf(err, "reading %s", file)
}

// syntaxErrorAt returns the offset in dec's input of the byte a syntax
// error of dec is at. The error's own Offset counts the bytes dec scanned as values, not
// those its Token and More stepped over, so the bytes dec holds from
// InputOffset on are decoded again, alone.
func syntaxErrorAt(dec *json.Decoder) int64 {
	at := dec.InputOffset()
	var se *json.SyntaxError
	if err := json.NewDecoder(dec.Buffered()).Decode(new(json.RawMessage)); errors.As(err, &se) {
		at += max(se.Offset-1, 0)
	}
	return at
}

// eachElement calls fn with every element of the JSON array raw and the
// line it starts on, raw starting on line.
func eachElement(raw []byte, line int, fn func(elem []byte, line int) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // [
		return errors.Wrap(ErrBadJSON, err.Error())
	}
	var prev int64 // newlines are counted once: an array of many elements stays linear
	for dec.More() {
		var elem json.RawMessage
		if err := dec.Decode(&elem); err != nil {
			return errors.Wrap(ErrBadJSON, err.Error())
		}
		end := dec.InputOffset()
		line += bytes.Count(raw[prev:end], []byte{'\n'})
		prev = end
		l := line - bytes.Count(elem, []byte{'\n'})
		if err := fn(elem, l); err != nil {
			return err
		}
	}
	return nil
}

// lineSource yields the non-blank lines of a JSONL stream, never holding
// more than one line.
type lineSource struct {
	r    *bufio.Reader
	file string
	line int
	max  int
}

func newLineSource(r io.Reader, file string, max int) *lineSource {
	return &lineSource{r: bufio.NewReaderSize(r, 64<<10), file: file, max: max}
}

func (s *lineSource) next() ([]byte, int, error) {
	for {
		b, err := s.readLine()
		if err != nil {
			return nil, 0, err
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			return b, s.line, nil
		}
	}
}

func (s *lineSource) readLine() ([]byte, error) {
	b, err := tier.ReadLine(s.r, s.max)
	switch {
	case err == nil:
		s.line++
		return b, nil
	case errors.Is(err, tier.ErrLineTooLong):
		s.line++
		return nil, &LineError{File: s.file, Line: s.line, Err: errors.Wrapf(ErrTooLarge, "line longer than %d bytes", s.max)}
	case err == io.EOF:
		return nil, io.EOF
	}
	return nil, errors.Wrapf(err, "reading %s", s.file)
}

// jsonObject checks that raw, a record of a line-oriented format, is a
// JSON object: an error wrapping ErrBadJSON for invalid JSON (the
// decoder's reason), ErrBadRecord for another JSON value ("what must be
// a JSON object").
func jsonObject(raw []byte, what string) error {
	if !json.Valid(raw) {
		var v any
		msg := "invalid JSON"
		if err := json.Unmarshal(raw, &v); err != nil {
			msg = err.Error()
		}
		return errors.Wrap(ErrBadJSON, msg)
	}
	if raw[0] != '{' {
		return errors.Wrapf(ErrBadRecord, "%s must be a JSON object", what)
	}
	return nil
}
