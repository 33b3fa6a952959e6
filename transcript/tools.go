package transcript

import (
	"bytes"
	"encoding/json"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/strata-go/strata/tier"
)

// The texts an agent harness puts in a tool result when the user refused
// the tool use (Claude Code's, which Anthropic-format logs of it carry too).
var rejectionPrefixes = []string{
	"The user doesn't want to proceed with this tool use",
	"The user doesn't want to take this action right now",
	"[Request interrupted by user for tool use]",
}

// rejection reports whether a tool result's text says the user refused the
// tool use, and the reason: what the user said, when the text carries it.
func rejection(text string) (reason string, ok bool) {
	t := strings.TrimSpace(text)
	for _, p := range rejectionPrefixes {
		if strings.HasPrefix(t, p) {
			ok = true
			break
		}
	}
	if !ok {
		return "", false
	}
	const said = "the user said:"
	if i := strings.Index(strings.ToLower(t), said); i >= 0 {
		if r := strings.TrimSpace(t[i+len(said):]); r != "" {
			return "the user rejected the tool use: " + r, true
		}
	}
	return "the user rejected the tool use", true
}

// toolKind classifies a tool by its name.
type toolKind int

const (
	toolOther  toolKind = iota
	toolWrite           // writes or edits the file its arguments name
	toolEditor          // str_replace_editor: writes for create, str_replace, insert
	toolPatch           // apply_patch: writes the files its patch names
)

// writeTools are the tools whose successful call writes a file, by their
// normalized name (lower case, namespace and MCP server cut off).
var writeTools = map[string]toolKind{
	"write": toolWrite, "edit": toolWrite, "multiedit": toolWrite, "multi_edit": toolWrite,
	"notebookedit": toolWrite, "notebook_edit": toolWrite,
	"write_file": toolWrite, "edit_file": toolWrite, "create_file": toolWrite, "writefile": toolWrite,
	"editfile": toolWrite, "file_write": toolWrite, "file_edit": toolWrite, "write_to_file": toolWrite,
	"replace_in_file": toolWrite, "edit_notebook": toolWrite,
	"str_replace_editor": toolEditor, "str_replace_based_edit_tool": toolEditor, "text_editor": toolEditor,
	"apply_patch": toolPatch, "applypatch": toolPatch, "patch": toolPatch,
}

// normalizeTool returns a tool's name without namespace ("functions.",
// "mcp__server__") in lower case.
func normalizeTool(name string) string {
	n := strings.ToLower(name)
	if i := strings.LastIndex(n, "__"); i >= 0 {
		n = n[i+2:]
	}
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	return n
}

// The argument fields that name the file a tool works on.
var pathFields = []string{"file_path", "path", "notebook_path", "filename", "file", "target_file", "filepath"}

// args decodes a call's arguments into an object. OpenAI arguments are a
// JSON string holding the object; Anthropic input is the object itself.
func args(input []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) == nil {
		return m
	}
	var s string
	if json.Unmarshal(input, &s) == nil && json.Unmarshal([]byte(s), &m) == nil {
		return m
	}
	return nil
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// writtenPaths returns the files a successful call of tool name with input
// wrote, in the order the input names them.
func writtenPaths(name string, input []byte) []string {
	kind := writeTools[normalizeTool(name)]
	if kind == toolOther {
		return nil
	}
	m := args(input)
	switch kind {
	case toolEditor:
		switch str(m["command"]) {
		case "create", "str_replace", "insert":
		default:
			return nil
		}
	case toolPatch:
		var out []string
		for _, s := range allStrings(m, input) {
			out = append(out, tier.PatchPaths(s)...)
		}
		return out
	}
	for _, f := range pathFields {
		if p := str(m[f]); p != "" {
			return []string{p}
		}
	}
	return nil
}

// allStrings returns every string in the arguments (apply_patch takes its
// patch as "input", "patch", a command list or the raw input).
func allStrings(m map[string]json.RawMessage, input []byte) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		}
	}
	if m == nil {
		var v any
		if json.Unmarshal(input, &v) == nil {
			walk(v)
		} else {
			out = append(out, string(input)) // a custom tool's raw text
		}
		return out
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var v any
		if json.Unmarshal(m[k], &v) == nil {
			walk(v)
		}
	}
	return out
}

// shortArgs returns a call's arguments in a few words, for the key of a
// rejected event: the file for a file tool, the command for a shell, else
// the arguments themselves, cut to about 80 bytes on one line.
func shortArgs(name string, input []byte, cwd string) string {
	m := args(input)
	s := ""
	if ps := writtenPaths(name, input); len(ps) > 0 {
		s = relPath(ps[0], cwd)
	}
	for _, f := range append(pathFields, "command", "cmd", "pattern", "query", "url", "description", "prompt") {
		if s != "" {
			break
		}
		if v := str(m[f]); v != "" {
			s = v
			if f == "file_path" || f == "path" || f == "notebook_path" {
				s = relPath(v, cwd)
			}
		}
	}
	if s == "" {
		var buf bytes.Buffer
		if json.Compact(&buf, input) == nil {
			s = buf.String()
		} else {
			s = string(input)
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = tier.TruncateUTF8(s, 80) + "…"
	}
	return s
}

// relPath returns p relative to dir when p lies under it, else p.
func relPath(p, dir string) string {
	if dir == "" || !path.IsAbs(p) {
		return p
	}
	dir = strings.TrimSuffix(dir, "/")
	if rest, ok := strings.CutPrefix(p, dir+"/"); ok && rest != "" {
		return path.Clean(rest)
	}
	return p
}
