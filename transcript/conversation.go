package transcript

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// messageKeys are the keys under which a JSON object holds a conversation's
// messages, in the order they are tried: the first whose value is a list
// holding a message is the conversation's. "messages" is the Chat
// Completions' and Anthropic's, "input" the Responses API's; the others are
// those of exports and agent trajectories — "chat_messages" claude.ai's,
// "history" SWE-agent's, "conversations" ShareGPT's, "trajectory" and
// "steps" a list of agent steps (thought, action, observation).
var messageKeys = []string{"messages", "input", "chat_messages", "history", "conversation", "conversations", "turns", "steps", "trajectory"}

// idKeys are the keys of a conversation object's own id, in the order they
// are tried; a string or a number.
var idKeys = []string{"id", "conversation_id", "session_id", "sessionId", "uuid"}

// messageConversationKeys are the keys by which a message that stands
// alone names its conversation.
var messageConversationKeys = []string{"conversation_id", "session_id", "sessionId"}

// conversation is one conversation of a transcript: its name, the session
// its events go to, and how many records it has had.
type conversation struct {
	name string
	b    *builder
	n    int
}

// enter makes name the conversation of the records that follow, asking
// Options.Target where it goes the first time.
func (d *Decoder) enter(name string) error {
	c := d.convs[name]
	if c == nil {
		t := Target{Session: name}
		if d.opts.Target != nil {
			var err error
			if t, err = d.opts.Target(name); err != nil {
				return err
			}
		}
		b := d.sessions[t.Session]
		if b == nil {
			b = newBuilder(d.opts, &d.sh, t)
			d.sessions[t.Session] = b
			d.order = append(d.order, b)
		}
		c = &conversation{name: name, b: b}
		d.convs[name] = c
	}
	d.conv, d.b = c, c.b
	return nil
}

// begin counts a record of the current conversation: Records, its
// position, and the bytes it reads as U+FFFD.
func (d *Decoder) begin(raw []byte) {
	d.conv.n++
	d.b.rep.Records++
	d.b.rep.InvalidUTF8 += replacements(raw)
	d.b.ref = ""
}

// stored gives the record being mapped its ref — id, its own id, or one
// derived from the conversation, its position and its bytes — and reports
// whether its session holds it already (Target.Stored): then it is counted
// (Report.Known) and not mapped.
func (d *Decoder) stored(raw []byte, id string) (bool, error) {
	b := d.b
	if id != "" {
		b.ref = b.id(id)
	} else {
		b.ref = derivedRef(d.conv.name, d.conv.n, raw)
	}
	if b.stored == nil {
		return false, nil
	}
	known, err := b.stored(b.ref)
	if err != nil {
		return false, errors.Wrapf(err, "transcript: %s:%d: looking up record %q", d.opts.File, d.sh.line, b.ref)
	}
	if known {
		b.rep.Known++
		d.recognized++
	}
	return known, nil
}

// derivedRef is the ref of a record without an id of its own: its position
// in its conversation (from 1) and the first 16 hex digits of the SHA-256
// of the conversation's name, a NUL and the record's JSON without
// insignificant space — "12:3f0c9a7be1d2c4f5". It is the same for the same
// record of a file read again, and of a file that grew at its end.
func derivedRef(conversation string, n int, raw []byte) string {
	h := sha256.New()
	h.Write([]byte(conversation))
	h.Write([]byte{0})
	h.Write(compactJSON(raw))
	return strconv.Itoa(n) + ":" + hex.EncodeToString(h.Sum(nil)[:8])
}

// value maps one top-level value of an OpenAI or Anthropic transcript (an
// element of a top-level array counts as one): a message, a conversation
// object, or something this package does not know.
func (d *Decoder) value(raw []byte, listed bool) error {
	var top map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &top) != nil {
		return errors.Wrap(ErrBadRecord, "a record must be a JSON object (a message or a conversation) or an array of them")
	}
	key, msgs := messagesOf(top)
	if isMessage(top, key) || isStep(top) {
		name := d.base
		for _, k := range messageConversationKeys {
			if id := idOf(top[k]); id != "" {
				name = id
				break
			}
		}
		if err := d.enter(name); err != nil {
			return err
		}
		return d.message(raw)
	}
	if key == "" {
		d.loose(raw)
		if d.seen == "" {
			d.seen = describe(top) + ": no list of messages under " + strings.Join(messageKeys, ", ")
		}
		return nil
	}
	base := d.sh.line
	if i := bytes.Index(raw, msgs); i >= 0 {
		base += bytes.Count(raw[:i], []byte{'\n'})
	}
	if err := d.conversation(top, listed); err != nil {
		return err
	}
	return eachElement(msgs, base, func(elem []byte, line int) error {
		d.sh.line = line
		return d.message(elem)
	})
}

// bigValue maps a top-level object read member by member: a conversation
// is entered and its messages are streamed from the input (d.list); a
// message, or an object of no kind this package knows, is read again whole
// and mapped as value maps it.
func (d *Decoder) bigValue(vs *valueSource, o *bigObject, listed bool) error {
	key := chooseList(func(k string) listKind {
		if l := o.lists[k]; l != nil {
			return listKind{list: true, message: l.message, empty: l.empty}
		}
		return listKind{}
	})
	if key == "" || isMessage(o.members, key) || isStep(o.members) {
		raw, err := vs.raw(o)
		if err != nil {
			return err
		}
		return d.value(raw, listed)
	}
	if err := d.conversation(o.members, listed); err != nil {
		return err
	}
	var err error
	d.list, err = vs.list(o.lists[key])
	return err
}

// conversation enters the conversation of the conversation object top —
// its own id, else a name after the file — and maps its Anthropic system
// prompt.
func (d *Decoder) conversation(top map[string]json.RawMessage, listed bool) error {
	d.nconv++
	name := ""
	for _, k := range idKeys {
		if name = idOf(top[k]); name != "" {
			break
		}
	}
	switch {
	case name != "":
	case listed:
		name = d.numbered(d.nconv)
	default:
		name = d.base
	}
	if err := d.enter(name); err != nil {
		return err
	}
	if sys, ok := top["system"]; ok && d.f == Anthropic {
		d.begin(sys)
		known, err := d.stored(sys, "")
		if err != nil {
			return err
		}
		if !known {
			d.recognized++
			d.an.content(tier.KindSystem, sys, 0, resultInfo{})
		}
	}
	return nil
}

// numbered names the n-th conversation of a file that holds a list of
// them: "<file>-<n>".
func (d *Decoder) numbered(n int) string {
	base := d.base
	if base == "" {
		base = "stdin"
	}
	return base + "-" + strconv.Itoa(n)
}

// loose counts a top-level value that is neither a message nor a
// conversation, outside any conversation.
func (d *Decoder) loose(raw []byte) {
	d.outside.Records++
	d.outside.InvalidUTF8 += replacements(raw)
	d.outside.skip(&d.outside.Unknown, "(no role or messages)")
}

// message maps one message (or step) of the current conversation.
func (d *Decoder) message(raw []byte) error {
	d.begin(raw)
	if known, err := d.stored(raw, ""); known || err != nil {
		return err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && isStep(obj) {
			d.step(obj)
			return nil
		}
	}
	if d.f == Anthropic {
		d.an.message(raw)
	} else {
		d.oa.message(raw)
	}
	return nil
}

// isMessage reports whether a JSON object is a message or an item: it has
// a role (ShareGPT's "from", claude.ai's "sender"), or a type and no list
// of messages (list, messagesOf's key, is "").
func isMessage(obj map[string]json.RawMessage, list string) bool {
	if hasAny(obj, "role", "from", "sender") {
		return true
	}
	_, ok := obj["type"]
	return ok && list == ""
}

// isStep reports whether a JSON object is an agent's step as trajectory
// files give them: no role, and an action or an observation.
func isStep(obj map[string]json.RawMessage) bool {
	if hasAny(obj, "role", "from", "sender", "type") {
		return false
	}
	return hasAny(obj, "action", "observation")
}

// listKind is what a value under one of messageKeys is: a list or not, and
// whether the list holds a message (or a step), or nothing.
type listKind struct{ list, message, empty bool }

// chooseList returns the first of messageKeys whose value (kind) is a list
// with a message or a step in it; failing that, the first that is an empty
// list (a conversation without messages); else "".
func chooseList(kind func(key string) listKind) string {
	empty := ""
	for _, k := range messageKeys {
		switch l := kind(k); {
		case !l.list:
		case l.message:
			return k
		case l.empty && empty == "":
			empty = k
		}
	}
	return empty
}

// messagesOf returns the key of obj's conversation (chooseList) and its
// list; "" when obj holds none.
func messagesOf(obj map[string]json.RawMessage) (string, []byte) {
	key := chooseList(func(k string) listKind {
		v := bytes.TrimSpace(obj[k])
		var elems []json.RawMessage
		if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &elems) != nil {
			return listKind{}
		}
		return listKind{list: true, message: slices.ContainsFunc(elems, holdsMessage), empty: len(elems) == 0}
	})
	if key == "" {
		return "", nil
	}
	return key, bytes.TrimSpace(obj[key])
}

// holdsMessage reports whether an element of a list is a message or a
// step: an object with a role, from, sender or type, or a step's action or
// observation.
func holdsMessage(elem json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(elem, &m) == nil && (isStep(m) || hasAny(m, "role", "from", "sender", "type"))
}

func hasAny(obj map[string]json.RawMessage, keys ...string) bool {
	for _, k := range keys {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

// idOf returns an id given as a JSON string or number, "" otherwise.
func idOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return string(raw)
	}
	return ""
}

// step maps an agent's step: its thought (or response) as the assistant's
// text, its action as a call named after the action's first word (id
// "step-N", N its position in the conversation), and its observation as
// the call's result.
func (d *Decoder) step(obj map[string]json.RawMessage) {
	b := d.b
	d.recognized++
	text := func(k string) string {
		v := bytes.TrimSpace(obj[k])
		if len(v) == 0 || string(v) == "null" {
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(compactJSON(v))
	}
	t := b.parseTime(obj["timestamp"])
	thought := text("thought")
	if thought == "" {
		thought = text("response")
	}
	b.message(tier.KindAssistant, thought, t)
	action, observation := text("action"), text("observation")
	if strings.TrimSpace(action) == "" {
		b.message(tier.KindSystem, observation, t)
		return
	}
	name := "action"
	if f := strings.Fields(action); len(f) > 0 {
		name = f[0]
	}
	id := b.call("step-"+strconv.Itoa(d.conv.n), name, []byte(action), t)
	b.result(id, observation, resultInfo{}, t)
}

// describe says what a JSON object that holds no conversation looks like,
// for the error of a file in which nothing is recognized.
func describe(obj map[string]json.RawMessage) string {
	if len(obj) == 0 {
		return "an empty JSON object"
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, fmt.Sprintf("%q", tier.TruncateUTF8(k, 40)))
	}
	slices.Sort(keys)
	more := ""
	if len(keys) > 8 {
		more = fmt.Sprintf(" and %d more", len(keys)-8)
		keys = keys[:8]
	}
	return "a JSON object with keys " + strings.Join(keys, ", ") + more
}
