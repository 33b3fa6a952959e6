package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/strata-go/strata/tier"
)

// Sources of a resumed context.
const (
	SourceMarker     = "marker"
	SourceCheckpoint = "checkpoint"
)

// Context is what a resuming agent gets: summary nodes (roots, in order)
// followed by the raw events after the last of them. Source says what served
// it and Reason why (for a fallback, the recorded invalidation or the reason
// no marker was usable).
type Context struct {
	Session    string
	Source     string // SourceMarker or SourceCheckpoint
	Marker     uint64 // the marker asked for or used; 0 if none
	Checkpoint uint64 // the checkpoint that served; 0 when a marker served
	Reason     string
	Boundary   uint64 // the nodes cover the raw log up to this seq
	Head       uint64 // the session's last seq
	Nodes      []tier.Node
	Events     []tier.Event
	// Fork is where the session came from when it is a fork; nil for a
	// session of its own. It is not part of the text: a fork's context at
	// its fork point is its parent's.
	Fork *Fork
}

// Fork is where a fork came from: the session it was forked from (Parent),
// the parent's head at the fork (At: the fork's events up to it are the
// parent's) and the parent's state it took — the frame of marker Marker,
// or, for a fork at a fallback, checkpoint Checkpoint (Marker then the
// marker that was not valid, 0 for none).
type Fork struct {
	Parent     string `json:"parent"`
	At         uint64 `json:"fork_seq"`
	Marker     uint64 `json:"fork_marker,omitempty"`
	Checkpoint uint64 `json:"fork_checkpoint,omitempty"`
}

// IsFork reports whether f is a fork's origin (not the zero value).
func (f Fork) IsFork() bool { return f.Parent != "" }

// Point names the parent's state the fork took: "marker M", or
// "checkpoint C (marker M not valid)" for a fork at a fallback.
func (f Fork) Point() string {
	switch {
	case f.Checkpoint == 0:
		return "marker " + strconv.FormatUint(f.Marker, 10)
	case f.Marker != 0:
		return fmt.Sprintf("checkpoint %d (marker %d not valid)", f.Checkpoint, f.Marker)
	default:
		return fmt.Sprintf("checkpoint %d (no valid marker)", f.Checkpoint)
	}
}

// Text renders c for a model. The rendering is canonical: it depends only
// on c's fields, and lists are rendered in their stored order.
func (c *Context) Text() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# strata context\nsession: %s\n", oneLine(c.Session))
	switch c.Source {
	case SourceMarker:
		fmt.Fprintf(&b, "source: marker %d\n", c.Marker)
	default:
		fmt.Fprintf(&b, "source: checkpoint %d\n", c.Checkpoint)
		if c.Marker != 0 {
			fmt.Fprintf(&b, "marker: %d (not used)\n", c.Marker)
		}
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", oneLine(c.Reason))
	}
	for i := range c.Nodes {
		if n := &c.Nodes[i]; n.Unchecked {
			fmt.Fprintf(&b, "UNCHECKED: node %d was committed without validation; its claims are the summarizer's\n", n.ID)
		}
	}
	if c.Boundary == 0 {
		fmt.Fprintf(&b, "summarized: nothing\nhead: seq %d\n", c.Head)
	} else {
		fmt.Fprintf(&b, "summarized: seq 1..%d\nhead: seq %d\n", c.Boundary, c.Head)
	}
	for i := range c.Nodes {
		writeNode(&b, &c.Nodes[i])
	}
	if len(c.Events) > 0 {
		fmt.Fprintf(&b, "\n## raw seq %d..%d\n", c.Events[0].Seq, c.Events[len(c.Events)-1].Seq)
		for i := range c.Events {
			writeEvent(&b, &c.Events[i])
		}
	}
	return b.Bytes()
}

// NodeText renders one node as it appears in a context: its heading,
// narrative and claims.
func NodeText(n *tier.Node) string {
	var b bytes.Buffer
	writeNode(&b, n)
	return b.String()
}

// NodeTextLen returns len(NodeText(n)) without keeping the text: what a
// token estimate needs (a commit, a summarizer fitting a budget), in a
// buffer used again rather than a new string each time.
func NodeTextLen(n *tier.Node) int {
	b := nodeBufs.Get().(*bytes.Buffer)
	b.Reset()
	writeNode(b, n)
	l := b.Len()
	if b.Cap() <= maxPooledNodeBuf {
		nodeBufs.Put(b)
	}
	return l
}

// EventTextLen returns the length in bytes of raw event e as a context
// renders it (Text, after the "## raw" heading): the size a store counts
// for its uncompacted tail, in a buffer used again rather than a new string
// each time.
func EventTextLen(e *tier.Event) int {
	b := nodeBufs.Get().(*bytes.Buffer)
	b.Reset()
	writeEvent(b, e)
	l := b.Len()
	if b.Cap() <= maxPooledNodeBuf {
		nodeBufs.Put(b)
	}
	return l
}

// nodeBufs holds NodeTextLen's and EventTextLen's buffers; one larger than
// maxPooledNodeBuf (a node of huge claims, an event of a huge text) is left
// to the garbage collector.
var nodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledNodeBuf = 1 << 20

// writeNode and writeEvent build their lines with appends rather than fmt:
// rendering is most of what a resume costs. ref_test.go keeps the fmt
// versions they must match byte for byte.
func writeNode(b *bytes.Buffer, n *tier.Node) {
	b.WriteString("\n## ")
	b.WriteString(n.Depth.String())
	b.WriteString(" summary ")
	writeUint(b, n.ID)
	b.WriteString(", seq ")
	writeUint(b, n.From)
	b.WriteString("..")
	writeUint(b, n.To)
	if n.Unchecked {
		b.WriteString(" (UNCHECKED)")
	}
	b.WriteByte('\n')
	if n.Narrative != "" {
		// The narrative is the summarizer's free text: labelled so, and
		// indented, so that no line of it can pass for a heading or a
		// validated claim ("- ...").
		b.WriteString(NarrativeLabel)
		s := strings.TrimRight(n.Narrative, lineBreaks)
		for {
			i, w := indexLineBreak(s)
			b.WriteString("  ")
			if i < 0 {
				writeEscaped(b, s)
				b.WriteByte('\n')
				break
			}
			writeEscaped(b, s[:i])
			b.WriteByte('\n')
			s = s[i+w:]
		}
	}
	if n.Claims.Count() > 0 {
		if n.Unchecked {
			b.WriteString(UncheckedClaimsLabel)
		} else {
			b.WriteString(CheckedClaimsLabel)
		}
	}
	writeClaims(b, &n.Claims)
}

// The labels a node's narrative and claims are rendered under: the
// narrative is the summarizer's words, which nothing checks; the claims of
// a checked node are the raw log's facts, validated when it was committed.
const (
	NarrativeLabel       = "narrative (the summarizer's words, unchecked):\n"
	CheckedClaimsLabel   = "state (checked against the raw log):\n"
	UncheckedClaimsLabel = "state (the summarizer's claims, UNCHECKED):\n"
)

// ClaimLines returns the lines the claims of c take in a context (Text,
// under a node's heading), each without its line break, in the order a
// node lists them: requests, plan, UNRESOLVED, resolved, FAILED,
// dispositions, constraints, artifacts. Each claim is one line: a text
// holding a line break or another control character is quoted.
func ClaimLines(c *tier.Claims) []string {
	if c.Count() == 0 {
		return nil
	}
	var b bytes.Buffer
	writeClaims(&b, c)
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// writeClaims writes one line per claim of cl.
func writeClaims(b *bytes.Buffer, cl *tier.Claims) {
	for _, r := range cl.Requests {
		b.WriteString("- user request at seq ")
		writeUint(b, r.Seq)
		b.WriteString(": ")
		b.WriteString(oneLine(r.Text))
		b.WriteByte('\n')
	}
	if cl.RequestsLeftOut > 0 {
		b.WriteString("- user requests not listed: ")
		writeUint(b, uint64(cl.RequestsLeftOut))
		b.WriteByte('\n')
	}
	if cl.PlanAt != 0 && len(cl.Plan) == 0 {
		b.WriteString("- plan of seq ")
		writeUint(b, cl.PlanAt)
		b.WriteString(": no open item\n")
	}
	for _, p := range cl.Plan {
		b.WriteString("- plan item of seq ")
		writeUint(b, p.Seq)
		b.WriteString(", ")
		b.WriteString(oneLine(p.Status))
		b.WriteString(": ")
		b.WriteString(oneLine(p.Key))
		b.WriteByte('\n')
	}
	for _, o := range cl.Unresolved {
		b.WriteString("- UNRESOLVED ")
		writeInvocation(b, o.Kind, o.ID, o.Name, o.Seq)
		writeTarget(b, o.Target)
		b.WriteByte('\n')
	}
	for _, r := range cl.Resolved {
		// One line per invocation: an id can be resolved here and open
		// again, and each line says which opening it closes.
		b.WriteString("- resolved: ")
		writeInvocation(b, r.Kind, r.ID, r.Name, r.Seq)
		if r.Failed {
			b.WriteString(": FAILED")
		} else {
			b.WriteString(": ok")
		}
		if r.At != 0 {
			b.WriteString(" at seq ")
			writeUint(b, r.At)
		}
		b.WriteByte('\n')
	}
	for _, r := range cl.Failures {
		b.WriteString("- FAILED ")
		writeInvocation(b, r.Kind, r.ID, r.Name, r.Seq)
		writeTarget(b, r.Target)
		if r.At != 0 {
			b.WriteString(", failed at seq ")
			writeUint(b, r.At)
		}
		if r.Fixed != 0 {
			b.WriteString(", fixed at seq ")
			writeUint(b, r.Fixed)
		}
		writeDash(b, r.Reason)
		b.WriteByte('\n')
	}
	for _, d := range cl.Dispositions {
		b.WriteString("- ")
		b.WriteString(tier.StateName(d.State))
		b.WriteString(": ")
		b.WriteString(oneLine(d.Key))
		if d.By != "" {
			b.WriteString(" (by ")
			b.WriteString(oneLine(d.By))
			b.WriteByte(')')
		}
		if d.FailedAt != 0 {
			b.WriteString(" (failed at seq ")
			writeUint(b, d.FailedAt)
			b.WriteByte(')')
		}
		writeDash(b, d.Reason)
		b.WriteByte('\n')
	}
	for _, c := range cl.Constraints {
		if c.Withdrawn {
			b.WriteString("- constraint withdrawn: ")
			b.WriteString(oneLine(c.Key))
			b.WriteByte('\n')
			continue
		}
		b.WriteString("- constraint: ")
		b.WriteString(oneLine(c.Key))
		writeDash(b, c.Text)
		b.WriteByte('\n')
	}
	for _, a := range cl.Artifacts {
		b.WriteString("- artifact: ")
		b.WriteString(oneLine(a.Key))
		writeDash(b, a.Text)
		b.WriteByte('\n')
	}
}

func writeEvent(b *bytes.Buffer, e *tier.Event) {
	b.WriteByte('[')
	writeUint(b, e.Seq)
	b.WriteString(" t")
	writeUint(b, e.Turn)
	b.WriteString("] ")
	b.WriteString(e.Kind.String())
	switch {
	case e.Kind.Opens():
		b.WriteByte(' ')
		b.WriteString(oneLine(e.ID))
		writeParen(b, e.Name)
	case e.Kind.Resolves():
		b.WriteByte(' ')
		b.WriteString(oneLine(e.ID))
		if e.Failed {
			b.WriteString(" FAILED")
		} else {
			b.WriteString(" ok")
		}
		if e.Key != "" {
			b.WriteString(" key=")
			b.WriteString(oneLine(e.Key))
		}
	case e.Kind.NeedsKey():
		b.WriteByte(' ')
		b.WriteString(oneLine(e.Key))
		if e.By != "" {
			b.WriteString(" (by ")
			b.WriteString(oneLine(e.By))
			b.WriteByte(')')
		}
	}
	if s := e.Text; s != "" {
		// Text keeps its lines, each indented, so that a line of text can
		// never look like the start of another event.
		b.WriteString(":")
		for {
			i, w := indexLineBreak(s)
			b.WriteString("\n    ")
			if i < 0 {
				writeEscaped(b, s)
				break
			}
			writeEscaped(b, s[:i])
			s = s[i+w:]
		}
	}
	b.WriteByte('\n')
}

// writeUint writes v in decimal.
func writeUint(b *bytes.Buffer, v uint64) {
	b.Write(strconv.AppendUint(b.AvailableBuffer(), v, 10))
}

// writeTarget writes " on TARGET" — what a call worked on — or nothing
// for none.
func writeTarget(b *bytes.Buffer, target string) {
	if target != "" {
		b.WriteString(" on ")
		b.WriteString(oneLine(target))
	}
}

// writeEscaped writes s (a line: no line break) with every other control
// character escaped as Go does (\x1b, \b), so that no terminal acts on
// it — moves the cursor back, erases, starts an escape sequence — and
// shows a line that is not there. Tab is written as it is.
func writeEscaped(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); {
		j := controlAt(s, i)
		if j < 0 {
			b.WriteString(s[i:])
			return
		}
		b.WriteString(s[i:j])
		r, w := utf8.DecodeRuneInString(s[j:])
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
		i = j + w
	}
}

// EscapeControls returns s with its control characters but tab and the
// line breaks escaped, as a context renders a line of text.
func EscapeControls(s string) string {
	if controlAt(s, 0) < 0 {
		return s
	}
	var b bytes.Buffer
	writeEscaped(&b, s)
	return b.String()
}

// controlAt returns the index of the first control character of s at or
// after i, but tab: C0, DEL and C1 (U+0080..U+009F); -1 for none.
func controlAt(s string, i int) int {
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 && c != '\t', c == 0x7f:
			return i
		case c == 0xC2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] < 0xa0:
			return i
		}
	}
	return -1
}

// writeParen writes " (s)", or nothing for an empty s.
func writeParen(b *bytes.Buffer, s string) {
	if s != "" {
		b.WriteString(" (")
		b.WriteString(oneLine(s))
		b.WriteByte(')')
	}
}

// writeDash writes " — s", or nothing for an empty s.
func writeDash(b *bytes.Buffer, s string) {
	if s != "" {
		b.WriteString(" — ")
		b.WriteString(oneLine(s))
	}
}

// writeInvocation writes "call c1 (bash), opened at seq 5".
func writeInvocation(b *bytes.Buffer, kind tier.Kind, id, name string, seq uint64) {
	b.WriteString(openNoun(kind))
	b.WriteByte(' ')
	b.WriteString(oneLine(id))
	writeParen(b, name)
	if seq != 0 {
		b.WriteString(", opened at seq ")
		writeUint(b, seq)
	}
}

func openNoun(k tier.Kind) string {
	if k == tier.KindOpen {
		return "resource"
	}
	return "call"
}

// lineBreaks are every line boundary a common splitter honours: Unicode's
// mandatory line breaks (UAX #14: LF, CR, BK, NL) and the file, group and
// record separators (U+001C..U+001E) that Python's str.splitlines also
// splits on. A reader that splits lines on any of them — not only on "\n" —
// must still see each event start on its own header line and nowhere else.
const lineBreaks = "\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029"

// maybeBreak marks the bytes that can start a line break of lineBreaks:
// the ASCII ones, and the lead bytes of U+0085 (C2 85) and U+2028/9
// (E2 80 A8/A9).
var maybeBreak = func() (t [256]bool) {
	for _, b := range []byte{'\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0xC2, 0xE2} {
		t[b] = true
	}
	return t
}()

// indexLineBreak returns the index in s of the first line break of
// lineBreaks and its width in bytes ("\r\n" is one break of 2), or -1, 0.
// It is strings.IndexAny(s, lineBreaks) without decoding every rune: the
// rendering of a context runs it over every line it writes.
func indexLineBreak(s string) (int, int) {
	for i := 0; i < len(s); i++ {
		if !maybeBreak[s[i]] {
			continue
		}
		switch c := s[i]; {
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			return i, 2
		case c < 0x80:
			return i, 1
		case c == 0xC2 && i+1 < len(s) && s[i+1] == 0x85:
			return i, 2
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
			return i, 3
		}
	}
	return -1, 0
}

// oneLine quotes s if it holds a line break or another control
// character (but tab), so that it stays on its line and no terminal acts
// on it.
func oneLine(s string) string {
	if i, _ := indexLineBreak(s); i >= 0 || controlAt(s, 0) >= 0 {
		return quote(s)
	}
	return s
}

// quote returns strconv.Quote(s), byte for byte, faster on text that is
// mostly printable ASCII (tool output, logs): such runs are copied, and
// strconv quotes only the runs between them — its escaping is rune by
// rune, so quoting the pieces apart gives the same bytes.
func quote(s string) string {
	out := make([]byte, 0, len(s)+len(s)/8+2)
	out = append(out, '"')
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && plainASCII(s[j]) {
			j++
		}
		out = append(out, s[i:j]...)
		k := j
		for k < len(s) && !plainASCII(s[k]) {
			k++
		}
		if k > j {
			q := strconv.AppendQuote(nil, s[j:k])
			out = append(out, q[1:len(q)-1]...)
		}
		i = k
	}
	return string(append(out, '"'))
}

// plainASCII reports whether strconv.Quote writes b as it is.
func plainASCII(b byte) bool { return b >= 0x20 && b < 0x7f && b != '"' && b != '\\' }

// SHA256 returns the hex sha256 of the text rendering.
func (c *Context) SHA256() string {
	sum := sha256.Sum256(c.Text())
	return hex.EncodeToString(sum[:])
}

// JSONContext is the JSON rendering of a Context, the form `strata resume
// --json` prints.
type JSONContext struct {
	Session    string           `json:"session"`
	Source     string           `json:"source"`
	Marker     *uint64          `json:"marker"`
	Checkpoint *uint64          `json:"checkpoint"`
	Reason     string           `json:"reason"`
	SHA256     string           `json:"sha256"`
	Boundary   uint64           `json:"boundary"`
	Head       uint64           `json:"head_seq"`
	Context    string           `json:"context"` // the text rendering
	Nodes      []tier.Node      `json:"nodes"`
	Events     []tier.EventJSON `json:"events"`
	Fork       *Fork            `json:"fork,omitempty"` // a fork's origin
}

// JSON renders c for programs: its fields, the text rendering and its
// sha256. Like Text, it depends only on c.
func (c *Context) JSON() ([]byte, error) {
	text := c.Text()
	sum := sha256.Sum256(text)
	j := JSONContext{
		Session: c.Session, Source: c.Source, Reason: c.Reason,
		SHA256: hex.EncodeToString(sum[:]), Boundary: c.Boundary, Head: c.Head,
		Context: string(text), Nodes: c.Nodes, Events: make([]tier.EventJSON, len(c.Events)),
		Fork: c.Fork,
	}
	if j.Nodes == nil {
		j.Nodes = []tier.Node{}
	}
	if c.Marker != 0 {
		m := c.Marker
		j.Marker = &m
	}
	if c.Checkpoint != 0 {
		k := c.Checkpoint
		j.Checkpoint = &k
	}
	for i := range c.Events {
		j.Events[i] = c.Events[i].ToJSON("")
	}
	return json.MarshalIndent(j, "", "  ")
}
