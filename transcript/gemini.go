package transcript

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// GeminiCompressed begins the text of the system event a Gemini CLI
// compression gives: a "$set" record that replaced the chat's history by
// a summary and the messages it kept as they were. The text goes on with
// the ref of what it kept, when it kept anything (GeminiKeptFrom). The
// event's ref is derived from the "$set" record (its position and a
// hash); the summary follows as a system event whose ref is the id Gemini
// CLI gave the summary's message.
const GeminiCompressed = "Gemini CLI compressed the conversation"

// geminiKept introduces the id of the first message a compression kept.
const geminiKept = "; kept as they were the messages from "

// IsGeminiCompression reports whether e is the event of a Gemini CLI
// compression.
func IsGeminiCompression(e tier.Event) bool {
	return e.Kind == tier.KindSystem && (e.Text == GeminiCompressed || strings.HasPrefix(e.Text, GeminiCompressed+geminiKept))
}

// GeminiKeptFrom returns the ref of the first events of what a Gemini CLI
// compression kept as it was (the first message it kept that gave
// events) — the first of what the summary does not stand for — or ""
// when e is no compression or it kept none.
func GeminiKeptFrom(e tier.Event) string {
	ref, ok := strings.CutPrefix(e.Text, GeminiCompressed+geminiKept)
	if !ok || e.Kind != tier.KindSystem {
		return ""
	}
	return ref
}

// geminiMessage is a message of a Gemini CLI chat: a record of its own
// (a line of a .jsonl chat, an element of a .json chat's messages), or
// one of the history a "$set" record gives.
type geminiMessage struct {
	ID        string          `json:"id"`
	Timestamp json.RawMessage `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []geminiCall    `json:"toolCalls"`
	Thoughts  []any           `json:"thoughts"`
}

// geminiCall is a tool call a model message records, with its result
// once it ran.
type geminiCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args"`
	Result    json.RawMessage `json:"result"`
	Status    string          `json:"status"`
	Timestamp json.RawMessage `json:"timestamp"`
}

// geminiPart is a part of a message's content (the Gemini API's Part):
// the fields this package reads.
type geminiPart struct {
	Text         *string              `json:"text"`
	Thought      bool                 `json:"thought"`
	FunctionCall *struct{ ID string } `json:"functionCall"`
	FunctionResp *struct {
		ID       string          `json:"id"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// geminiContextTags begin the text parts Gemini CLI writes into a user
// message itself: the session's environment, and the additional context
// a hook gave (strata's own injection among it), which it wraps in
// <hook_context> tags.
const (
	geminiSessionContext = "<session_context>"
	geminiHookContext    = "<hook_context>"
)

// geminiDone are the statuses of a tool call that ran or will not run:
// the ones a result is mapped from. A call recorded in another status
// (scheduled, executing, awaiting approval) is read when a later record
// gives it one of these.
var geminiDone = map[string]bool{"success": true, "error": true, "cancelled": true}

// geminiShell is Gemini CLI's shell tool, whose result ends with the
// harness's own fields after the command's output.
const geminiShell = "run_shell_command"

// shellTrailer is the end of the result Gemini CLI's shell tool gives the
// model for a command that failed: its Exit Code field (written only for a
// code other than 0) or, for a command terminated by a signal, its Signal
// field, then only the fields it writes after that one, each at most once
// and in its order — Signal, Background PIDs, Process Group PGID — and
// nothing after them (Gemini CLI 0.61.0, packages/core/src/tools/shell.ts:
// "Output: " and the command's output, then one a line, each only when
// it applies, Error, Exit Code (only for a code other than 0), Signal,
// Background PIDs, Process Group PGID).
var shellTrailer = regexp.MustCompile(`\n(?:Exit Code: -?[1-9][0-9]*(?:\nSignal: [A-Za-z0-9]+)?|Signal: [A-Za-z0-9]+)(?:\nBackground PIDs: [0-9]+(?:, [0-9]+)*)?(?:\nProcess Group PGID: [0-9]+)?$`)

// The tags Gemini CLI's shell tool wraps its result in, each on a line of
// its own; a closing tag in the command's output is escaped.
const (
	untrustedOpen  = "<untrusted_context>\n"
	untrustedClose = "\n</untrusted_context>"
)

// geminiReader maps the records of a Gemini CLI chat: one conversation,
// the session its sessionId names.
//
// Gemini CLI appends a message again each time it changes (the tool calls
// of a model message are added when they ran), and a "$set" record with
// "messages" gives the whole history as it holds it now: after a resume,
// after a rollback, and after a compression, which drops the messages it
// summarized and gives the summary and the messages it kept new ids. The
// reader keeps the ids of the history, every message id and a signature
// of every message read (its type, text, and call ids), so that each
// message gives its events once.
type geminiReader struct {
	d       *Decoder
	history []string          // the ids of the history as the last record left it
	seen    map[string]bool   // message ids read
	sigs    map[string]string // signatures of the messages read: the id of the first with each
	refs    map[string]string // by message id: the ref of its first event
	done    map[string]bool   // refs mapped (or known) in this read
	calls   map[string]bool   // tool call ids mapped
}

func newGeminiReader(d *Decoder) *geminiReader {
	return &geminiReader{d: d, seen: map[string]bool{}, sigs: map[string]string{}, refs: map[string]string{}, done: map[string]bool{}, calls: map[string]bool{}}
}

// record reads one top-level value: a line of a .jsonl chat, or a whole
// .json chat.
func (r *geminiReader) record(raw []byte) error {
	if err := jsonObject(raw, "a record"); err != nil {
		return err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return errors.Wrap(ErrBadRecord, err.Error())
	}
	if r.d.conv == nil {
		name := str(top["sessionId"])
		if name == "" {
			name = r.d.base
		}
		if err := r.d.enter(name); err != nil {
			return err
		}
	}
	d := r.d
	if msgs, ok := top["messages"]; ok && str(top["sessionId"]) != "" && len(bytes.TrimSpace(msgs)) > 0 && bytes.TrimSpace(msgs)[0] == '[' {
		// A .json chat: the conversation and its messages in one document.
		d.recognized++
		return r.document(raw)
	}
	d.begin(raw)
	b := d.b
	switch {
	case top["$rewindTo"] != nil:
		d.recognized++
		// The messages from this one on left Gemini CLI's history; the
		// store keeps what they said.
		if i := slices.Index(r.history, str(top["$rewindTo"])); i >= 0 {
			r.history = r.history[:i]
		}
		b.rep.skip(&b.rep.Skipped, "$rewindTo")
	case top["$set"] != nil:
		d.recognized++
		var set struct {
			Messages json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(top["$set"], &set) != nil {
			b.rep.Malformed++
			return nil
		}
		if len(set.Messages) == 0 || string(set.Messages) == "null" {
			b.rep.skip(&b.rep.Skipped, "$set")
			return nil
		}
		var msgs []json.RawMessage
		if json.Unmarshal(set.Messages, &msgs) != nil {
			b.rep.Malformed++
			return nil
		}
		return r.setHistory(raw, msgs)
	case str(top["id"]) != "":
		d.recognized++
		return r.message(raw)
	case str(top["sessionId"]) != "":
		d.recognized++
		b.rep.skip(&b.rep.Skipped, "metadata")
	default:
		b.rep.skip(&b.rep.Unknown, "(no id)")
	}
	return nil
}

// document reads a .json chat: each element of its messages is a record
// on the line it starts on.
func (r *geminiReader) document(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return errors.Wrap(ErrBadJSON, err.Error())
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return errors.Wrap(ErrBadJSON, err.Error())
		}
		if key != "messages" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return errors.Wrap(ErrBadJSON, err.Error())
			}
			continue
		}
		off := dec.InputOffset()
		var list json.RawMessage
		if err := dec.Decode(&list); err != nil {
			return errors.Wrap(ErrBadJSON, err.Error())
		}
		lead := len(raw[off:]) - len(bytes.TrimLeft(raw[off:], " \t\r\n:"))
		start := r.d.sh.line + bytes.Count(raw[:int(off)+lead], []byte{'\n'})
		line := r.d.sh.line
		err = eachElement(list, start, func(elem []byte, l int) error {
			r.d.sh.line = l
			if len(elem) == 0 || elem[0] != '{' {
				return &LineError{File: r.d.opts.File, Line: l, Err: errors.Wrap(ErrBadRecord, "a message must be a JSON object")}
			}
			r.d.begin(elem)
			return r.message(elem)
		})
		r.d.sh.line = line
		if err != nil {
			return err
		}
	}
	return nil
}

// setHistory reads a "$set" record's messages: the history as Gemini CLI
// holds it now. A history that drops messages the one before held and
// adds a message of the user's that no message read had is a
// compression: that message is the summary (a system event after the
// compression's), the model's new messages are its acknowledgement
// (skipped), and the messages it kept — given new ids, the same type,
// text and calls — are not read again. Any other new message is read as
// a record of its own; a copy of a message read is skipped.
func (r *geminiReader) setHistory(raw []byte, list []json.RawMessage) error {
	b := r.d.b
	msgs := make([]geminiMessage, len(list))
	ids := map[string]bool{}
	for i, l := range list {
		if json.Unmarshal(l, &msgs[i]) != nil || msgs[i].ID == "" {
			b.rep.Malformed++
			msgs[i] = geminiMessage{}
			continue
		}
		ids[msgs[i].ID] = true
	}
	dropped := slices.ContainsFunc(r.history, func(id string) bool { return !ids[id] })
	summary, kept := -1, ""
	if dropped {
		for i, m := range msgs {
			if m.ID != "" && !r.seen[m.ID] && m.Type == "user" && r.sigs[r.sig(&m)] == "" && strings.TrimSpace(r.userText(&m, false)) != "" {
				summary = i
				break
			}
		}
	}
	for i := summary + 1; summary >= 0 && i < len(msgs) && kept == ""; i++ {
		if m := &msgs[i]; m.ID != "" && !r.seen[m.ID] {
			kept = r.refs[r.sigs[r.sig(m)]]
		}
	}
	r.history = r.history[:0]
	for i := range msgs {
		m := &msgs[i]
		if m.ID == "" {
			continue
		}
		r.history = append(r.history, m.ID)
		switch {
		case r.seen[m.ID]:
			continue
		case i == summary:
			r.seen[m.ID] = true
			t := b.parseTime(m.Timestamp)
			known, err := r.stored(raw, "")
			if err != nil {
				return err
			}
			if !known {
				b.rep.Compactions++
				if kept != "" {
					b.message(tier.KindSystem, GeminiCompressed+geminiKept+kept, t)
				} else {
					b.message(tier.KindSystem, GeminiCompressed, t)
				}
			}
			if known, err = r.stored(raw, m.ID); err != nil {
				return err
			}
			if !known {
				b.message(tier.KindSystem, r.userText(m, false), t)
			}
		case summary >= 0 && i > summary && m.Type == "gemini" && r.sigs[r.sig(m)] == "" && len(m.ToolCalls) == 0 && !r.hasCall(m):
			r.seen[m.ID] = true
			b.rep.skip(&b.rep.Skipped, "compression_ack")
		case r.sigs[r.sig(m)] != "":
			r.seen[m.ID] = true
			b.rep.skip(&b.rep.Skipped, "history_copy")
		default:
			if err := r.mapMessage(list[i], m); err != nil {
				return err
			}
		}
	}
	return nil
}

// message reads a message record.
func (r *geminiReader) message(raw []byte) error {
	var m geminiMessage
	if json.Unmarshal(raw, &m) != nil || m.ID == "" {
		r.d.b.rep.Malformed++
		return nil
	}
	if !slices.Contains(r.history, m.ID) {
		r.history = append(r.history, m.ID)
	}
	return r.mapMessage(raw, &m)
}

// mapMessage maps a message read for the first time, or again with more
// of its tool calls run.
func (r *geminiReader) mapMessage(raw []byte, m *geminiMessage) error {
	b := r.d.b
	first := !r.seen[m.ID]
	r.seen[m.ID] = true
	if sig := r.sig(m); r.sigs[sig] == "" {
		r.sigs[sig] = m.ID
	}
	t := b.parseTime(m.Timestamp)
	if !r.done[m.ID] {
		r.done[m.ID] = true
		known, err := r.stored(raw, m.ID)
		if err != nil {
			return err
		}
		events := b.rep.Events
		if !known {
			switch m.Type {
			case "user":
				if text := r.userText(m, true); text != "" {
					textMessage(b, tier.KindUser, text, t)
				}
				if ctx := r.contextText(m); ctx != "" {
					b.message(tier.KindSystem, ctx, t)
				}
			case "gemini":
				b.message(tier.KindAssistant, r.modelText(m), t)
				if len(m.Thoughts) > 0 {
					b.rep.skip(&b.rep.Skipped, "thoughts")
				}
			case "info", "error", "warning":
				b.message(tier.KindSystem, r.modelText(m), t)
			default:
				b.rep.skip(&b.rep.Unknown, "type/"+m.Type)
			}
		}
		if (known || b.rep.Events > events) && r.refs[m.ID] == "" {
			r.refs[m.ID] = m.ID
		}
	} else if !first {
		b.rep.skip(&b.rep.Skipped, "message_update")
	}
	for i := range m.ToolCalls {
		if err := r.call(raw, m, i); err != nil {
			return err
		}
	}
	return nil
}

// call maps a tool call that ran (or was cancelled): the call and its
// result, once, by the call's id. A call not run yet is left for the
// record that gives its result.
func (r *geminiReader) call(raw []byte, m *geminiMessage, i int) error {
	b := r.d.b
	c := &m.ToolCalls[i]
	if !geminiDone[c.Status] {
		b.rep.skip(&b.rep.Skipped, "tool_call/"+c.Status)
		return nil
	}
	ref := c.ID
	if ref == "" {
		ref = m.ID + "/" + strconv.Itoa(i)
	}
	if r.calls[ref] {
		return nil
	}
	r.calls[ref] = true
	known, err := r.stored(raw, ref)
	if r.refs[m.ID] == "" && err == nil {
		r.refs[m.ID] = r.d.b.ref
	}
	if known || err != nil {
		return err
	}
	t := b.parseTime(c.Timestamp)
	if t == 0 {
		t = b.parseTime(m.Timestamp)
	}
	input := compactJSON(c.Args)
	if len(input) == 0 {
		input = []byte("{}")
	}
	id := b.call(c.ID, c.Name, input, t)
	text, errored := r.resultText(c.Result)
	info := resultInfo{failed: c.Status != "success" || errored, rejected: c.Status == "cancelled"}
	if c.Name == geminiShell && !info.failed {
		info.failed = shellFailed(text)
	}
	if normalizeTool(c.Name) == "replace" {
		if p := str(args(input)["file_path"]); p != "" {
			info.paths = []string{p}
		}
	}
	b.result(id, text, info, t)
	return nil
}

// stored names the events about to be mapped by ref and reports whether
// the session holds them.
func (r *geminiReader) stored(raw []byte, ref string) (bool, error) {
	return r.d.stored(raw, ref)
}

// hasCall reports whether a message's content holds a function call.
func (r *geminiReader) hasCall(m *geminiMessage) bool {
	for _, p := range r.parts(m.Content) {
		if p.FunctionCall != nil {
			return true
		}
	}
	return false
}

// sig is a message's signature: its type, its text, and the ids of the
// calls and results it carries — what a copy of it under another id
// keeps.
func (r *geminiReader) sig(m *geminiMessage) string {
	var ids []string
	for _, c := range m.ToolCalls {
		ids = append(ids, "c:"+c.ID)
	}
	text := ""
	if m.Type == "user" {
		text = r.userText(m, false) + "\x00" + r.contextText(m)
	} else {
		text = r.modelText(m)
	}
	for _, p := range r.parts(m.Content) {
		switch {
		case p.FunctionCall != nil:
			ids = append(ids, "c:"+p.FunctionCall.ID)
		case p.FunctionResp != nil:
			ids = append(ids, "r:"+p.FunctionResp.ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return m.Type + "\x00" + strings.TrimSpace(text) + "\x00" + strings.Join(ids, ",")
}

// parts returns a content's parts: a string is one text part.
func (r *geminiReader) parts(raw json.RawMessage) []geminiPart {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []geminiPart{{Text: &s}}
	}
	var list []geminiPart
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var one geminiPart
	if json.Unmarshal(raw, &one) == nil {
		return []geminiPart{one}
	}
	return nil
}

// userText returns the user's words in a user message: its text parts
// but those Gemini CLI writes itself (the session's context, a hook's
// additional context). count says to count what is left out.
func (r *geminiReader) userText(m *geminiMessage, count bool) string {
	b := r.d.b
	var out []string
	for _, p := range r.parts(m.Content) {
		switch {
		case p.FunctionResp != nil:
			if count {
				b.rep.skip(&b.rep.Skipped, "functionResponse")
			}
		case p.Text == nil:
		case strings.HasPrefix(strings.TrimSpace(*p.Text), geminiHookContext):
			if count {
				b.rep.skip(&b.rep.Skipped, "hook_context")
			}
		case strings.HasPrefix(strings.TrimSpace(*p.Text), geminiSessionContext):
		default:
			out = append(out, *p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// contextText returns the session's context Gemini CLI wrote as a user
// message's text.
func (r *geminiReader) contextText(m *geminiMessage) string {
	var out []string
	for _, p := range r.parts(m.Content) {
		if p.Text != nil && strings.HasPrefix(strings.TrimSpace(*p.Text), geminiSessionContext) {
			out = append(out, *p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// modelText returns the text of a model (or info) message: its text
// parts but its thoughts.
func (r *geminiReader) modelText(m *geminiMessage) string {
	var out []string
	for _, p := range r.parts(m.Content) {
		if p.Text != nil && !p.Thought {
			out = append(out, *p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// resultText returns a tool call's result as text — each function
// response's output, or its error, else its response as JSON; text parts
// as they are — and whether a response carries an error field.
func (r *geminiReader) resultText(raw json.RawMessage) (string, bool) {
	errored := false
	var out []string
	for _, p := range r.parts(raw) {
		switch {
		case p.FunctionResp != nil:
			var resp struct {
				Output *string         `json:"output"`
				Error  json.RawMessage `json:"error"`
			}
			_ = json.Unmarshal(p.FunctionResp.Response, &resp) // another shape is kept as JSON
			e := bytes.TrimSpace(resp.Error)
			hasErr := len(e) > 0 && string(e) != "null" && string(e) != `""`
			errored = errored || hasErr
			switch {
			case resp.Output != nil:
				out = append(out, *resp.Output)
			case hasErr:
				if s := str(resp.Error); s != "" {
					out = append(out, s)
				} else {
					out = append(out, string(compactJSON(resp.Error)))
				}
			default:
				out = append(out, string(compactJSON(p.FunctionResp.Response)))
			}
		case p.Text != nil:
			out = append(out, *p.Text)
		}
	}
	return strings.Join(out, "\n"), errored
}

// shellFailed reports whether Gemini CLI's shell tool wrote, after a
// command's output, that the command failed: a non-zero Exit Code or the
// Signal that terminated it. It reads only a result of the tool's exact
// layout: "Output: " first, the field anchored at the end by the fields
// the tool writes after it (shellTrailer), the whole either within the
// <untrusted_context> tags it wraps its result in or bare. Gemini CLI
// records such a call's status as "success" and keeps the code nowhere
// else. A command's output cannot hide a failure — the tool's own fields
// come after the output — but an output whose last line is "Exit Code: N"
// (N ≠ 0) or "Signal: S", followed by what the tool writes after a
// success, reads as a failure: the text cannot tell them apart
// (docs/importing.md).
func shellFailed(text string) bool {
	body := text
	if rest, ok := strings.CutPrefix(text, untrustedOpen); ok {
		if body, ok = strings.CutSuffix(rest, untrustedClose); !ok {
			return false
		}
	}
	return strings.HasPrefix(body, "Output: ") && shellTrailer.MatchString(body)
}
