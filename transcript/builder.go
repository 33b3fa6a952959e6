package transcript

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// maxKeyBytes bounds the keys this package makes (rejected and artifact
// keys): they are printed in refusal reasons and resumed contexts.
const maxKeyBytes = 512

// builder turns the items of a transcript (messages, calls, results) into
// events that the store accepts: every result resolves an open call, every
// id is open at most once, every field within the limits. It is the one
// place the mapping rules live; the format readers only parse.
type builder struct {
	opts    Options
	lim     tier.Limits
	rep     *Report
	sh      *shared                        // the decoder's: the line being mapped, the events mapped
	session string                         // the session the events go to (Target.Session)
	stored  func(ref string) (bool, error) // Target.Stored
	ref     string                         // the ref of the record being mapped: every event it gives carries it

	open   map[string]*call    // by the id the events carry
	queues map[string][]string // by the transcript's id: the event ids open under it, oldest first
	noID   int

	ledger *tier.Ledger // the open calls as the store will see them: a self-check
	cwd    string       // Claude Code: paths under it are made relative
}

// call is an open call: what a result needs to map it.
type call struct {
	orig  string // the id in the transcript
	name  string
	input []byte // the arguments as JSON (an object, when the tool takes one)
	seed  bool   // open before this transcript
}

// shared is what a decoder's builders share: the line of the record being
// mapped, the events mapped and not yet returned, and the first event this
// package made that tier refuses (a bug, reported not panicked).
type shared struct {
	line int
	q    []pending
	err  error
}

// newBuilder returns the builder of session t.Session, whose calls open
// are t.Open.
func newBuilder(opts Options, sh *shared, t Target) *builder {
	b := &builder{
		opts:    opts,
		lim:     opts.Limits,
		rep:     &Report{},
		sh:      sh,
		session: t.Session,
		stored:  t.Stored,
		open:    map[string]*call{},
		queues:  map[string][]string{},
		ledger:  tier.NewLedger(),
		cwd:     opts.Dir,
	}
	if b.lim.MaxEventBytes <= 0 {
		b.lim.MaxEventBytes = tier.DefaultMaxEventBytes
	}
	if b.lim.MaxIDBytes <= 0 {
		b.lim.MaxIDBytes = tier.DefaultMaxIDBytes
	}
	seed := slices.Clone(t.Open)
	slices.SortStableFunc(seed, func(a, b tier.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, e := range seed {
		if e.Kind != tier.KindToolCall {
			continue // a handle: this package never resolves one
		}
		orig := e.ID
		if i := strings.LastIndexByte(orig, '#'); i > 0 {
			if _, err := strconv.Atoi(orig[i+1:]); err == nil {
				orig = orig[:i] // a call this package renamed: results name it by its first id
			}
		}
		b.open[e.ID] = &call{orig: orig, name: e.Name, input: []byte(e.Text), seed: true}
		b.queues[orig] = append(b.queues[orig], e.ID)
		b.ledger.Open[e.ID] = tier.Open{ID: e.ID, Kind: e.Kind, Name: e.Name, Seq: e.Seq}
	}
	return b
}

// emit checks e and queues it. The builder's own checks make every event
// valid; a refusal here is a bug in this package, returned as an error.
func (b *builder) emit(e tier.Event) {
	if b.sh.err != nil {
		return
	}
	e.Ref = b.ref
	if err := e.Check(b.lim); err != nil {
		b.sh.err = errors.NewAssertionErrorWithWrappedErrf(err, "transcript: %s:%d: made an event the store refuses", b.opts.File, b.sh.line)
		return
	}
	if err := b.ledger.Apply(&e); err != nil {
		b.sh.err = errors.NewAssertionErrorWithWrappedErrf(err, "transcript: %s:%d: made an event the ledger refuses", b.opts.File, b.sh.line)
		return
	}
	e.Opener = 0
	b.sh.q = append(b.sh.q, pending{e: e, line: b.sh.line, session: b.session})
	b.rep.Events++
	switch {
	case e.Kind == tier.KindUser || e.Kind == tier.KindAssistant || e.Kind == tier.KindSystem:
		b.rep.Messages++
	case e.Kind == tier.KindToolCall:
		b.rep.Calls++
	case e.Kind == tier.KindToolResult:
		b.rep.Results++
		if e.Failed {
			b.rep.Failed++
		}
	case e.Kind == tier.KindRejected:
		b.rep.Rejected++
	case e.Kind == tier.KindArtifact:
		b.rep.Artifacts++
	}
}

// message emits a user, assistant or system message; empty text emits
// nothing.
func (b *builder) message(kind tier.Kind, text string, t int64) {
	if strings.TrimSpace(text) == "" {
		return
	}
	b.emit(tier.Event{Kind: kind, Time: t, Text: b.text(text, 0)})
}

// call opens a call. input is the arguments as JSON (or the raw string a
// model produced). It returns the id a result names the call by: id, or
// the "noid-N" it was given.
func (b *builder) call(id, name string, input []byte, t int64) string {
	if id == "" {
		b.noID++
		b.rep.MissingIDs++
		id = "noid-" + strconv.Itoa(b.noID)
	}
	orig := id
	id = b.id(id)
	name = b.name(name)
	if _, taken := b.open[id]; taken || len(b.queues[orig]) > 0 {
		b.rep.RenamedCalls++
		base := id
		for n := 2; ; n++ {
			suffix := "#" + strconv.Itoa(n)
			cand := tier.TruncateUTF8(base, b.lim.MaxIDBytes-len(suffix)) + suffix
			if _, taken := b.open[cand]; !taken {
				id = cand
				break
			}
		}
	}
	b.open[id] = &call{orig: orig, name: name, input: input}
	b.queues[orig] = append(b.queues[orig], id)
	b.emit(tier.Event{Kind: tier.KindToolCall, Time: t, ID: id, Name: name, Text: b.text(string(input), len(id)+len(name))})
	return orig
}

// resultInfo is what a format's structured fields say about a result,
// beside its text.
type resultInfo struct {
	failed   bool     // is_error, or the format's own failure field
	rejected bool     // Claude Code's toolUseResult "User rejected tool use"
	paths    []string // files the tool reports it wrote (Claude Code's toolUseResult.filePath)
}

// result resolves the oldest open call of id. A result for no open call is
// kept as a system event (Report.OrphanResults). A rejection adds a
// rejected event; a successful write or edit adds an artifact per file.
//
// Whether a result failed, and whether it is a rejection, comes from the
// format's structured fields only (info): a result that did not fail is
// neither a failure nor a rejection, whatever its text says — a tool's
// output can say anything. A failed result is a rejection when Claude
// Code's toolUseResult says so, or when its text is the harness's
// rejection (rejection): Claude Code records a rejection that carries the
// user's words, and every rejection before version 2.1.32, only so.
func (b *builder) result(id, text string, info resultInfo, t int64) {
	failed := info.failed
	var reason string
	var rejected bool
	if failed {
		reason, rejected = rejection(text)
		if info.rejected && !rejected {
			rejected, reason = true, "the user rejected the tool use"
		}
	}
	q := b.queues[id]
	if id == "" || len(q) == 0 {
		b.rep.OrphanResults++
		state := "ok"
		if failed {
			state = "failed"
		}
		b.message(tier.KindSystem, fmt.Sprintf("tool result for call %q, which is not open (%s): %s", tier.TruncateUTF8(id, 200), state, text), t)
		if rejected {
			b.emit(tier.Event{Kind: tier.KindRejected, Time: t, Key: b.key("tool/unknown:" + id), Text: b.text(reason, 0)})
		}
		return
	}
	sid := q[0]
	if len(q) == 1 {
		delete(b.queues, id)
	} else {
		b.queues[id] = q[1:]
	}
	c := b.open[sid]
	delete(b.open, sid)
	b.emit(tier.Event{Kind: tier.KindToolResult, Time: t, ID: sid, Failed: failed, Text: b.text(text, len(sid))})
	switch {
	case rejected:
		b.emit(tier.Event{Kind: tier.KindRejected, Time: t, Key: b.key("tool/" + c.name + ":" + shortArgs(c.name, c.input, b.cwd)), Text: b.text(reason, 0)})
	case !failed:
		paths := writtenPaths(c.name, c.input)
		if len(paths) == 0 {
			paths = info.paths
		}
		seen := map[string]bool{}
		for _, p := range paths {
			k := b.key(relPath(p, b.cwd))
			if k == "" || seen[k] {
				continue
			}
			seen[k] = true
			b.emit(tier.Event{Kind: tier.KindArtifact, Time: t, Key: k, Text: b.text(fmt.Sprintf("written by %s (call %s)", c.name, sid), len(k))})
		}
	}
}

// finish counts the calls of this transcript left open.
func (b *builder) finish() {
	for _, c := range b.open {
		if !c.seed {
			b.rep.Unresolved++
		}
	}
}

// openList returns the calls open, as the events that opened them (id,
// name, arguments), in the order of their ids.
func (b *builder) openList() []tier.Event {
	var out []tier.Event
	for _, o := range b.ledger.OpenList() {
		e := tier.Event{Kind: o.Kind, ID: o.ID, Name: o.Name, Seq: o.Seq}
		if c := b.open[o.ID]; c != nil {
			e.Text = string(c.input)
		}
		out = append(out, e)
	}
	return out
}

// text makes s valid UTF-8 and clips it so that the event, with other
// bytes of ids and names, stays within the size limit. (Invalid bytes were
// counted in the record they came in: Report.InvalidUTF8.)
func (b *builder) text(s string, other int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	room := b.lim.MaxEventBytes - other - 64
	if len(s) <= room {
		return s
	}
	b.rep.Clipped++
	cut := tier.TruncateUTF8(s, max(room-48, 0))
	return cut + fmt.Sprintf("…[clipped %d bytes]", len(s)-len(cut))
}

// id repairs an id the store would refuse: control characters and invalid
// UTF-8 become "?", and an id over the limit is cut and given a hash of the
// whole, so that its result still finds it and two long ids stay apart.
func (b *builder) id(s string) string { return b.ident(s, b.lim.MaxIDBytes) }

// name repairs a tool name as id does.
func (b *builder) name(s string) string { return b.ident(s, b.lim.MaxIDBytes) }

// key repairs a key as id does, within maxKeyBytes.
func (b *builder) key(s string) string { return b.ident(s, min(maxKeyBytes, b.lim.MaxIDBytes)) }

func (b *builder) ident(s string, limit int) string {
	fixed := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
	if len(fixed) > limit {
		h := fnv.New64a()
		h.Write([]byte(s))
		suffix := fmt.Sprintf("#%016x", h.Sum64())
		fixed = tier.TruncateUTF8(fixed, limit-len(suffix)) + suffix
	}
	if fixed != s {
		b.rep.FixedIDs++
	}
	return fixed
}

// parseTime reads a timestamp: RFC 3339 text, or Unix seconds (or
// milliseconds, when the number is too large for seconds) as a number.
// Anything else, or a time outside what the store can hold, counts as
// Report.BadTimes and gives 0 (the store's clock).
func (b *builder) parseTime(raw []byte) int64 {
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	var t time.Time
	switch raw[0] {
	case '"':
		s, err := strconv.Unquote(string(raw))
		if err != nil {
			b.rep.BadTimes++
			return 0
		}
		if s == "" {
			return 0
		}
		t, err = time.Parse(time.RFC3339Nano, s)
		if err != nil {
			b.rep.BadTimes++
			return 0
		}
	default:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || f <= 0 || f > 1e15 {
			b.rep.BadTimes++
			return 0
		}
		if f > 1e11 { // milliseconds: 1e11 seconds is the year 5138
			f /= 1000
		}
		sec := int64(f)
		t = time.Unix(sec, int64((f-float64(sec))*1e9))
	}
	if t.Year() < 1678 || t.Year() > 2261 {
		b.rep.BadTimes++
		return 0
	}
	return t.UnixNano()
}

// replacements counts what encoding/json reads as U+FFFD in the JSON value
// raw: each byte that is not part of valid UTF-8, and each \u escape of
// half a surrogate pair without the other half.
func replacements(raw []byte) int {
	n := 0
	if !utf8.Valid(raw) {
		for i := 0; i < len(raw); {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				n++
			}
			i += size
		}
	}
	if !bytes.Contains(raw, []byte(`\ud`)) && !bytes.Contains(raw, []byte(`\uD`)) {
		return n
	}
	// Backslashes are in strings only, in valid JSON: no need to track them.
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // \n, \", \\ …: one escaped byte
			continue
		}
		w, lone, ok := tier.SurrogateEscape(raw, i)
		if !ok {
			continue
		}
		if lone {
			n++
		}
		i += w - 1
	}
	return n
}
