package transcript

import (
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// Format names a transcript format.
type Format string

// The formats Read understands.
const (
	// OpenAI is OpenAI chat messages: a JSON array of messages, one message
	// per line (JSONL), or an object with "messages". Responses API items
	// (function_call, function_call_output, message) are read too.
	OpenAI Format = "openai"
	// Anthropic is Anthropic Messages: an array of messages, one per line,
	// or an object with "messages" (and "system").
	Anthropic Format = "anthropic"
	// ClaudeCode is a Claude Code session file
	// (~/.claude/projects/<dir>/<session>.jsonl): one record per line.
	ClaudeCode Format = "claude-code"
)

// Formats lists the formats in the order the command line documents them.
func Formats() []Format { return []Format{OpenAI, Anthropic, ClaudeCode} }

// ParseFormat returns the format named s, or an error wrapping
// ErrUnknownFormat.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, 0, 3)
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", errors.WithHintf(errors.Wrapf(ErrUnknownFormat, "%q", s), "the formats are %s", strings.Join(names, ", "))
}

// Options tune a Decoder. The zero value reads a main transcript with the
// store's default limits.
type Options struct {
	// File names the input in errors; "" means "stdin".
	File string
	// Limits are the event size limits of the store the events go to; zero
	// fields mean tier's defaults. Texts over the limit are clipped
	// (Report.Clipped), ids over it shortened with a hash (Report.FixedIDs).
	Limits tier.Limits
	// Open lists the calls already open in the session the events will be
	// appended to (Snapshot.Ledger's OpenList), so that a result in this
	// transcript resolves them and a new call of the same id is renamed.
	// Nil means none.
	Open []tier.Open
	// Sidechains keeps the sidechain records (sub-agent work) of a Claude
	// Code main session. By default they are skipped and counted
	// (Report.Sidechain): the sub-agent's outcome is the result of the
	// call that started it. A file whose first message is a sidechain (a
	// sub-agent's own transcript) is always read whole.
	Sidechains bool
	// Dir is the directory the agent worked in: the files of artifact and
	// rejected keys under it are named relative to it. Empty means none,
	// except for Claude Code, whose records carry their "cwd".
	Dir string
	// MaxRecordBytes bounds one line or one top-level JSON value; zero
	// means DefaultMaxRecordBytes.
	MaxRecordBytes int
}

// DefaultMaxRecordBytes is the default bound of one record: Claude Code
// lines holding pasted images run to megabytes.
const DefaultMaxRecordBytes = 64 << 20

// Report counts what a transcript held and every quirk met on the way. No
// quirk is an error: each is handled as its comment says, and counted.
type Report struct {
	Records     int `json:"records"`     // records read: messages, items or JSONL lines
	Events      int `json:"events"`      // events produced
	Messages    int `json:"messages"`    // user, assistant and system events
	Calls       int `json:"calls"`       // tool_call events
	Results     int `json:"results"`     // tool_result events
	Failed      int `json:"failed"`      // tool_result events with ok:false (rejections included)
	Rejected    int `json:"rejected"`    // rejected events: tool uses the user refused
	Artifacts   int `json:"artifacts"`   // artifact events: files written or edited by a successful call
	Compactions int `json:"compactions"` // Claude Code compaction boundaries (a system event each)
	Interrupts  int `json:"interrupts"`  // "[Request interrupted by user…]" messages (a system event each)

	RenamedCalls     int `json:"renamed_calls"`     // a call id opened again while still open: the new call is renamed "id#2" …, results resolve the oldest first
	OrphanResults    int `json:"orphan_results"`    // results that resolve no open call: kept as a system event naming the id
	DuplicateRecords int `json:"duplicate_records"` // Claude Code records whose uuid was already read: skipped
	Sidechain        int `json:"sidechain"`         // Claude Code sidechain records of a main session: skipped (see Options.Sidechains)
	Malformed        int `json:"malformed"`         // records or blocks of a known type with a field of an unexpected JSON type: skipped
	BadTimes         int `json:"bad_times"`         // timestamps that are not RFC 3339 or Unix seconds, or out of range: the store's clock applies
	Clipped          int `json:"clipped"`           // texts cut to the event size limit
	FixedIDs         int `json:"fixed_ids"`         // ids, names or keys with control characters or over the size limit: repaired
	InvalidUTF8      int `json:"invalid_utf8"`      // bytes of invalid UTF-8 and escaped lone surrogates ("\ud800") in the input: each read as U+FFFD
	MissingIDs       int `json:"missing_ids"`       // calls without an id: given "noid-N"
	Unresolved       int `json:"unresolved"`        // calls of this transcript still open at its end: they stay open in the ledger

	Skipped map[string]int `json:"skipped,omitempty"` // records and blocks left out by design, by type: "thinking", "progress", "system/turn_duration"…
	Unknown map[string]int `json:"unknown,omitempty"` // records, roles and blocks this package does not know, by type: "role/critic", "block/x"…
}

func (r *Report) skip(m *map[string]int, what string) {
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[what]++
}

// Quirks returns the sum of the quirk counters and of Unknown: zero for a
// transcript read exactly as written.
func (r *Report) Quirks() int {
	n := r.RenamedCalls + r.OrphanResults + r.DuplicateRecords + r.Malformed + r.BadTimes +
		r.Clipped + r.FixedIDs + r.MissingIDs + r.InvalidUTF8
	for _, v := range r.Unknown {
		n += v
	}
	return n
}

// Add adds the counts of o to r (the totals of several files).
func (r *Report) Add(o Report) {
	r.Records += o.Records
	r.Events += o.Events
	r.Messages += o.Messages
	r.Calls += o.Calls
	r.Results += o.Results
	r.Failed += o.Failed
	r.Rejected += o.Rejected
	r.Artifacts += o.Artifacts
	r.Compactions += o.Compactions
	r.Interrupts += o.Interrupts
	r.RenamedCalls += o.RenamedCalls
	r.OrphanResults += o.OrphanResults
	r.DuplicateRecords += o.DuplicateRecords
	r.Sidechain += o.Sidechain
	r.Malformed += o.Malformed
	r.BadTimes += o.BadTimes
	r.Clipped += o.Clipped
	r.FixedIDs += o.FixedIDs
	r.InvalidUTF8 += o.InvalidUTF8
	r.MissingIDs += o.MissingIDs
	r.Unresolved += o.Unresolved
	for _, m := range []struct{ to, from *map[string]int }{{&r.Skipped, &o.Skipped}, {&r.Unknown, &o.Unknown}} {
		for k, v := range *m.from {
			if *m.to == nil {
				*m.to = map[string]int{}
			}
			(*m.to)[k] += v
		}
	}
}

// Fields returns the counts as key=value fields in a fixed order: the
// totals always, every other count when it is not zero. Skipped and Unknown
// read "skipped=progress:3,thinking:2".
func (r *Report) Fields() []string {
	out := []string{
		"records=" + strconv.Itoa(r.Records),
		"events=" + strconv.Itoa(r.Events),
	}
	for _, f := range []struct {
		name string
		n    int
	}{
		{"messages", r.Messages}, {"calls", r.Calls}, {"results", r.Results}, {"failed", r.Failed},
		{"rejected", r.Rejected}, {"artifacts", r.Artifacts}, {"compactions", r.Compactions},
		{"interrupts", r.Interrupts}, {"renamed_calls", r.RenamedCalls}, {"orphan_results", r.OrphanResults},
		{"duplicate_records", r.DuplicateRecords}, {"sidechain", r.Sidechain}, {"malformed", r.Malformed},
		{"bad_times", r.BadTimes}, {"clipped", r.Clipped}, {"fixed_ids", r.FixedIDs},
		{"missing_ids", r.MissingIDs}, {"invalid_utf8", r.InvalidUTF8}, {"unresolved", r.Unresolved},
	} {
		if f.n != 0 {
			out = append(out, f.name+"="+strconv.Itoa(f.n))
		}
	}
	for _, m := range []struct {
		name string
		m    map[string]int
	}{{"skipped", r.Skipped}, {"unknown", r.Unknown}} {
		if len(m.m) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m.m)) {
			parts = append(parts, fieldSafe(k)+":"+strconv.Itoa(m.m[k]))
		}
		out = append(out, m.name+"="+strings.Join(parts, ","))
	}
	return out
}

// String returns Fields joined by spaces.
func (r Report) String() string { return strings.Join(r.Fields(), " ") }

// fieldSafe keeps a type name from breaking a key=value line: types come
// from the input.
func fieldSafe(s string) string {
	s = tier.TruncateUTF8(s, 40)
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == ',' || r == ':' || r == '=' || r == '"' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

// Decoder reads a transcript and returns its events one at a time. It holds
// one record in memory (a JSONL line; for the array and object forms, the
// whole document), the events it maps to, and the calls still open.
type Decoder struct {
	src    source
	handle func(raw []byte) error
	b      *builder
	q      []pending
	line   int
	done   bool
	err    error
}

// pending is an event and the line of the record it came from.
type pending struct {
	e    tier.Event
	line int
}

// source yields the records of an input: raw JSON values and the line each
// starts on.
type source interface {
	next() (raw []byte, line int, err error)
}

// NewDecoder returns a Decoder of r in format f. The only error is an
// unknown format.
func NewDecoder(f Format, r io.Reader, opts Options) (*Decoder, error) {
	if opts.File == "" {
		opts.File = "stdin"
	}
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	b := newBuilder(opts)
	d := &Decoder{b: b}
	switch f {
	case OpenAI:
		d.src = newValueSource(r, opts.File, opts.MaxRecordBytes)
		d.handle = (&openaiReader{b: b}).record
	case Anthropic:
		d.src = newValueSource(r, opts.File, opts.MaxRecordBytes)
		d.handle = (&anthropicReader{b: b}).record
	case ClaudeCode:
		d.src = newLineSource(r, opts.File, opts.MaxRecordBytes)
		d.handle = newClaudeCodeReader(b).record
	default:
		_, err := ParseFormat(string(f))
		return nil, err
	}
	return d, nil
}

// Next returns the next event, io.EOF after the last, or a *LineError for
// bad input (after which Next keeps returning it). Events have no Seq or
// Turn: the store assigns them.
func (d *Decoder) Next() (tier.Event, error) {
	for len(d.q) == 0 {
		if d.err != nil {
			return tier.Event{}, d.err
		}
		if d.done {
			return tier.Event{}, io.EOF
		}
		raw, line, err := d.src.next()
		if err == io.EOF {
			d.done = true
			d.b.finish()
		} else if err != nil {
			d.err = err
			return tier.Event{}, err
		} else {
			d.b.line = line
			d.b.rep.Records++
			d.b.rep.InvalidUTF8 += replacements(raw)
			if err := d.handle(raw); err != nil {
				var le *LineError
				if !errors.As(err, &le) {
					err = &LineError{File: d.b.opts.File, Line: d.b.line, Err: err}
				}
				d.err = err
				return tier.Event{}, err
			}
		}
		if d.b.err != nil {
			d.err = d.b.err
			return tier.Event{}, d.err
		}
		d.q = append(d.q, d.b.out...)
		d.b.out = d.b.out[:0]
	}
	p := d.q[0]
	d.q = d.q[1:]
	d.line = p.line
	return p.e, nil
}

// Line returns the line (from 1) of the record the last event Next
// returned came from.
func (d *Decoder) Line() int { return d.line }

// Report returns the counts so far; after io.EOF, of the whole transcript.
func (d *Decoder) Report() Report { return *d.b.rep }

// Open returns the calls open after the events returned so far (after
// io.EOF: at the transcript's end), with the ids the events carry: pass
// them as Options.Open to the decoder of a transcript that continues the
// session.
func (d *Decoder) Open() []tier.Open { return d.b.openList() }

// Read reads a whole transcript in format f and returns its events, the
// report, and a *LineError for bad input (with the events before the bad
// record; callers that want all or nothing drop them).
func Read(f Format, r io.Reader, opts Options) ([]tier.Event, Report, error) {
	d, err := NewDecoder(f, r, opts)
	if err != nil {
		return nil, Report{}, err
	}
	var evs []tier.Event
	for {
		e, err := d.Next()
		if err == io.EOF {
			return evs, d.Report(), nil
		}
		if err != nil {
			return evs, d.Report(), err
		}
		evs = append(evs, e)
	}
}
