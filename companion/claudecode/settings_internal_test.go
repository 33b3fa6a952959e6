package claudecode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// defaultHookCommand is the command install writes in a project's
// settings without --db.
const defaultHookCommand = `strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/.claude/strata.db`

// settingsCases are settings files as people keep them (testdata/settings),
// by name.
func settingsCases(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "settings", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no settings cases: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = string(b)
	}
	return out
}

// spans writes out a parsed value and every value in it, with where each
// stands, for comparing two parses.
func spans(n *jsonNode) string {
	var b strings.Builder
	var walk func(n *jsonNode, depth int)
	walk = func(n *jsonNode, depth int) {
		fmt.Fprintf(&b, "%*s%c %d..%d %q\n", 2*depth, "", n.kind, n.start, n.end, n.str)
		for _, m := range n.members {
			fmt.Fprintf(&b, "%*s%q @%d\n", 2*depth, "", m.key, m.start)
			walk(m.value, depth+1)
		}
		for _, e := range n.elems {
			walk(e, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// entries writes out strata's handlers found in a parse.
func entries(h *claudeHooksText) string {
	var b strings.Builder
	for _, e := range h.strata {
		fmt.Fprintf(&b, "%s %q list@%d group %d handlers@%d handler %d lone %v command %d..%d %q\n", e.event, e.matcher,
			e.list.start, e.group, e.handlers.start, e.handler, e.lone, e.command.start, e.command.end, e.command.str)
	}
	return b.String()
}

// settingsWithStrata are settings texts holding strata's handlers in every
// way uninstall meets them: a group of its own, beside another handler,
// two in one group, a group with another member, under events in any
// order, over CRLF and mixed line ends.
var settingsWithStrata = map[string]string{
	"groups of their own": `{"hooks":{"PreCompact":[{"hooks":[{"type":"command","command":"strata claude-code hook"}]}],"SessionStart":[{"matcher":"compact","hooks":[{"type":"command","command":"strata claude-code hook"}]}]}}`,
	"beside others":       "{\n  \"hooks\": {\n    \"SessionStart\": [\n      {\"matcher\": \"compact\", \"hooks\": [{\"command\": \"date\"}, {\"command\": \"strata claude-code hook --db a.db\"}]},\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}], \"note\": 1}\n    ],\n    \"PreCompact\": [\n      {\"hooks\": [{\"command\": \"/usr/local/bin/strata claude-code hook\"}, {\"command\": \"strata claude-code hook --db b.db\"}]}\n    ]\n  },\n  \"model\": \"opus\"\n}\n",
	"first of several":    "{\n  \"hooks\": {\n    \"PreCompact\": [\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}, {\"command\": \"date\"}]},\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}]},\n      {\"hooks\": [{\"command\": \"uptime\"}]}\n    ]\n  }\n}\n",
	"CRLF and LF":         "{\r\n  \"hooks\": {\n    \"PreCompact\": [\r\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}]}\n    ],\r\n    \"Stop\": [{\"hooks\": [{\"command\": \"strata claude-code hook\"}]}]\n  }\r\n}",
}

// TestClaudeHooksText_RemoveKeepsTheParse: the settings are parsed once;
// after every removal the values parsed are those a parse of the text
// would give, so that the next removal finds what it removes.
func TestClaudeHooksText_RemoveKeepsTheParse(t *testing.T) {
	texts := map[string]string{}
	for name, text := range settingsCases(t) {
		installed, _, _, err := InstallHooks("s.json", []byte(text), defaultHookCommand)
		if err != nil {
			t.Fatal(err)
		}
		texts[name+", installed"] = string(installed)
	}
	for name, text := range settingsWithStrata {
		texts[name] = text
	}
	for name, text := range texts {
		h, err := parseClaudeHooks("s.json", []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		same := func(after string) {
			t.Helper()
			fresh, err := parseClaudeHooks("s.json", h.text)
			if err != nil {
				t.Fatalf("%s, after %s: %v\n%s", name, after, err, h.text)
			}
			if spans(h.root) != spans(fresh.root) || entries(h) != entries(fresh) || h.layout != fresh.layout ||
				(h.hooks == nil) != (fresh.hooks == nil) {
				t.Fatalf("%s, after %s: the values kept are not those of a parse of\n%q", name, after, h.text)
			}
		}
		if len(h.strata) == 0 {
			t.Fatalf("%s: no handler of strata's", name)
		}
		for len(h.strata) > 0 {
			e := h.strata[len(h.strata)-1]
			if e.lone {
				h.remove(e.list, e.group)
			} else {
				h.remove(e.handlers, e.handler)
			}
			same("removing " + e.command.str)
		}
		for h.hooks != nil && len(h.hooks.value.members) > 0 {
			h.remove(h.hooks.value, 0)
			same("removing an event")
		}
		if h.hooks != nil {
			h.remove(h.root, slices.IndexFunc(h.root.members, func(m jsonMember) bool { return m.key == "hooks" }))
			same("removing hooks")
		}
	}
}

// TestClaudeHooksText_EditKeepsTheParse: an insertion or a replacement
// moves every value parsed to where a parse of the new text finds it; the
// value inserted is the one a parse finds more.
func TestClaudeHooksText_EditKeepsTheParse(t *testing.T) {
	for name, text := range settingsWithStrata {
		h, err := parseClaudeHooks("s.json", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		// A command replaced, longer and shorter.
		for _, command := range []string{"strata claude-code hook --db a/much/longer/path/to/the/store.db", "strata claude-code hook"} {
			e := h.strata[0]
			h.edit(jsonEdit{start: e.command.start, end: e.command.end, s: jsonString(command)})
			e.command.str = command // the string, which an edit does not parse
			fresh, err := parseClaudeHooks("s.json", h.text)
			if err != nil || spans(h.root) != spans(fresh.root) {
				t.Fatalf("%s: replacing a command: the values kept are not those of a parse of\n%q (%v)", name, h.text, err)
			}
		}
		// A group appended to each event's list, and an event to hooks.
		lists := []*jsonNode{}
		for _, m := range h.hooks.value.members {
			lists = append(lists, m.value)
		}
		slices.Reverse(lists) // from the last: each edit leaves the spans before it
		for _, list := range lists {
			n := len(list.elems)
			h.edit(appendItems(h.text, list, h.layout, func(indent string, flat bool) string {
				return renderJSON(hookGroup("", "echo"), indent, h.layout, flat)
			}))
			fresh, err := parseClaudeHooks("s.json", h.text)
			if err != nil {
				t.Fatal(err)
			}
			var got *jsonNode
			for _, m := range fresh.hooks.value.members {
				if m.value.start == list.start {
					got = m.value
				}
			}
			if got == nil || len(got.elems) != n+1 {
				t.Fatalf("%s: the list at %d after the insertion: %+v\n%q", name, list.start, got, h.text)
			}
			list.elems = append(list.elems, got.elems[n]) // what was inserted
			if spans(h.root) != spans(fresh.root) {
				t.Fatalf("%s: appending a group: the values kept are not those of a parse of\n%q", name, h.text)
			}
		}
	}
}
