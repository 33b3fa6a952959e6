package dump

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Options say what to dump. The zero value dumps every session without
// its raw events.
type Options struct {
	// Session, when not empty, restricts the dump to this session; one that
	// does not exist is store.ErrSessionNotFound, before any output.
	Session string
	// Raw includes the raw events (JSON and Text only): in the JSON
	// document each session's "events" array, in the text form JSONL lines
	// after the session. Their form is that of docs/events.md, so
	// that replaying them gives the same dump.
	Raw bool
	// From and To, when either is not zero, restrict each session to the
	// seq range From..To (0: the first seq, the head): its nodes are those
	// whose span overlaps the range, and its events, given whether Raw is
	// set or not, those within it. The rest of the session (frame, roots,
	// markers, checkpoints, ledger, audit) is left out. Dot ignores them.
	// With Session, a From past the session's head is a *RangeError
	// (ErrPastHead), before any output.
	From, To uint64
}

// ranged reports whether the options restrict the dump to a seq range.
func (o *Options) ranged() bool { return o.From != 0 || o.To != 0 }

// span returns the seq range of a session whose head is head: From..To,
// with 0 read as 1 and as head.
func (o *Options) span(head uint64) (from, to uint64) {
	from, to = max(o.From, 1), o.To
	if to == 0 || to > head {
		to = head
	}
	return from, to
}

// overlaps reports whether node n's span overlaps the range of a session
// whose head is head.
func (o *Options) overlaps(n *tier.Node, head uint64) bool {
	from, to := o.span(head)
	return n.From <= to && n.To >= from
}

// JSON writes the JSON document of the snapshot to w: {"format_version":…,
// "sessions":[{"id", "head_seq", "turn", "frame", "roots", "nodes",
// "markers", "checkpoints", "ledger", "audit", and with Options.Raw
// "events"}]}, indented by two spaces, lists never null, <, > and & left
// alone. Arrays are streamed one element at a time. With a seq range
// (Options.From, Options.To) a session's object is {"id", "head_seq",
// "turn", "from", "to", "nodes", "events"}: the nodes overlapping the range
// and the events within it.
func JSON(w io.Writer, s *store.Snapshot, opts Options) error {
	return render(w, s, opts, (*dumper).writeJSON)
}

// Text writes the readable form of the snapshot to w: per session, the
// frame, each root with the nodes it covers indented below it, the
// markers, the checkpoints, the ledger at head, the audit of refused
// compactions and, with Options.Raw, the events as unindented JSONL lines.
// With a seq range, per session: the nodes overlapping it, then the events
// within it as JSONL lines.
func Text(w io.Writer, s *store.Snapshot, opts Options) error {
	return render(w, s, opts, (*dumper).writeText)
}

// Dot writes a Graphviz (DOT) picture of the snapshot to w: one cluster
// per session; the raw log (L0) as one box per compacted span and one for
// the uncompacted tail; summary nodes by depth, above the boxes they
// cover, with an edge from each child to its parent; markers as notes
// beside their node, red with the reason when invalid; checkpoints below
// the raw box their replay starts in, red when invalid; refused
// compactions as notes with their reasons. The same snapshot always gives
// the same bytes. Options.Raw is ignored.
func Dot(w io.Writer, s *store.Snapshot, opts Options) error {
	return render(w, s, opts, (*dumper).writeDot)
}

// dumper is one rendering in progress.
type dumper struct {
	s    *store.Snapshot
	opts Options
	out  *countingWriter // the output, counted
	w    *bufio.Writer

	released int64 // output bytes at the last ReleaseMapped
	records  int   // records written
}

// render resolves the sessions to dump and calls write with them, then
// flushes the output.
func render(w io.Writer, s *store.Snapshot, opts Options, write func(d *dumper, format int, ids []string) error) (err error) {
	var ids []string
	if opts.Session != "" {
		if err := store.CheckSession(opts.Session); err != nil {
			return err
		}
		info, err := s.Info(opts.Session)
		if err != nil {
			return err
		}
		if opts.ranged() && opts.From > info.Head {
			return &RangeError{Session: opts.Session, From: opts.From, To: opts.To, Head: info.Head}
		}
		ids = []string{opts.Session}
	} else if ids, err = s.Sessions(); err != nil {
		return err
	}
	format, err := s.FormatVersion()
	if err != nil {
		return err
	}
	d := &dumper{s: s, opts: opts, out: &countingWriter{w: w}}
	d.w = bufio.NewWriterSize(d.out, 64<<10)
	err = write(d, format, ids)
	if ferr := d.w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// releaseEvery is how many bytes a dump writes between two calls of
// Snapshot.ReleaseMapped: a dump of a database larger than memory then
// keeps a bounded resident set (the pages read since the last call)
// instead of the whole mapped file. The output is about as large as the
// records it was read from.
const releaseEvery = 8 << 20

// releaseRecords bounds the records between two calls of ReleaseMapped
// too: small records (markers, checkpoints) are read through pages that
// their output does not account for.
const releaseRecords = 2048

// written is called after each record written; every releaseEvery bytes
// of output it lets the kernel take back the database pages read so far.
func (d *dumper) written() {
	d.records++
	if d.out.n-d.released >= releaseEvery || d.records%releaseRecords == 0 {
		d.released = d.out.n
		d.s.ReleaseMapped()
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

// Write implements io.Writer.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// frame is a session's frame in the JSON dump.
type frame struct {
	Version     uint64 `json:"version"`
	Depth       int    `json:"depth"` // the greatest depth among the roots; 0 with no root
	CompactedTo uint64 `json:"compacted_to"`
	Roots       int    `json:"roots"`
	RefusedTo   uint64 `json:"refused_to"`
}

// frameOf returns the frame of a session: its info and the depth of its
// deepest root.
func frameOf(info store.Info, roots []tier.Node) frame {
	f := frame{Version: info.FrameVersion, CompactedTo: info.CompactedTo, Roots: info.Roots, RefusedTo: info.RefusedTo}
	for i := range roots {
		f.Depth = max(f.Depth, int(roots[i].Depth))
	}
	return f
}

// joinIDs returns ids as "1,2,3".
func joinIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(parts, ",")
}

// bracketIDs returns ids as "[1,2]".
func bracketIDs(ids []uint64) string { return "[" + joinIDs(ids) + "]" }

// fieldValue returns s as a key=value field value: as is, or quoted when it
// holds a space, a quote or an equals sign that would break the line apart.
func fieldValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"=") {
		return strconv.Quote(s)
	}
	return s
}

// oneLine keeps s on one line.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\n\r") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
