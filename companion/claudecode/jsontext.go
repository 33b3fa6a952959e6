package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// This file edits a JSON document as text: it finds where each value
// stands in the bytes, and inserts or removes exact text, so that every
// byte it does not mean to change — indentation, key order, spacing, line
// ends — stays as it was (claude-code install and uninstall). A document is
// JSON as RFC 8259 and JavaScript's JSON.parse read it, which is how
// Claude Code reads its settings: no comments, no trailing commas.

// jsonNode is a value of a JSON text and where it stands: text[start:end].
type jsonNode struct {
	kind       byte // '{', '[', '"', or '0' for a number, true, false or null
	start, end int
	str        string       // a string's value
	members    []jsonMember // an object's, in their order
	elems      []*jsonNode  // an array's
}

// jsonMember is a member of an object: its key, from the key's opening
// quote (start), and its value.
type jsonMember struct {
	key   string
	start int
	value *jsonNode
}

// member returns the member of an object with key, and whether it has one.
func (n *jsonNode) member(key string) (jsonMember, bool) {
	for _, m := range n.members {
		if m.key == key {
			return m, true
		}
	}
	return jsonMember{}, false
}

// items returns the spans of an object's members or an array's elements.
func (n *jsonNode) items() [][2]int {
	var spans [][2]int
	for _, m := range n.members {
		spans = append(spans, [2]int{m.start, m.value.end})
	}
	for _, e := range n.elems {
		spans = append(spans, [2]int{e.start, e.end})
	}
	return spans
}

// kindName names a value's kind as an error says it; text is the
// document it was parsed from.
func (n *jsonNode) kindName(text []byte) string {
	switch n.kind {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	}
	switch text[n.start] {
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// SyntaxError is a JSON text that does not parse, or a value of the
// wrong kind: where, as line and column from 1 (the column in characters).
type SyntaxError struct {
	File      string
	Line, Col int
	Msg       string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// syntaxErrorAt returns a SyntaxError at byte offset off of text.
func syntaxErrorAt(file string, text []byte, off int, format string, args ...any) *SyntaxError {
	off = max(0, min(off, len(text)))
	line := 1 + bytes.Count(text[:off], []byte("\n"))
	col := 1 + utf8.RuneCount(text[bytes.LastIndexByte(text[:off], '\n')+1:off])
	return &SyntaxError{File: file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// parseJSONText parses text, a JSON document, into its values and their
// spans. A text that is not JSON gives a *SyntaxError at the first
// byte that makes it so.
func parseJSONText(file string, text []byte) (*jsonNode, error) {
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off := int(se.Offset)
			if off > 0 && off <= len(text) && !strings.Contains(se.Error(), "unexpected end") {
				off-- // the offset is past the byte that broke it
			}
			return nil, syntaxErrorAt(file, text, off, "%s", se.Error())
		}
		return nil, syntaxErrorAt(file, text, 0, "%s", err.Error())
	}
	p := jsonParser{text: text}
	p.space()
	n, err := p.value()
	if err != nil {
		return nil, syntaxErrorAt(file, text, p.pos, "%s", err.Error())
	}
	return n, nil
}

// jsonParser reads the spans of a text encoding/json found valid.
type jsonParser struct {
	text []byte
	pos  int
}

func (p *jsonParser) space() {
	for p.pos < len(p.text) && strings.IndexByte(" \t\r\n", p.text[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *jsonParser) expect(c byte) error {
	if p.pos >= len(p.text) || p.text[p.pos] != c {
		return errors.Newf("expected %q", c)
	}
	p.pos++
	return nil
}

func (p *jsonParser) value() (*jsonNode, error) {
	if p.pos >= len(p.text) {
		return nil, errors.New("unexpected end of JSON input")
	}
	n := &jsonNode{kind: p.text[p.pos], start: p.pos}
	switch n.kind {
	case '{':
		err := p.items('}', func() error {
			key, err := p.value()
			if err != nil {
				return err
			}
			if key.kind != '"' {
				return errors.New("expected a key")
			}
			p.space()
			if err := p.expect(':'); err != nil {
				return err
			}
			p.space()
			v, err := p.value()
			if err != nil {
				return err
			}
			n.members = append(n.members, jsonMember{key: key.str, start: key.start, value: v})
			return nil
		})
		if err != nil {
			return nil, err
		}
	case '[':
		err := p.items(']', func() error {
			v, err := p.value()
			if err != nil {
				return err
			}
			n.elems = append(n.elems, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	case '"':
		p.pos++
		for p.pos < len(p.text) && p.text[p.pos] != '"' {
			if p.text[p.pos] == '\\' {
				p.pos++
			}
			p.pos++
		}
		if err := p.expect('"'); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(p.text[n.start:p.pos], &n.str); err != nil {
			return nil, err
		}
	default:
		n.kind = '0'
		for p.pos < len(p.text) && strings.IndexByte(" \t\r\n,]}", p.text[p.pos]) < 0 {
			p.pos++
		}
	}
	n.end = p.pos
	return n, nil
}

// items reads the items of the object or array at p.pos, each with item,
// up to its closing byte.
func (p *jsonParser) items(closing byte, item func() error) error {
	p.pos++
	p.space()
	for n := 0; p.pos < len(p.text) && p.text[p.pos] != closing; n++ {
		if n > 0 {
			if err := p.expect(','); err != nil {
				return err
			}
			p.space()
		}
		if err := item(); err != nil {
			return err
		}
		p.space()
	}
	return p.expect(closing)
}

// jsonEdit replaces text[start:end] with s.
type jsonEdit struct {
	start, end int
	s          string
}

// apply returns text with e made.
func (e jsonEdit) apply(text []byte) []byte {
	out := make([]byte, 0, len(text)-(e.end-e.start)+len(e.s))
	out = append(out, text[:e.start]...)
	out = append(out, e.s...)
	return append(out, text[e.end:]...)
}

// jsonLayout is how a JSON text is laid out: its line end and its
// indentation step, which inserted text follows.
type jsonLayout struct {
	nl   string // "\n", or "\r\n" when the text has one
	unit string // the indentation of the first indented line; two spaces in a text without one
	flat bool   // the text is one line, with a member or element in it: inserted values are one line too
}

// layoutOf returns the layout of text.
func layoutOf(text []byte) jsonLayout {
	trimmed := bytes.TrimSpace(text)
	l := jsonLayout{nl: "\n", unit: "  ", flat: bytes.IndexByte(trimmed, '\n') < 0 && !isEmptyContainer(trimmed)}
	if bytes.Contains(text, []byte("\r\n")) {
		l.nl = "\r\n"
	}
	for _, line := range bytes.Split(text, []byte("\n"))[1:] {
		ind := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
		if len(ind) > 0 && len(bytes.TrimSpace(line)) > 0 {
			l.unit = string(ind)
			break
		}
	}
	return l
}

// isEmptyContainer reports whether a JSON text is an empty object or
// array: one line, but nothing in it says how its members are laid out.
func isEmptyContainer(text []byte) bool {
	return len(text) >= 2 && (text[0] == '{' || text[0] == '[') && len(bytes.TrimSpace(text[1:len(text)-1])) == 0
}

// lineIndent returns the indentation of the line that holds byte pos.
func lineIndent(text []byte, pos int) string {
	line := text[bytes.LastIndexByte(text[:pos], '\n')+1:]
	return string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
}

// appendItems returns the edit that adds items, in order, as the last
// members of an object or the last elements of an array c. Each item
// renders itself: on lines indented by indent, or on one line when flat.
// After the last item of c the edit inserts, before each new one, a comma
// and the whitespace that stands before that last item, so that the new
// items are laid out as their neighbour is; in an empty c, each on a line
// of its own one step in from c's, or nothing around them in a flat text.
// The edit is the one adding the items one at a time makes. removeItem
// takes exactly the text of each out again.
func appendItems(text []byte, c *jsonNode, l jsonLayout, items ...func(indent string, flat bool) string) jsonEdit {
	spans := c.items()
	var b strings.Builder
	if len(spans) == 0 {
		if l.flat {
			for i, item := range items {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(item("", true))
			}
			return jsonEdit{start: c.start + 1, end: c.start + 1, s: b.String()}
		}
		ind := lineIndent(text, c.start)
		for i, item := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.nl + ind + l.unit + item(ind+l.unit, false))
		}
		b.WriteString(l.nl + ind)
		return jsonEdit{start: c.start + 1, end: c.start + 1, s: b.String()}
	}
	last := spans[len(spans)-1]
	sepFrom := c.start + 1
	if len(spans) > 1 {
		sepFrom = spans[len(spans)-2][1]
		sepFrom += bytes.IndexByte(text[sepFrom:last[0]], ',') + 1
	}
	sep := string(text[sepFrom:last[0]])
	flat := !strings.Contains(sep, "\n")
	indent := sep[strings.LastIndexByte(sep, '\n')+1:]
	for _, item := range items {
		b.WriteString("," + sep + item(indent, flat))
	}
	return jsonEdit{start: last[1], end: last[1], s: b.String()}
}

// removeItem returns the edit that removes item i of an object or array c
// with what separates it from its neighbours: the inverse of appendItems
// for an item it added, whatever came after it since.
func removeItem(text []byte, c *jsonNode, i int, l jsonLayout) jsonEdit {
	spans := c.items()
	switch {
	case len(spans) == 1:
		e := jsonEdit{start: c.start + 1, end: spans[0][1]}
		if tail := l.nl + lineIndent(text, c.start); !l.flat && bytes.HasPrefix(text[e.end:], []byte(tail)) {
			e.end += len(tail)
		}
		return e
	case i > 0:
		return jsonEdit{start: spans[i-1][1], end: spans[i][1]}
	default:
		return jsonEdit{start: spans[0][0], end: spans[1][0]}
	}
}

// shift moves the spans of n and of every value in it past the edit e,
// made on the text they stand in, so that they stand in the text e gives:
// a span from e's end on moves by the length e adds (or takes out); one
// ending where e's replaced bytes end ends where its new ones do; a span
// before e, or ending where e inserts, stays. A value e takes out is gone
// from the text: its parent no longer holds it.
func (n *jsonNode) shift(e jsonEdit) {
	d := len(e.s) - (e.end - e.start)
	if n.start >= e.end {
		n.start += d
	}
	if n.end > e.end || n.end == e.end && e.start < e.end {
		n.end += d
	}
	for i := range n.members {
		if n.members[i].start >= e.end {
			n.members[i].start += d
		}
		n.members[i].value.shift(e)
	}
	for _, v := range n.elems {
		v.shift(e)
	}
}

// jsonObject is an object to render, its members in order; a member's
// value is a string, an int, a jsonObject or a []any of them.
type jsonObject []jsonKV

// jsonKV is a member of a jsonObject.
type jsonKV struct {
	key   string
	value any
}

// renderJSON renders v: on lines indented by indent plus a unit per level
// (the first line is not indented: it follows what comes before it), or
// on one line when flat.
func renderJSON(v any, indent string, l jsonLayout, flat bool) string {
	var b strings.Builder
	var write func(v any, indent string)
	open := func(opening, closing byte, n int, indent string, each func(i int, indent string)) {
		b.WriteByte(opening)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if !flat {
				b.WriteString(l.nl + indent + l.unit)
			}
			each(i, indent+l.unit)
		}
		if !flat && n > 0 {
			b.WriteString(l.nl + indent)
		}
		b.WriteByte(closing)
	}
	write = func(v any, indent string) {
		switch v := v.(type) {
		case jsonObject:
			open('{', '}', len(v), indent, func(i int, indent string) {
				b.WriteString(jsonString(v[i].key) + colon(flat))
				write(v[i].value, indent)
			})
		case []any:
			open('[', ']', len(v), indent, func(i int, indent string) { write(v[i], indent) })
		case string:
			b.WriteString(jsonString(v))
		case int:
			b.WriteString(strconv.Itoa(v))
		default:
			panic(errors.AssertionFailedf("renderJSON: %T", v))
		}
	}
	write(v, indent)
	return b.String()
}

// renderMember renders an object's member key: v, as renderJSON renders.
func renderMember(key string, v any, indent string, l jsonLayout, flat bool) string {
	return jsonString(key) + colon(flat) + renderJSON(v, indent, l, flat)
}

// colon returns what stands between a member's key and its value: a
// space after the colon, unless on one line.
func colon(flat bool) string {
	if flat {
		return ":"
	}
	return ": "
}

// jsonString returns s as a JSON string, <, > and & left alone.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
