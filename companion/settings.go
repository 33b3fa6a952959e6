package companion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/tailscale/hujson"
)

// This file reads and edits the hooks of an agent's settings text:
// strata's hook handlers, found by their command wherever they stand, and
// the text install adds and uninstall takes out again. The text is parsed
// by hujson, which keeps every byte of it — whitespace, line ends, key
// order, comments — in its syntax tree; an edit changes the tree, and
// packing it gives the text with that change alone.

// SettingsHook is one of strata's hooks in an agent's settings.
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

// IsStrataHook reports whether a hook's command line is strata's hook of
// agent a: a program named strata (any directory) run as `NAME hook`.
// uninstall and status find strata's entries by it, wherever they stand.
func IsStrataHook(a Agent, command string) bool {
	words, ok := ShellWords(command, nil)
	if !ok || len(words) < 3 {
		return false
	}
	prog := filepath.Base(words[0])
	return (prog == "strata" || prog == "strata.exe") && words[1] == a.Name() && words[2] == "hook"
}

// StrataHooks returns strata's hooks in a settings text of agent a (file
// names it in errors): every hook handler whose command is strata's hook
// (IsStrataHook), under any event. A text that is not JSON as the agent
// reads it (Settings.Comments), whose hooks are not of the kinds the
// agent reads, or that holds a top-level member the agent refuses
// (Settings.Members), is an error at its line and column (a
// *SyntaxError).
func StrataHooks(a Agent, file string, text []byte) ([]SettingsHook, error) {
	h, err := parseHooks(a, file, text)
	if err != nil {
		return nil, err
	}
	var out []SettingsHook
	for _, e := range h.strata {
		out = append(out, e.hook)
	}
	return out, nil
}

// InstallHooks returns the settings text of agent a with strata's hooks,
// running command, under each of its Settings.Events, what it changed,
// and what it created ("file", "hooks", "hooks.EVENT": what uninstall
// removes again once empty). An event that has strata's handler keeps it
// where it is, its command made command; one without gets strata's group
// after the groups it has; the events hooks lacks get their lists after
// its members. Inserted text follows its neighbours' layout: their
// indentation and line ends, one line in a text of one line. text nil is
// a missing file: install makes the whole document.
func InstallHooks(a Agent, file string, text []byte, command string) (out []byte, changes []HookChange, created []string, err error) {
	if text == nil {
		text, created = []byte("{}\n"), []string{"file"}
	}
	h, err := parseHooks(a, file, text)
	if err != nil {
		return nil, nil, nil, err
	}
	s := a.Settings()
	group := func(ev HookEvent) Object {
		var g Object
		if ev.Matcher != "" {
			g = append(g, Member{"matcher", ev.Matcher})
		}
		return append(g, Member{"hooks", []any{s.Handler(command)}})
	}
	if h.hooks == nil {
		var events Object
		for _, ev := range s.Events {
			changes = append(changes, HookChange{What: "added", SettingsHook: SettingsHook{Event: ev.Name, Matcher: ev.Matcher, Command: command}})
			events = append(events, Member{ev.Name, []any{group(ev)}})
		}
		h.appendMembers(h.root, Member{"hooks", events})
		return h.text(), changes, append(created, "hooks"), nil
	}
	var missing []Member // the lists of the events hooks lacks, added together
	for _, ev := range s.Events {
		if h.member(h.hooks, ev.Name) == nil {
			missing = append(missing, Member{ev.Name, []any{group(ev)}})
			created = append(created, "hooks."+ev.Name)
		}
	}
	for _, ev := range s.Events {
		change := HookChange{What: "added", SettingsHook: SettingsHook{Event: ev.Name, Matcher: ev.Matcher, Command: command}}
		mine := h.entriesOf(ev.Name)
		switch list := h.member(h.hooks, ev.Name); {
		case list == nil:
			// The events hooks lacks come after its members, in one go.
		case len(mine) == 0:
			h.appendElements(list.Value.Value.(*hujson.Array), group(ev))
		default:
			change.What, change.Matcher = "unchanged", mine[0].hook.Matcher
			for _, e := range mine {
				if e.hook.Command != command {
					change.What, change.Was = "updated", e.hook.Command
					e.command.Value = hujson.Literal(JSONString(command))
				}
			}
		}
		changes = append(changes, change)
	}
	if missing != nil {
		h.appendMembers(h.hooks, missing...)
	}
	return h.text(), changes, created, nil
}

// UninstallHooks returns the settings text of agent a without strata's
// handlers — each with its group when the group holds nothing else — and
// without the event lists and hooks object that created names (install's
// record) once they are empty. empty reports that the document is then
// an empty object. Each removal takes out exactly the text install's
// insertion added: the item and what separates it from the one before.
func UninstallHooks(a Agent, file string, text []byte, created []string) (out []byte, removed []HookChange, empty bool, err error) {
	h, err := parseHooks(a, file, text)
	if err != nil {
		return nil, nil, false, err
	}
	// The last first: each removal is the inverse of the append that made
	// it while what came after it is gone too.
	for len(h.strata) > 0 {
		e := h.strata[len(h.strata)-1]
		removed = append(removed, HookChange{What: "removed", SettingsHook: e.hook})
		if e.lone {
			h.removeItem(e.list, e.group)
		} else {
			h.removeItem(e.handlers, e.handler)
		}
		h.scan()
	}
	slices.Reverse(removed)
	// Then the containers install made, innermost first, each the last of
	// its object when install added it.
	events := a.Settings().Events
	made := func(name string) bool { return slices.Contains(created, name) || slices.Contains(created, "hooks") }
	if h.hooks != nil {
		for i := len(events) - 1; i >= 0; i-- {
			name := events[i].Name
			if list, ok := asList(h.member(h.hooks, name)); !made("hooks."+name) || !ok || len(list.Elements) > 0 {
				continue
			}
			h.removeItem(h.hooks, slices.IndexFunc(h.hooks.Members, func(x hujson.ObjectMember) bool { return memberName(x) == name }))
		}
		if slices.Contains(created, "hooks") && len(h.hooks.Members) == 0 {
			h.removeItem(h.root, slices.IndexFunc(h.root.Members, func(x hujson.ObjectMember) bool { return memberName(x) == "hooks" }))
		}
	}
	return h.text(), removed, len(h.root.Members) == 0, nil
}

// hooksText is a settings text parsed: its syntax tree, its root object,
// its hooks object (nil without one), and strata's handlers in it, in
// text order.
type hooksText struct {
	agent  Agent
	layout jsonLayout
	tree   hujson.Value
	root   *hujson.Object
	hooks  *hujson.Object
	strata []strataHookEntry
}

// strataHookEntry is one of strata's hook handlers in a settings text.
type strataHookEntry struct {
	hook     SettingsHook
	list     *hujson.Array // the event's list of groups
	group    int           // its group's index in list
	handlers *hujson.Array // the group's list of handlers
	handler  int           // its index in handlers
	lone     bool          // its group holds it alone, with a matcher at most
	command  *hujson.Value
}

// parseHooks parses a settings text of agent a. A text that is not JSON
// as the agent reads it, or whose root, hooks or the lists of strata's
// events are of another kind than the agent reads, or that names one of
// them twice, or whose root has a member the agent does not allow
// (Settings.Members), is an error at its line and column.
func parseHooks(a Agent, file string, text []byte) (*hooksText, error) {
	s := a.Settings()
	if !s.Comments {
		// JSON as RFC 8259 and JavaScript's JSON.parse read it: what
		// encoding/json says of a text that is not, at the byte it says.
		var v any
		if err := json.Unmarshal(text, &v); err != nil {
			var se *json.SyntaxError
			off := 0
			if errors.As(err, &se) {
				off = int(se.Offset)
				if off > 0 && off <= len(text) && !strings.Contains(se.Error(), "unexpected end") {
					off-- // the offset is past the byte that broke it
				}
			}
			return nil, errors.WithHintf(syntaxErrorAt(file, text, off, "%s", err.Error()),
				"%s reads its settings as JSON, without comments or trailing commas; fix the file, then run the command again", a.Title())
		}
	}
	tree, err := hujson.Parse(text)
	if err != nil {
		var off int
		if line, col, ok := hujsonPosition(err); ok {
			off = offsetOf(text, line, col)
		}
		return nil, errors.WithHintf(syntaxErrorAt(file, text, off, "%s", strings.TrimPrefix(err.Error(), "hujson: ")),
			"%s reads its settings as JSON with comments; fix the file, then run the command again", a.Title())
	}
	h := &hooksText{agent: a, layout: layoutOf(text), tree: tree}
	var ok bool
	if h.root, ok = tree.Value.(*hujson.Object); !ok {
		return nil, syntaxErrorAt(file, text, tree.StartOffset, "the settings are %s, not an object", kindName(tree.Value))
	}
	if s.Members != nil {
		for _, m := range h.root.Members {
			if name := memberName(m); !slices.Contains(s.Members, name) {
				return nil, errors.WithHintf(syntaxErrorAt(file, text, m.Name.StartOffset,
					"top-level member %q: %s will not read this file: it refuses a file with a top-level member other than %s, and runs none of its hooks",
					name, a.Title(), strings.Join(s.Members, " and ")),
					"take %q out of the file: %s runs none of its hooks until then; then run the command again", name, a.Title())
			}
		}
	}
	m, err := onlyMember(file, text, h.root, "hooks")
	if err != nil || m == nil {
		return h, err
	}
	if h.hooks, ok = m.Value.Value.(*hujson.Object); !ok {
		return nil, syntaxErrorAt(file, text, m.Value.StartOffset, "\"hooks\" is %s, not an object of hook events", kindName(m.Value.Value))
	}
	for _, ev := range s.Events {
		if em, err := onlyMember(file, text, h.hooks, ev.Name); err != nil {
			return nil, err
		} else if _, list := asList(em); em != nil && !list {
			return nil, syntaxErrorAt(file, text, em.Value.StartOffset, "hooks.%s is %s, not a list of matchers and their hooks", ev.Name, kindName(em.Value.Value))
		}
	}
	h.scan()
	return h, nil
}

// asList returns a member's value as a list, and whether it is one (false
// for no member).
func asList(m *hujson.ObjectMember) (*hujson.Array, bool) {
	if m == nil {
		return nil, false
	}
	a, ok := m.Value.Value.(*hujson.Array)
	return a, ok
}

// memberName returns a member's key.
func memberName(m hujson.ObjectMember) string {
	if l, ok := m.Name.Value.(hujson.Literal); ok {
		return l.String()
	}
	return ""
}

// scan finds strata's handlers in the hooks object.
func (h *hooksText) scan() {
	h.strata = nil
	if h.hooks == nil {
		return
	}
	for _, em := range h.hooks.Members {
		list, ok := em.Value.Value.(*hujson.Array)
		if !ok {
			continue
		}
		for gi, g := range list.Elements {
			gobj, ok := g.Value.(*hujson.Object)
			if !ok {
				continue
			}
			handlers, ok := asList(h.member(gobj, "hooks"))
			if !ok {
				continue
			}
			matcher := ""
			if mm := h.member(gobj, "matcher"); mm != nil {
				if l, ok := mm.Value.Value.(hujson.Literal); ok && l.Kind() == '"' {
					matcher = l.String()
				}
			}
			for hi := range handlers.Elements {
				hobj, ok := handlers.Elements[hi].Value.(*hujson.Object)
				if !ok {
					continue
				}
				cm := h.member(hobj, "command")
				if cm == nil {
					continue
				}
				l, ok := cm.Value.Value.(hujson.Literal)
				if !ok || l.Kind() != '"' || !IsStrataHook(h.agent, l.String()) {
					continue
				}
				h.strata = append(h.strata, strataHookEntry{
					hook: SettingsHook{Event: memberName(em), Matcher: matcher, Command: l.String()},
					list: list, group: gi, handlers: handlers, handler: hi, command: &cm.Value,
					lone: len(handlers.Elements) == 1 && !slices.ContainsFunc(gobj.Members, func(m hujson.ObjectMember) bool {
						return memberName(m) != "hooks" && memberName(m) != "matcher"
					}),
				})
			}
		}
	}
}

// member returns obj's first member key, nil for none.
func (h *hooksText) member(obj *hujson.Object, key string) *hujson.ObjectMember {
	for i := range obj.Members {
		if memberName(obj.Members[i]) == key {
			return &obj.Members[i]
		}
	}
	return nil
}

// onlyMember returns obj's member key (nil without one); a key the object
// has twice is an error: JSON.parse keeps the last, and editing either
// would be a guess.
func onlyMember(file string, text []byte, obj *hujson.Object, key string) (*hujson.ObjectMember, error) {
	var found *hujson.ObjectMember
	for i := range obj.Members {
		if memberName(obj.Members[i]) != key {
			continue
		}
		if found != nil {
			first := syntaxErrorAt(file, text, found.Name.StartOffset, "")
			return nil, syntaxErrorAt(file, text, obj.Members[i].Name.StartOffset, "%q appears twice in one object (first at %d:%d)", key, first.Line, first.Col)
		}
		found = &obj.Members[i]
	}
	return found, nil
}

// entriesOf returns strata's handlers under event.
func (h *hooksText) entriesOf(event string) []strataHookEntry {
	var out []strataHookEntry
	for _, e := range h.strata {
		if e.hook.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// text returns the text of the tree.
func (h *hooksText) text() []byte { return h.tree.Pack() }

// lineIndent returns the indentation of the line that holds the opening
// of c, a value of the tree, in the tree's text.
func (h *hooksText) lineIndent(c hujson.ValueTrimmed) string {
	h.tree.UpdateOffsets()
	text := h.text()
	for v := range h.tree.All() {
		if v.Value == c {
			line := text[bytes.LastIndexByte(text[:v.StartOffset], '\n')+1:]
			return string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
		}
	}
	return ""
}

// items returns the values of an object's members or an array's elements
// that stand first in their item (a member's key), and those that stand
// last (its value), in order.
func items(c hujson.ValueTrimmed) (first, last []*hujson.Value) {
	switch c := c.(type) {
	case *hujson.Object:
		for i := range c.Members {
			first, last = append(first, &c.Members[i].Name), append(last, &c.Members[i].Value)
		}
	case *hujson.Array:
		for i := range c.Elements {
			first, last = append(first, &c.Elements[i]), append(last, &c.Elements[i])
		}
	}
	return first, last
}

// closing returns the extra before the closing brace or bracket of c.
func closing(c hujson.ValueTrimmed) *hujson.Extra {
	if o, ok := c.(*hujson.Object); ok {
		return &o.AfterExtra
	}
	return &c.(*hujson.Array).AfterExtra
}

// appendMembers adds ms as the last members of obj (appendItems).
func (h *hooksText) appendMembers(obj *hujson.Object, ms ...Member) {
	h.appendItems(obj, len(ms), func(i int, sep, indent string, flat bool) {
		v := h.render(ms[i].Value, indent, flat)
		v.BeforeExtra = hujson.Extra(strings.TrimPrefix(colon(flat), ":"))
		obj.Members = append(obj.Members, hujson.ObjectMember{
			Name:  hujson.Value{BeforeExtra: hujson.Extra(sep), Value: hujson.Literal(JSONString(ms[i].Key))},
			Value: v,
		})
	})
}

// appendElements adds vs as the last elements of arr (appendItems).
func (h *hooksText) appendElements(arr *hujson.Array, vs ...any) {
	h.appendItems(arr, len(vs), func(i int, sep, indent string, flat bool) {
		v := h.render(vs[i], indent, flat)
		v.BeforeExtra = hujson.Extra(sep)
		arr.Elements = append(arr.Elements, v)
	})
}

// appendItems adds n items to the object or array c, each by add, given
// the whitespace before it and the indentation and flatness its value is
// rendered with. After the last item of c each new one comes after a
// comma and the whitespace that stands before that last item, so that
// the new items are laid out as their neighbour is; in an empty c, each
// on a line of its own one step in from c's, or nothing around them in a
// text of one line. removeItem takes exactly the text of each out again.
func (h *hooksText) appendItems(c hujson.ValueTrimmed, n int, add func(i int, sep, indent string, flat bool)) {
	h.layout = layoutOf(h.text())
	first, last := items(c)
	if len(first) == 0 {
		if h.layout.flat {
			for i := range n {
				add(i, "", "", true)
			}
			return
		}
		ind := h.lineIndent(c)
		for i := range n {
			add(i, h.layout.nl+ind+h.layout.unit, ind+h.layout.unit, false)
		}
		end := closing(c)
		*end = append(hujson.Extra(h.layout.nl+ind), *end...)
		return
	}
	sep := string(first[len(first)-1].BeforeExtra)
	flat := !strings.Contains(sep, "\n")
	indent := sep[strings.LastIndexByte(sep, '\n')+1:]
	prev := last[len(last)-1]
	after := prev.AfterExtra // a trailing comma's (JSONC), kept after the new last item
	prev.AfterExtra = hujson.Extra{}
	for i := range n {
		add(i, sep, indent, flat)
	}
	_, last = items(c)
	last[len(last)-1].AfterExtra = after
}

// removeItem takes item i of the object or array c out with what
// separates it from its neighbours: the inverse of appendItems for an
// item it added, whatever came after it since.
func (h *hooksText) removeItem(c hujson.ValueTrimmed, i int) {
	h.layout = layoutOf(h.text())
	first, last := items(c)
	switch {
	case len(first) == 1:
		end := closing(c)
		tail := hujson.Extra(h.layout.nl + h.lineIndent(c))
		*end = append(append(hujson.Extra{}, last[0].AfterExtra...), *end...)
		if !h.layout.flat && bytes.HasPrefix(*end, tail) {
			*end = (*end)[len(tail):]
		}
	case i > 0:
		last[i-1].AfterExtra = last[i].AfterExtra
	default:
		first[1].BeforeExtra = first[0].BeforeExtra
	}
	switch c := c.(type) {
	case *hujson.Object:
		c.Members = slices.Delete(c.Members, i, i+1)
	case *hujson.Array:
		c.Elements = slices.Delete(c.Elements, i, i+1)
	}
}

// render returns v as a value of the tree: as renderJSON writes it,
// parsed.
func (h *hooksText) render(v any, indent string, flat bool) hujson.Value {
	tree, err := hujson.Parse([]byte(renderJSON(v, indent, h.layout, flat)))
	if err != nil {
		panic(errors.AssertionFailedf("companion: rendering %v: %v", v, err))
	}
	return tree
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

// renderJSON renders v (a string, an int, an Object or a []any of them):
// on lines indented by indent plus a unit per level (the first line is
// not indented: it follows what comes before it), or on one line when
// flat.
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
		case Object:
			open('{', '}', len(v), indent, func(i int, indent string) {
				b.WriteString(JSONString(v[i].Key) + colon(flat))
				write(v[i].Value, indent)
			})
		case []any:
			open('[', ']', len(v), indent, func(i int, indent string) { write(v[i], indent) })
		case string:
			b.WriteString(JSONString(v))
		case int:
			b.WriteString(strconv.Itoa(v))
		case bool:
			b.WriteString(strconv.FormatBool(v))
		default:
			panic(errors.AssertionFailedf("renderJSON: %T", v))
		}
	}
	write(v, indent)
	return b.String()
}

// colon returns what stands between a member's key and its value: a
// space after the colon, unless on one line.
func colon(flat bool) string {
	if flat {
		return ":"
	}
	return ": "
}

// kindName names a value's kind as an error says it.
func kindName(v hujson.ValueTrimmed) string {
	switch v.Kind() {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// hujsonPosition reads the line and column a hujson error names.
func hujsonPosition(err error) (line, col int, ok bool) {
	_, err2 := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &line, &col)
	return line, col, err2 == nil
}

// offsetOf returns the byte offset of line and column (each from 1, the
// column in bytes, as hujson counts it) in text.
func offsetOf(text []byte, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(text[off:], '\n')
		if i < 0 {
			return len(text)
		}
		off += i + 1
	}
	return min(off+col-1, len(text))
}
