package main

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
)

// This file reads and edits the hooks of a Claude Code settings text:
// strata's hook handlers, found by their command wherever they stand, and
// the text install adds and uninstall takes out again (jsontext.go).

// isStrataHook reports whether a hook's command line is strata's hook: a
// program named strata (any directory) run as `claude-code hook`.
// uninstall and status find strata's entries by it, wherever they stand.
func isStrataHook(command string) bool {
	words, ok := shellWords(command, nil)
	if !ok || len(words) < 3 {
		return false
	}
	prog := filepath.Base(words[0])
	return (prog == "strata" || prog == "strata.exe") && words[1] == "claude-code" && words[2] == "hook"
}

// shellWords splits a command line into words as sh does, for the forms a
// hook's command takes: words apart by blanks; '…' as it is; "…" with \
// before " \ $ and ` escaping it; \ outside quotes; $NAME and ${NAME}
// outside single quotes replaced by env(NAME), or kept as written when env
// is nil. ok is false for a line it does not read so: an unclosed quote,
// or any of | & ; < > ( ) ` outside quotes.
func shellWords(s string, env func(string) string) (words []string, ok bool) {
	var w strings.Builder
	inWord := false
	expand := func(i int) int { // s[i] == '$': returns the index past the name
		j, name := i+1, ""
		if j < len(s) && s[j] == '{' {
			k := strings.IndexByte(s[j:], '}')
			if k < 0 {
				return -1
			}
			name, j = s[j+1:j+k], j+k+1
		} else {
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name = s[i+1 : j]
		}
		switch {
		case name == "":
			w.WriteByte('$')
			return i + 1
		case env == nil:
			w.WriteString(s[i:j])
		default:
			w.WriteString(env(name))
		}
		return j
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
			continue
		case strings.IndexByte("|&;<>()`", c) >= 0:
			return nil, false
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
					i++
					w.WriteByte(s[i])
				case s[i] == '$':
					if i = expand(i); i < 0 {
						return nil, false
					}
					i--
				default:
					w.WriteByte(s[i])
				}
			}
			if i >= len(s) {
				return nil, false
			}
			i++
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			i += 2
		case c == '$':
			if i = expand(i); i < 0 {
				return nil, false
			}
		default:
			w.WriteByte(c)
			i++
		}
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, true
}

// strataHookEntry is one of strata's hook handlers in a settings text.
type strataHookEntry struct {
	event    string
	matcher  string    // its group's
	list     *jsonNode // the event's list of groups
	group    int       // its group's index in list
	handlers *jsonNode // the group's list of handlers
	handler  int       // its index in handlers
	lone     bool      // its group holds it alone, with a matcher at most
	command  *jsonNode
}

// claudeHooksText is a settings text parsed — once: an edit moves what
// the parse found to where it stands in the text the edit gives — its
// root object, its hooks member (nil without one), and strata's handlers
// in it, in text order.
type claudeHooksText struct {
	file   string
	text   []byte
	layout jsonLayout
	root   *jsonNode
	hooks  *jsonMember
	strata []strataHookEntry
}

// parseClaudeHooks parses a settings text. A text that is not JSON, or
// whose root, hooks or the lists of strata's events are of another kind
// than Claude Code reads, or that names one of them twice, is an error at
// its line and column.
func parseClaudeHooks(file string, text []byte) (*claudeHooksText, error) {
	root, err := parseJSONText(file, text)
	if err != nil {
		return nil, errors.WithHint(err, "Claude Code reads its settings as JSON, without comments or trailing commas; fix the file, then run the command again")
	}
	h := &claudeHooksText{file: file, text: text, layout: layoutOf(text), root: root}
	if root.kind != '{' {
		return nil, syntaxErrorAt(file, text, root.start, "the settings are %s, not an object", root.kindName(text))
	}
	m, err := onlyMember(h, root, "hooks")
	if err != nil || m == nil {
		return h, err
	}
	if m.value.kind != '{' {
		return nil, syntaxErrorAt(file, text, m.value.start, "\"hooks\" is %s, not an object of hook events", m.value.kindName(text))
	}
	for _, ev := range claudeHookEvents {
		if em, err := onlyMember(h, m.value, ev.name); err != nil {
			return nil, err
		} else if em != nil && em.value.kind != '[' {
			return nil, syntaxErrorAt(file, text, em.value.start, "hooks.%s is %s, not a list of matchers and their hooks", ev.name, em.value.kindName(text))
		}
	}
	h.scan()
	return h, nil
}

// scan finds the hooks member and strata's handlers in the parsed text.
func (h *claudeHooksText) scan() {
	h.hooks, h.strata = nil, nil
	for i := range h.root.members {
		if h.root.members[i].key == "hooks" {
			h.hooks = &h.root.members[i]
		}
	}
	if h.hooks == nil {
		return
	}
	for _, em := range h.hooks.value.members {
		if em.value.kind != '[' {
			continue
		}
		for gi, g := range em.value.elems {
			handlers, ok := g.member("hooks")
			if g.kind != '{' || !ok || handlers.value.kind != '[' {
				continue
			}
			matcher, _ := g.member("matcher")
			for hi, hd := range handlers.value.elems {
				cmd, ok := hd.member("command")
				if hd.kind != '{' || !ok || cmd.value.kind != '"' || !isStrataHook(cmd.value.str) {
					continue
				}
				e := strataHookEntry{event: em.key, list: em.value, group: gi, handlers: handlers.value, handler: hi, command: cmd.value}
				if matcher.value != nil {
					e.matcher = matcher.value.str
				}
				e.lone = len(handlers.value.elems) == 1 && !slices.ContainsFunc(g.members, func(m jsonMember) bool {
					return m.key != "hooks" && m.key != "matcher"
				})
				h.strata = append(h.strata, e)
			}
		}
	}
}

// edit makes e in the text, and moves the values parsed to where they
// stand in it. It adds no value: what e inserts is in the text, not in
// the values parsed, so that an edit after it must not need to find it.
func (h *claudeHooksText) edit(e jsonEdit) {
	h.text = e.apply(h.text)
	h.layout = layoutOf(h.text)
	h.root.shift(e)
}

// remove takes item i of the object or array c out of the text
// (removeItem) and out of the values parsed, and finds strata's handlers
// again.
func (h *claudeHooksText) remove(c *jsonNode, i int) {
	e := removeItem(h.text, c, i, h.layout)
	if c.kind == '{' {
		c.members = slices.Delete(c.members, i, i+1)
	} else {
		c.elems = slices.Delete(c.elems, i, i+1)
	}
	h.edit(e)
	h.scan()
}

// onlyMember returns obj's member key (nil without one); a key the object
// has twice is an error: JSON.parse keeps the last, and editing either
// would be a guess.
func onlyMember(h *claudeHooksText, obj *jsonNode, key string) (*jsonMember, error) {
	var found *jsonMember
	for i := range obj.members {
		if obj.members[i].key != key {
			continue
		}
		if found != nil {
			first := syntaxErrorAt(h.file, h.text, found.start, "")
			return nil, syntaxErrorAt(h.file, h.text, obj.members[i].start, "%q appears twice in one object (first at %d:%d)", key, first.Line, first.Col)
		}
		found = &obj.members[i]
	}
	return found, nil
}

// entriesOf returns strata's handlers under event.
func (h *claudeHooksText) entriesOf(event string) []strataHookEntry {
	var out []strataHookEntry
	for _, e := range h.strata {
		if e.event == event {
			out = append(out, e)
		}
	}
	return out
}

// hookGroup is the group install adds under an event: its matcher, if
// any, and strata's handler.
func hookGroup(matcher, command string) jsonObject {
	var g jsonObject
	if matcher != "" {
		g = append(g, jsonKV{"matcher", matcher})
	}
	handler := jsonObject{{"type", "command"}, {"command", command}, {"timeout", claudeHookTimeout}}
	return append(g, jsonKV{"hooks", []any{handler}})
}

// hookEvents is the hooks object install writes where there is none: an
// event each, its list holding strata's group.
func hookEvents(command string) jsonObject {
	var o jsonObject
	for _, ev := range claudeHookEvents {
		o = append(o, jsonKV{ev.name, []any{hookGroup(ev.matcher, command)}})
	}
	return o
}

// claudeHook is one of strata's hooks in Claude Code's settings.
type claudeHook struct {
	Event   string `json:"event"`
	Matcher string `json:"matcher,omitempty"`
	Command string `json:"command"`
}

// hookChange is what install or uninstall did to strata's hook under one
// event.
type hookChange struct {
	What string // added, updated, unchanged or removed
	claudeHook
	Was string // updated: the command before
}

// installHooks returns the settings text with strata's hooks, running
// command, under each of claudeHookEvents, what it changed, and what it
// created (claudeInstallRecord's entries: "hooks", "hooks.EVENT"). An
// event that has strata's handler keeps it where it is, its command made
// command; one without gets strata's group after the groups it has; the
// events hooks lacks get their lists after its members, in one edit.
// text nil is a missing file: install makes the whole document. The text
// is parsed once.
func installHooks(file string, text []byte, command string) (out []byte, changes []hookChange, created []string, err error) {
	if text == nil {
		text, created = []byte("{}\n"), []string{"file"}
	}
	h, err := parseClaudeHooks(file, text)
	if err != nil {
		return nil, nil, nil, err
	}
	if h.hooks == nil {
		for _, ev := range claudeHookEvents {
			changes = append(changes, hookChange{What: "added", claudeHook: claudeHook{Event: ev.name, Matcher: ev.matcher, Command: command}})
		}
		edit := appendItems(text, h.root, h.layout, func(indent string, flat bool) string {
			return renderMember("hooks", hookEvents(command), indent, h.layout, flat)
		})
		return edit.apply(text), changes, append(created, "hooks"), nil
	}
	var missing []func(indent string, flat bool) string // the lists of the events hooks lacks
	for _, ev := range claudeHookEvents {
		if _, ok := h.hooks.value.member(ev.name); !ok {
			missing = append(missing, func(indent string, flat bool) string {
				return renderMember(ev.name, []any{hookGroup(ev.matcher, command)}, indent, h.layout, flat)
			})
		}
	}
	for _, ev := range claudeHookEvents {
		change := hookChange{What: "added", claudeHook: claudeHook{Event: ev.name, Matcher: ev.matcher, Command: command}}
		em, _ := h.hooks.value.member(ev.name)
		mine := h.entriesOf(ev.name)
		var edits []jsonEdit
		switch {
		case em.value == nil:
			// Every list hooks lacks, in one edit: the values parsed do not
			// hold one inserted, which the next would follow.
			if missing != nil {
				edits = append(edits, appendItems(h.text, h.hooks.value, h.layout, missing...))
				missing = nil
			}
			created = append(created, "hooks."+ev.name)
		case len(mine) == 0:
			edits = append(edits, appendItems(h.text, em.value, h.layout, func(indent string, flat bool) string {
				return renderJSON(hookGroup(ev.matcher, command), indent, h.layout, flat)
			}))
		default:
			change.What, change.Matcher = "unchanged", mine[0].matcher
			for _, e := range mine {
				if e.command.str != command {
					change.What, change.Was = "updated", e.command.str
					edits = append(edits, jsonEdit{start: e.command.start, end: e.command.end, s: jsonString(command)})
				}
			}
		}
		// From the last: an edit leaves the spans before it where they are.
		slices.SortFunc(edits, func(a, b jsonEdit) int { return b.start - a.start })
		for _, e := range edits {
			h.edit(e)
		}
		changes = append(changes, change)
	}
	return h.text, changes, created, nil
}

// uninstallHooks returns the settings text without strata's handlers —
// each with its group when the group holds nothing else — and without the
// event lists and hooks object that created names (install's record) once
// they are empty. empty reports that the document is then an empty
// object. The text is parsed once.
func uninstallHooks(file string, text []byte, created []string) (out []byte, removed []hookChange, empty bool, err error) {
	h, err := parseClaudeHooks(file, text)
	if err != nil {
		return nil, nil, false, err
	}
	for len(h.strata) > 0 {
		// The last first: each removal is the inverse of the append that
		// made it while what came after it is gone too.
		e := h.strata[len(h.strata)-1]
		removed = append(removed, hookChange{What: "removed", claudeHook: claudeHook{Event: e.event, Matcher: e.matcher, Command: e.command.str}})
		if e.lone {
			h.remove(e.list, e.group)
		} else {
			h.remove(e.handlers, e.handler)
		}
	}
	slices.Reverse(removed)
	// Then the containers install made, innermost first, each the last of
	// its object when install added it.
	for i := len(claudeHookEvents) - 1; i >= -1 && h.hooks != nil; i-- {
		obj, key, parent := h.hooks.value, "", h.hooks.value
		if i >= 0 {
			key = claudeHookEvents[i].name
			if !slices.Contains(created, "hooks."+key) && !slices.Contains(created, "hooks") {
				continue
			}
			m, _ := obj.member(key)
			if m.value == nil || len(m.value.elems) > 0 {
				continue
			}
		} else {
			key, parent = "hooks", h.root
			if !slices.Contains(created, "hooks") || len(obj.members) > 0 {
				continue
			}
		}
		h.remove(parent, slices.IndexFunc(parent.members, func(m jsonMember) bool { return m.key == key }))
	}
	return h.text, removed, len(h.root.members) == 0, nil
}
