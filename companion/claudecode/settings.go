package claudecode

import (
	"path/filepath"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/companion"
)

// StrataHooks returns strata's hooks in a settings text (file names it in
// errors): every hook handler whose command is strata's hook
// (IsStrataHook), under any event. A text that is not JSON, or whose
// hooks are not of the kinds Claude Code reads, is an error at its line
// and column (a *SyntaxError for one that is not JSON).
func StrataHooks(file string, text []byte) ([]SettingsHook, error) {
	h, err := parseClaudeHooks(file, text)
	if err != nil {
		return nil, err
	}
	var out []SettingsHook
	for _, e := range h.strata {
		out = append(out, SettingsHook{Event: e.event, Matcher: e.matcher, Command: e.command.str})
	}
	return out, nil
}

// This file reads and edits the hooks of a Claude Code settings text:
// strata's hook handlers, found by their command wherever they stand, and
// the text install adds and uninstall takes out again (jsontext.go).

// IsStrataHook reports whether a hook's command line is strata's hook: a
// program named strata (any directory) run as `claude-code hook`.
// uninstall and status find strata's entries by it, wherever they stand.
func IsStrataHook(command string) bool {
	words, ok := companion.ShellWords(command, nil)
	if !ok || len(words) < 3 {
		return false
	}
	prog := filepath.Base(words[0])
	return (prog == "strata" || prog == "strata.exe") && words[1] == "claude-code" && words[2] == "hook"
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
	for _, ev := range HookEvents {
		if em, err := onlyMember(h, m.value, ev.Name); err != nil {
			return nil, err
		} else if em != nil && em.value.kind != '[' {
			return nil, syntaxErrorAt(file, text, em.value.start, "hooks.%s is %s, not a list of matchers and their hooks", ev.Name, em.value.kindName(text))
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
				if hd.kind != '{' || !ok || cmd.value.kind != '"' || !IsStrataHook(cmd.value.str) {
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
	handler := jsonObject{{"type", "command"}, {"command", command}, {"timeout", HookTimeout}}
	return append(g, jsonKV{"hooks", []any{handler}})
}

// hookEvents is the hooks object install writes where there is none: an
// event each, its list holding strata's group.
func hookEvents(command string) jsonObject {
	var o jsonObject
	for _, ev := range HookEvents {
		o = append(o, jsonKV{ev.Name, []any{hookGroup(ev.Matcher, command)}})
	}
	return o
}

// SettingsHook is one of strata's hooks in Claude Code's settings.
type SettingsHook struct {
	Event   string `json:"event"`
	Matcher string `json:"matcher,omitempty"`
	Command string `json:"command"`
}

// HookChange is what install or uninstall did to strata's hook under one
// event.
type HookChange struct {
	What string // added, updated, unchanged or removed
	SettingsHook
	Was string // updated: the command before
}

// InstallHooks returns the settings text with strata's hooks, running
// command, under each of HookEvents, what it changed, and what it
// created (claudeInstallRecord's entries: "hooks", "hooks.EVENT"). An
// event that has strata's handler keeps it where it is, its command made
// command; one without gets strata's group after the groups it has; the
// events hooks lacks get their lists after its members, in one edit.
// text nil is a missing file: install makes the whole document. The text
// is parsed once.
func InstallHooks(file string, text []byte, command string) (out []byte, changes []HookChange, created []string, err error) {
	if text == nil {
		text, created = []byte("{}\n"), []string{"file"}
	}
	h, err := parseClaudeHooks(file, text)
	if err != nil {
		return nil, nil, nil, err
	}
	if h.hooks == nil {
		for _, ev := range HookEvents {
			changes = append(changes, HookChange{What: "added", SettingsHook: SettingsHook{Event: ev.Name, Matcher: ev.Matcher, Command: command}})
		}
		edit := appendItems(text, h.root, h.layout, func(indent string, flat bool) string {
			return renderMember("hooks", hookEvents(command), indent, h.layout, flat)
		})
		return edit.apply(text), changes, append(created, "hooks"), nil
	}
	var missing []func(indent string, flat bool) string // the lists of the events hooks lacks
	for _, ev := range HookEvents {
		if _, ok := h.hooks.value.member(ev.Name); !ok {
			missing = append(missing, func(indent string, flat bool) string {
				return renderMember(ev.Name, []any{hookGroup(ev.Matcher, command)}, indent, h.layout, flat)
			})
		}
	}
	for _, ev := range HookEvents {
		change := HookChange{What: "added", SettingsHook: SettingsHook{Event: ev.Name, Matcher: ev.Matcher, Command: command}}
		em, _ := h.hooks.value.member(ev.Name)
		mine := h.entriesOf(ev.Name)
		var edits []jsonEdit
		switch {
		case em.value == nil:
			// Every list hooks lacks, in one edit: the values parsed do not
			// hold one inserted, which the next would follow.
			if missing != nil {
				edits = append(edits, appendItems(h.text, h.hooks.value, h.layout, missing...))
				missing = nil
			}
			created = append(created, "hooks."+ev.Name)
		case len(mine) == 0:
			edits = append(edits, appendItems(h.text, em.value, h.layout, func(indent string, flat bool) string {
				return renderJSON(hookGroup(ev.Matcher, command), indent, h.layout, flat)
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

// UninstallHooks returns the settings text without strata's handlers —
// each with its group when the group holds nothing else — and without the
// event lists and hooks object that created names (install's record) once
// they are empty. empty reports that the document is then an empty
// object. The text is parsed once.
func UninstallHooks(file string, text []byte, created []string) (out []byte, removed []HookChange, empty bool, err error) {
	h, err := parseClaudeHooks(file, text)
	if err != nil {
		return nil, nil, false, err
	}
	for len(h.strata) > 0 {
		// The last first: each removal is the inverse of the append that
		// made it while what came after it is gone too.
		e := h.strata[len(h.strata)-1]
		removed = append(removed, HookChange{What: "removed", SettingsHook: SettingsHook{Event: e.event, Matcher: e.matcher, Command: e.command.str}})
		if e.lone {
			h.remove(e.list, e.group)
		} else {
			h.remove(e.handlers, e.handler)
		}
	}
	slices.Reverse(removed)
	// Then the containers install made, innermost first, each the last of
	// its object when install added it.
	for i := len(HookEvents) - 1; i >= -1 && h.hooks != nil; i-- {
		obj, key, parent := h.hooks.value, "", h.hooks.value
		if i >= 0 {
			key = HookEvents[i].Name
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
