package transcript

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
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
	// per line (JSONL), or conversations holding them (an object with
	// "messages", a list of such objects: see Decoder). Responses API items
	// (function_call, function_call_output, message) and ShareGPT's
	// from/value messages are read too.
	OpenAI Format = "openai"
	// Anthropic is Anthropic Messages: an array of messages, one per line,
	// or conversations holding them (an object with "messages" and
	// "system", a list of such objects; claude.ai's export, whose messages
	// have "sender" and "text").
	Anthropic Format = "anthropic"
	// ClaudeCode is a Claude Code session file
	// (~/.claude/projects/<dir>/<session>.jsonl): one record per line, each
	// in the session its sessionId names.
	ClaudeCode Format = "claude-code"
	// Codex is an OpenAI Codex CLI rollout
	// (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl): lines of
	// {timestamp, type, payload}, one thread, the session its session_meta
	// names.
	Codex Format = "codex"
	// Gemini is a Gemini CLI chat recording
	// (~/.gemini/tmp/<project>/chats/session-*.jsonl): lines of message
	// records, "$set" and "$rewindTo" records, one conversation, the
	// session its sessionId names; and the single JSON document
	// (session-*.json) of the versions before April 2026.
	Gemini Format = "gemini"
)

// Formats lists the formats in the order the command line documents them.
func Formats() []Format { return []Format{OpenAI, Anthropic, ClaudeCode, Codex, Gemini} }

// ParseFormat returns the format named s, or an error wrapping
// ErrUnknownFormat.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, 0, 5)
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", errors.WithHintf(errors.Wrapf(ErrUnknownFormat, "%q", s), "the formats are %s", strings.Join(names, ", "))
}

// Options tune a Decoder. The zero value reads a main transcript with the
// store's default limits, each conversation into a session of its name.
type Options struct {
	// File names the input in errors, and the conversations that have no
	// id of their own (see Decoder); "" means stdin.
	File string
	// Limits are the event size limits of the store the events go to; zero
	// fields mean tier's defaults. Texts over the limit are clipped
	// (Report.Clipped), ids over it shortened with a hash (Report.FixedIDs).
	Limits tier.Limits
	// Target says where the events of each conversation go: it is called
	// once per conversation, with its name, before its first record is
	// mapped. Conversations given one session share it. Nil sends each to
	// the session of its name, empty.
	Target func(conversation string) (Target, error)
	// Sidechains keeps the sidechain records (sub-agent work) of a Claude
	// Code main session. By default they are skipped and counted
	// (Report.Sidechain): the sub-agent's outcome is the result of the
	// call that started it. A file whose first message is a sidechain (a
	// sub-agent's own transcript) is always read whole.
	Sidechains bool
	// MainSession says a Claude Code input is a main session's
	// transcript, whatever its first message: for an input that starts
	// partway through a session file (an incremental read from where an
	// earlier import stopped), whose first message may be a sidechain
	// record. Without it, an input whose first message is a sidechain is
	// read as a sub-agent's transcript.
	MainSession bool
	// Dir is the directory the agent worked in: the files of artifact and
	// rejected keys under it are named relative to it. Empty means none,
	// except for Claude Code, whose records carry their "cwd".
	Dir string
	// MaxRecordBytes bounds one line, one top-level JSON value or element
	// of a top-level array, or one message or other member of a
	// conversation object read member by member (see Decoder); zero means
	// DefaultMaxRecordBytes.
	MaxRecordBytes int
}

// Target is where a conversation's events go: the session, and what it
// holds already.
type Target struct {
	// Session is the session the events go to: they carry no session when
	// it is "".
	Session string
	// Open lists the calls already open in the session, as the events
	// that opened them (a tool_call's id, name and arguments; the store's
	// are at the seqs of Snapshot.Ledger's OpenList), so that a result in
	// the transcript resolves them, a new call of the same id is renamed,
	// and a write or a refused use of one is keyed by its file as if the
	// transcript had opened it. Nil means none.
	Open []tier.Event
	// Stored reports whether the session holds the events of the record
	// of this ref (tier.Event.Ref) already, as store.Snapshot.Ref does:
	// such a record is not mapped again, only counted (Report.Known). Nil
	// means none is.
	Stored func(ref string) (bool, error)
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
	Known            int `json:"known"`             // records whose events the session holds already (Target.Stored): not mapped again

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
	r.Known += o.Known
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
		{"known", r.Known}, {"messages", r.Messages}, {"calls", r.Calls}, {"results", r.Results}, {"failed", r.Failed},
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
// one record in memory (a JSONL line, an element of a top-level array, a
// top-level object), the events it maps to, each session's open calls, and
// the Claude Code records read before the first that names its session.
//
// A top-level object over 1 MiB of an input that is an io.ReaderAt (an
// *os.File, a *bytes.Reader, whose offset 0 is the input's first byte) is
// read twice so that its messages are not held: first member by member,
// its lists of messages only checked, then its list of messages again,
// mapped a message at a time. Memory then follows one message, not the
// conversation, and the conversation may be larger than
// Options.MaxRecordBytes, which bounds each of its messages and other
// members. The events, refs and lines are those of reading it whole. Of an
// input read only forward, such an object is read whole, up to
// MaxRecordBytes.
//
// # Conversations
//
// A transcript holds one conversation or several, each named by its own id
// where the format has one, else after the file (File without its
// directory and extension, "" for stdin):
//
//   - Claude Code: each record's sessionId; a sub-agent's file, whose
//     records carry the sessionId of the session that started it, is
//     "<sessionId>/agent-<agentId>". Records that name no session (file
//     snapshots, summaries) belong to the session of the records around
//     them; a file without any sessionId is named after the file.
//   - Codex and Gemini CLI: the rollout's (session_meta's id) or the chat's
//     (sessionId) one conversation.
//   - OpenAI and Anthropic: a JSON object holding a list of messages under
//     "messages" (or "input", "chat_messages", "history", "conversation",
//     "conversations", "turns", "steps", "trajectory": the first whose
//     list holds a message) is a conversation, named by its "id",
//     "conversation_id", "session_id", "sessionId" or "uuid", else
//     after the file — "<file>-<n>" for the n-th conversation of a file
//     that holds several (a JSON array of them, or one per JSONL line).
//     Messages outside any such object are the file's conversation, or the
//     one their own conversation_id or session_id names.
//
// # Refs
//
// Every event carries the ref of the record it was made from: a Claude
// Code record's uuid; for a record without one, its position in its
// conversation and a hash of the conversation's name and the record's
// bytes ("12:3f0c9a7be1d2c4f5"). The same file read again
// gives the same refs, and a file that grew at its end the same refs for
// the records it had: with Target.Stored, a transcript imported again
// gives only the records the session lacks.
type Decoder struct {
	f    Format
	opts Options
	src  source
	base string // the name of a conversation without an id ("" for stdin)
	oa   *openaiReader
	an   *anthropicReader
	cc   *claudeCodeReader
	cx   *codexReader
	gm   *geminiReader

	sh       shared        // the line being mapped, the events mapped, a bug met
	conv     *conversation // the conversation of the record being mapped
	b        *builder      // its session's
	convs    map[string]*conversation
	sessions map[string]*builder // by session
	order    []*builder          // the sessions in the order they first appear
	outside  Report              // top-level values that are no message and no conversation
	list     *elements           // the messages of a conversation object read member by member, being mapped
	nconv    int                 // conversation objects so far

	recognized int    // records of a kind the format knows (Options.Target's known ones too)
	seen       string // the first top-level value of no kind this package knows, described

	line    int    // of the last event Next returned
	session string // of the last event Next returned
	done    bool
	err     error
}

// pending is an event, the line of the record it came from and its
// session.
type pending struct {
	e       tier.Event
	line    int
	session string
}

// source yields the records of an input: raw JSON values and the line each
// starts on.
type source interface {
	next() (raw []byte, line int, err error)
}

// NewDecoder returns a Decoder of r in format f. The only error is an
// unknown format. When r is an io.ReaderAt, a large conversation object is
// read from it again (see Decoder).
func NewDecoder(f Format, r io.Reader, opts Options) (*Decoder, error) {
	d := &Decoder{f: f, convs: map[string]*conversation{}, sessions: map[string]*builder{}}
	if opts.File != "" {
		base := filepath.Base(opts.File)
		d.base = strings.TrimSuffix(base, filepath.Ext(base))
	} else {
		opts.File = "stdin"
	}
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	d.opts = opts
	switch f {
	case OpenAI, Anthropic:
		d.src = newValueSource(r, opts.File, opts.MaxRecordBytes)
		d.oa, d.an = &openaiReader{d: d}, &anthropicReader{d: d}
	case ClaudeCode:
		d.src = newLineSource(r, opts.File, opts.MaxRecordBytes)
		d.cc = newClaudeCodeReader(d)
	case Codex:
		d.src = newLineSource(r, opts.File, opts.MaxRecordBytes)
		d.cx = newCodexReader(d)
	case Gemini:
		d.src = newValueSource(r, opts.File, opts.MaxRecordBytes)
		d.gm = newGeminiReader(d)
	default:
		_, err := ParseFormat(string(f))
		return nil, err
	}
	return d, nil
}

// Next returns the next event, io.EOF after the last, or an error for bad
// input (after which Next keeps returning it): a *LineError, or at the
// end of an input in which no record is of a kind the format knows, an
// error wrapping ErrNothingRecognized that names the file and what it
// holds.
// Events have no Seq or Turn: the store assigns them.
func (d *Decoder) Next() (tier.Event, error) {
	for len(d.sh.q) == 0 {
		if d.err != nil {
			return tier.Event{}, d.err
		}
		if d.done {
			return tier.Event{}, io.EOF
		}
		if d.list != nil {
			raw, line, err := d.list.next()
			if err == io.EOF {
				d.list = nil
				continue
			}
			if err == nil {
				d.sh.line = line
				err = d.message(raw)
			}
			if err != nil {
				d.err = err
				return tier.Event{}, err
			}
			continue
		}
		raw, line, err := d.src.next()
		switch {
		case err == io.EOF:
			d.done = true
			err = d.finish()
		case err != nil: // the source's: a *LineError, or reading failed
		default:
			d.sh.line = line
			vs, _ := d.src.(*valueSource)
			switch {
			case d.cc != nil:
				err = d.cc.record(raw)
			case d.cx != nil:
				err = d.cx.record(raw)
			case d.gm != nil:
				err = d.gm.record(raw)
			case vs.big != nil:
				big := vs.big
				vs.big = nil
				err = d.bigValue(vs, big, vs.listed)
			default:
				err = d.value(raw, vs.listed)
			}
			var le *LineError
			if (errors.Is(err, ErrBadJSON) || errors.Is(err, ErrBadRecord) || errors.Is(err, ErrTooLarge)) && !errors.As(err, &le) {
				err = &LineError{File: d.opts.File, Line: d.sh.line, Err: err}
			}
		}
		if err != nil {
			d.err = err
			return tier.Event{}, err
		}
		if d.sh.err != nil {
			d.err = d.sh.err
			return tier.Event{}, d.err
		}
	}
	p := d.sh.q[0]
	d.sh.q = d.sh.q[1:]
	d.line, d.session = p.line, p.session
	return p.e, nil
}

// finish ends the input: the records held for a session not yet named,
// the calls each session leaves open, and the check that something was
// recognized.
func (d *Decoder) finish() error {
	if d.cc != nil {
		if err := d.cc.finish(); err != nil {
			return err
		}
	}
	if d.cx != nil {
		if err := d.cx.finish(); err != nil {
			return err
		}
	}
	for _, b := range d.order {
		b.finish()
	}
	if d.recognized > 0 {
		return nil
	}
	rep := d.Report()
	var what []string
	if d.seen != "" {
		what = append(what, d.seen)
	}
	switch {
	case rep.Records == 0 && d.seen == "":
		what = append(what, "the input holds no records")
	default:
		unknown := maps.Clone(rep.Unknown)
		delete(unknown, "(no role or messages)") // what seen says
		if len(unknown) > 0 || rep.Malformed > 0 {
			counts := []string{fmt.Sprintf("records=%d", rep.Records)}
			for _, f := range (&Report{Unknown: unknown, Malformed: rep.Malformed}).Fields()[2:] {
				counts = append(counts, f)
			}
			what = append(what, strings.Join(counts, " "))
		}
	}
	return errors.Wrapf(ErrNothingRecognized, "%s: %s", d.opts.File, strings.Join(what, "; "))
}

// Line returns the line (from 1) of the record the last event Next
// returned came from.
func (d *Decoder) Line() int { return d.line }

// Session returns the session (Target.Session) of the last event Next
// returned.
func (d *Decoder) Session() string { return d.session }

// Report returns the counts so far, of every session together; after
// io.EOF, of the whole transcript.
func (d *Decoder) Report() Report {
	rep := d.outside
	rep.Skipped, rep.Unknown = nil, nil
	rep.Add(Report{Skipped: d.outside.Skipped, Unknown: d.outside.Unknown})
	for _, b := range d.order {
		rep.Add(*b.rep)
	}
	return rep
}

// Open returns the calls session has open after the events returned so
// far (after io.EOF: at the transcript's end), as the events that opened
// them: pass them as Target.Open to the decoder of a transcript that
// continues the session.
func (d *Decoder) Open(session string) []tier.Event {
	if b := d.sessions[session]; b != nil {
		return b.openList()
	}
	return nil
}

// Session is one session of a transcript, decoded whole.
type Session struct {
	ID     string       // Target.Session
	Events []tier.Event // each with the ref of its record
	Lines  []int        // the line of each event's record
	Open   []tier.Event // the calls open at the transcript's end (Decoder.Open)
	Report Report       // the first session's also counts the records outside any conversation
}

// Read reads a whole transcript in format f and returns its sessions, in
// the order they first appear, and the report of all of them together.
// For bad input the error is Next's, with the events before the bad
// record (callers that want all or nothing drop them).
func Read(f Format, r io.Reader, opts Options) ([]Session, Report, error) {
	d, err := NewDecoder(f, r, opts)
	if err != nil {
		return nil, Report{}, err
	}
	var evs []pending
	for {
		e, err := d.Next()
		if err != nil && err != io.EOF {
			return d.collect(evs), d.Report(), err
		}
		if err == io.EOF {
			return d.collect(evs), d.Report(), nil
		}
		evs = append(evs, pending{e: e, line: d.Line(), session: d.Session()})
	}
}

// Sessions returns the sessions so far, in the order they first appear,
// without their events: each one's ID, the calls it has open (Open) and its
// Report, the first one's counting the records outside any conversation
// too. After io.EOF they are the transcript's: a caller that appends the
// events as Next returns them reports each session with these.
func (d *Decoder) Sessions() []Session {
	out := make([]Session, len(d.order))
	for i, b := range d.order {
		var rep Report
		rep.Add(*b.rep) // its own maps
		out[i] = Session{ID: b.session, Open: b.openList(), Report: rep}
	}
	if len(out) > 0 {
		out[0].Report.Add(d.outside)
	}
	return out
}

// collect groups evs by session.
func (d *Decoder) collect(evs []pending) []Session {
	out := d.Sessions()
	at := map[string]int{}
	for i := range out {
		at[out[i].ID] = i
	}
	for _, p := range evs {
		s := &out[at[p.session]]
		s.Events = append(s.Events, p.e)
		s.Lines = append(s.Lines, p.line)
	}
	return out
}
