package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
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
// array each as a record of its own.
type valueSource struct {
	c    *lineCounter
	dec  *json.Decoder
	file string
	max  int64

	elems [][]byte // the rest of a top-level array
	lines []int
	// listed says whether the last value returned is one of a list: an
	// element of a top-level array, or one of several top-level values.
	listed bool
	values int       // top-level values returned
	ahead  *topValue // the second top-level value, read to know whether the first is alone
}

// topValue is a top-level value read, or the error met reading it.
type topValue struct {
	raw  []byte
	line int
	err  error
}

func newValueSource(r io.Reader, file string, max int) *valueSource {
	c := &lineCounter{r: r, limit: int64(max) + 64<<10}
	return &valueSource{c: c, dec: json.NewDecoder(c), file: file, max: int64(max)}
}

func (s *valueSource) next() ([]byte, int, error) {
	for {
		if len(s.elems) > 0 {
			raw, line := s.elems[0], s.lines[0]
			s.elems, s.lines = s.elems[1:], s.lines[1:]
			return raw, line, nil
		}
		v := s.ahead
		if v != nil {
			s.ahead = nil
		} else {
			v = s.read()
		}
		if v.err != nil {
			return nil, 0, v.err
		}
		s.values++
		if v.raw[0] != '[' {
			s.listed = s.values > 1
			if s.values == 1 {
				// Alone, or the first of several: the next value says.
				if next := s.read(); next.err != io.EOF {
					s.listed, s.ahead = true, next
				}
			}
			return v.raw, v.line, nil
		}
		s.listed = true
		err := eachElement(v.raw, v.line, func(elem []byte, l int) error {
			s.elems = append(s.elems, elem)
			s.lines = append(s.lines, l)
			return nil
		})
		if err != nil {
			return nil, 0, &LineError{File: s.file, Line: v.line, Err: err}
		}
	}
}

// read decodes the next top-level value.
func (s *valueSource) read() *topValue {
	start := s.dec.InputOffset()
	s.c.forget(start)
	s.c.limit = start + s.max + 64<<10
	var raw json.RawMessage
	err := s.dec.Decode(&raw)
	if err == io.EOF {
		return &topValue{err: io.EOF}
	}
	if err != nil {
		return &topValue{err: s.decodeErr(err)}
	}
	end := s.dec.InputOffset()
	if end-start > s.max {
		return &topValue{err: &LineError{File: s.file, Line: s.c.lineAt(start), Err: errors.Wrapf(ErrTooLarge, "a JSON value of %d bytes, limit %d", end-start, s.max)}}
	}
	return &topValue{raw: raw, line: s.c.lineAt(end) - bytes.Count(raw, []byte{'\n'})}
}

// decodeErr names the line of a JSON error.
func (s *valueSource) decodeErr(err error) error {
	line := s.c.lineAt(max(s.c.off-1, 0)) // the last byte read
	var se *json.SyntaxError
	switch {
	case errors.Is(err, errRecordTooLarge):
		return &LineError{File: s.file, Line: s.c.lineAt(s.dec.InputOffset()), Err: errors.Wrapf(ErrTooLarge, "a JSON value over %d bytes", s.max)}
	case errors.As(err, &se):
		line = s.c.lineAt(se.Offset - 1)
		return &LineError{File: s.file, Line: line, Err: errors.Wrap(ErrBadJSON, se.Error())}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &LineError{File: s.file, Line: line, Err: errors.Wrap(ErrBadJSON, "the input ends inside a JSON value")}
	}
	return errors.Wrapf(err, "reading %s", s.file)
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
