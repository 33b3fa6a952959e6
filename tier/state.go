package tier

import (
	"cmp"
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Request is one request of the user: the text of a user event, in the
// user's words (cut to MaxRequestBytes). The first request of a session is
// its task.
type Request struct {
	Seq  uint64 `msgpack:"q" json:"seq"`
	Text string `msgpack:"x,omitempty" json:"text,omitempty"`
}

// MaxRequestBytes bounds the text of a Request: a longer user message is
// cut, saying how many bytes are left out (ClipTo). The raw event keeps it
// whole.
const MaxRequestBytes = 800

// MaxRequests is how many requests a span's required state lists: its
// first and its newest MaxRequests−1. The others are counted
// (Required.RequestsLeftOut), so that a digest over a long session carries
// the task and the recent requests in bounded room.
const MaxRequests = 16

// PlanItem is an open item of the agent's plan, as the newest plan call
// (PlanOf) set it: its text, its status ("pending" or "in_progress"), its
// place in the call's list and the seq of that call.
type PlanItem struct {
	Key    string `msgpack:"y" json:"key"`
	Status string `msgpack:"s" json:"status"`
	Index  int    `msgpack:"i,omitempty" json:"index,omitempty"`
	Seq    uint64 `msgpack:"q,omitempty" json:"seq,omitempty"`
}

// Plan item statuses an open item has. An item completed (or, for Gemini
// CLI, cancelled) leaves the plan.
const (
	PlanPending    = "pending"
	PlanInProgress = "in_progress"
)

// planTools are the plan tools, by normalized name, and the list field and
// the item text field of their input:
//
//   - Claude Code's TodoWrite: {"todos":[{"content","status",…}]}
//   - Codex's update_plan: {"plan":[{"step","status"}]}
//   - Gemini CLI's write_todos: {"todos":[{"description","status"}]}
//
// Each call gives the whole list: it replaces the plan before it.
var planTools = map[string]struct{ list, text string }{
	"todowrite":   {"todos", "content"},
	"update_plan": {"plan", "step"},
	"write_todos": {"todos", "description"},
}

// PlanOf reads a plan call from e — a tool_call of a plan tool whose
// arguments (e.Text) are the JSON object the tool takes — and returns its
// open items in the call's order, and whether e is one. An item reads
// from its structured fields only; one with no text, or one whose text an
// earlier item of the list has, is not an item. A call whose arguments are
// not such an object is no plan call.
func PlanOf(e *Event) ([]PlanItem, bool) {
	if e.Kind != KindToolCall {
		return nil, false
	}
	tool, ok := planTools[normalizeTool(e.Name)]
	if !ok {
		return nil, false
	}
	m := argsObject(e.Text)
	if m == nil {
		return nil, false
	}
	var list []map[string]json.RawMessage
	if raw, ok := m[tool.list]; !ok || json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	var out []PlanItem
	seen := map[string]bool{}
	for i, it := range list {
		text := strings.TrimSpace(jsonString(it[tool.text]))
		status := jsonString(it["status"])
		if text == "" || seen[text] {
			continue
		}
		seen[text] = true
		if status != PlanPending && status != PlanInProgress {
			continue // completed, cancelled: not open
		}
		out = append(out, PlanItem{Key: TruncateUTF8(text, MaxRequestBytes), Status: status, Index: i, Seq: e.Seq})
	}
	return out, true
}

// CallTarget returns what a tool call works on, read from its structured
// arguments (e.Text, the JSON object the tool takes) — never from any
// output:
//
//   - a shell (Bash, shell, exec_command, run_shell_command, local_shell…):
//     its "command" or "cmd" (a string, or a list of words joined by
//     spaces), with runs of white space made one space;
//   - a file tool (Write, Edit, MultiEdit, NotebookEdit, write_file,
//     replace, edit_file…): its "file_path", "notebook_path", "path",
//     "absolute_path" or "filename";
//   - apply_patch: the files its patch adds, updates or moves to
//     (PatchPaths), joined by ", ".
//
// Any other tool, or arguments without the field, has no target: "".
func CallTarget(name, args string) string {
	n := normalizeTool(name)
	m := argsObject(args)
	switch {
	case patchTools[n]:
		var paths []string
		if m == nil {
			paths = PatchPaths(args) // Codex's custom tool gives the patch itself
		}
		for _, k := range []string{"input", "patch"} {
			paths = append(paths, PatchPaths(jsonString(m[k]))...)
		}
		if c := jsonWords(m["command"]); c != "" {
			paths = append(paths, PatchPaths(c)...)
		}
		return TruncateUTF8(strings.Join(paths, ", "), 400)
	case m == nil:
		return ""
	case shellTools[n]:
		for _, k := range []string{"command", "cmd"} {
			if c := strings.Join(strings.Fields(jsonWords(m[k])), " "); c != "" {
				return TruncateUTF8(c, 400)
			}
		}
	case fileTools[n]:
		for _, k := range []string{"file_path", "notebook_path", "path", "absolute_path", "filename"} {
			if p := jsonString(m[k]); p != "" {
				return TruncateUTF8(p, 400)
			}
		}
	}
	return ""
}

// The tools CallTarget reads, by normalized name.
var (
	shellTools = setOf("bash", "shell", "exec_command", "run_shell_command", "local_shell", "container.exec",
		"exec", "run_command", "execute_command", "terminal")
	fileTools = setOf("write", "edit", "multiedit", "multi_edit", "notebookedit", "notebook_edit", "write_file",
		"edit_file", "create_file", "replace", "str_replace_editor", "str_replace_based_edit_tool", "text_editor")
	patchTools = setOf("apply_patch", "applypatch")
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// SameTarget returns the key under which two calls work on the same
// target, from a call's tool name and CallTarget: a file's path for a
// file tool or a patch ("file " + path); for a shell command, its first
// words — after leading VAR=value assignments and a leading `cd DIR &&` —
// up to the first that begins with "-", at most two, or three when the
// second is "run" or "exec" ("cmd git push", "cmd go test", "cmd npm run
// build"). So `git push` and `git push --set-upstream origin main` are
// the same target, and `go test ./a` and `go test -run X ./b` too. "" when
// the call has no target.
func SameTarget(name, target string) string {
	if target == "" {
		return ""
	}
	n := normalizeTool(name)
	if !shellTools[n] {
		return "file " + target
	}
	words := strings.Fields(target)
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		words = words[1:]
	}
	if len(words) >= 3 && words[0] == "cd" && (words[2] == "&&" || words[2] == ";") {
		words = words[3:]
	} else if len(words) >= 2 && words[0] == "cd" && strings.HasSuffix(words[1], ";") {
		words = words[2:]
	}
	limit := 2
	if len(words) >= 2 && (words[1] == "run" || words[1] == "exec") {
		limit = 3
	}
	var key []string
	for _, w := range words {
		if len(key) == limit || strings.HasPrefix(w, "-") || w == "&&" || w == "|" || w == ";" || w == "||" {
			break
		}
		if len(key) == 0 {
			w = path.Base(w) // /usr/bin/git is git
		}
		key = append(key, w)
	}
	if len(key) == 0 {
		return "cmd " + target
	}
	return "cmd " + strings.Join(key, " ")
}

// PatchPaths returns the files a patch adds, updates or moves to: the
// "*** Add File:", "*** Update File:" and "*** Move to:" lines of the
// apply_patch format, or a unified diff's "+++" lines.
func PatchPaths(patch string) []string {
	var out []string
	for line := range strings.Lines(patch) {
		line = strings.TrimRight(line, "\r\n")
		for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Move to: "} {
			if rest, ok := strings.CutPrefix(line, p); ok {
				out = append(out, strings.TrimSpace(rest))
			}
		}
		if rest, ok := strings.CutPrefix(line, "+++ "); ok {
			rest = strings.TrimSpace(rest)
			if i := strings.IndexByte(rest, '\t'); i >= 0 {
				rest = rest[:i]
			}
			if rest != "/dev/null" && rest != "" {
				out = append(out, strings.TrimPrefix(rest, "b/"))
			}
		}
	}
	return out
}

// normalizeTool returns a tool's name without namespace ("functions.",
// "mcp__server__") in lower case.
func normalizeTool(name string) string {
	n := strings.ToLower(name)
	if i := strings.LastIndex(n, "__"); i >= 0 {
		n = n[i+2:]
	}
	if n != "container.exec" {
		if i := strings.LastIndexByte(n, '.'); i >= 0 {
			n = n[i+1:]
		}
	}
	return n
}

// argsObject decodes a call's arguments into an object: the object itself
// (Anthropic input), or a JSON string holding it (OpenAI arguments).
func argsObject(s string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) == nil {
		return m
	}
	var inner string
	if json.Unmarshal([]byte(s), &inner) == nil && json.Unmarshal([]byte(inner), &m) == nil {
		return m
	}
	return nil
}

func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonWords reads a string, or a list of strings joined by spaces (a
// command given as its words).
func jsonWords(raw json.RawMessage) string {
	if s := jsonString(raw); s != "" {
		return s
	}
	var words []string
	if json.Unmarshal(raw, &words) != nil {
		return ""
	}
	return strings.Join(words, " ")
}

// keepRequests returns the requests to list of rs (sorted by seq, no two
// of one seq): all of them up to MaxRequests, else the first and the
// newest MaxRequests−1; and how many it left out.
func keepRequests(rs []Request) ([]Request, int) {
	if len(rs) <= MaxRequests {
		return rs, 0
	}
	out := make([]Request, 0, MaxRequests)
	out = append(out, rs[0])
	out = append(out, rs[len(rs)-MaxRequests+1:]...)
	return out, len(rs) - MaxRequests
}

// FailureGroup is the failures of one target (SameTarget) as one fact:
// how many there were, the newest, and whether a success on the target
// after it fixed them.
type FailureGroup struct {
	// Key is the target's SameTarget key, or "call ID" for a failure whose
	// call names no target: it is its own group.
	Key    string
	Count  int
	Newest Resolution
	// Fixed is the seq of the success after the newest failure on the
	// target (its Fixed): 0 while the failure stands.
	Fixed uint64
}

// GroupFailures returns fs grouped by target, newest failure first (by
// the seq that resolved it, then by key).
func GroupFailures(fs []Resolution) []FailureGroup {
	idx := map[string]int{}
	var out []FailureGroup
	for _, f := range fs {
		k := SameTarget(f.Name, f.Target)
		if k == "" {
			k = "call " + f.ID + "@" + strconv.FormatUint(f.Seq, 10)
		}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, FailureGroup{Key: k, Count: 1, Newest: f, Fixed: f.Fixed})
			continue
		}
		g := &out[i]
		g.Count++
		if f.At > g.Newest.At {
			g.Newest, g.Fixed = f, f.Fixed
		}
	}
	slices.SortStableFunc(out, func(a, b FailureGroup) int {
		if c := cmp.Compare(b.Newest.At, a.Newest.At); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}
