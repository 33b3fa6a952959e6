package transcript

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/strata-go/strata/tier"
)

// block is an Anthropic content block, of any type this package reads.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicMessage is one message of the Messages API.
type anthropicMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Sender    string          `json:"sender"` // claude.ai's role
	Text      json.RawMessage `json:"text"`   // claude.ai's text, beside its content blocks
	Timestamp json.RawMessage `json:"timestamp"`
	CreatedAt json.RawMessage `json:"created_at"`
}

// anthropicReader maps Anthropic Messages records (conversation.go finds
// them), and the content of Claude Code's.
type anthropicReader struct{ d *Decoder }

// message maps one message; one of an unexpected shape is skipped and
// counted. A claude.ai export's message ("sender" and "text", or
// "content") is read as the message it stands for.
func (r *anthropicReader) message(raw []byte) {
	b := r.d.b
	var m anthropicMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		b.rep.Malformed++
		return
	}
	if m.Role == "" && m.Sender != "" {
		m.Role = shareGPTRole(m.Sender)
	}
	if len(m.Content) == 0 || string(m.Content) == "null" || string(m.Content) == "[]" {
		if len(m.Text) > 0 {
			m.Content = m.Text
		}
	}
	t := b.parseTime(m.Timestamp)
	if t == 0 {
		t = b.parseTime(m.CreatedAt)
	}
	kind, ok := roleKind(m.Role)
	if !ok {
		b.rep.skip(&b.rep.Unknown, "role/"+m.Role)
		return
	}
	r.d.recognized++
	r.content(kind, m.Content, t, resultInfo{})
}

// roleKind maps a message role to the kind of its text.
func roleKind(role string) (tier.Kind, bool) {
	switch role {
	case "user":
		return tier.KindUser, true
	case "assistant":
		return tier.KindAssistant, true
	case "system", "developer":
		return tier.KindSystem, true
	}
	return 0, false
}

// shareGPTRole maps the roles of ShareGPT's "from" and claude.ai's
// "sender" to the chat roles: human → user, gpt (and the other names
// datasets give the model) → assistant; others are kept, and counted
// unknown by roleKind.
func shareGPTRole(from string) string {
	switch strings.ToLower(from) {
	case "human", "user", "prompter":
		return "user"
	case "gpt", "assistant", "model", "chatgpt", "bard", "bing", "claude":
		return "assistant"
	case "system":
		return "system"
	}
	return from
}

// content maps a content field (a string or a list of blocks) in order:
// runs of text become one message of kind, tool_use blocks calls,
// tool_result blocks results. info applies to every result (Claude Code's
// toolUseResult).
func (r *anthropicReader) content(kind tier.Kind, raw json.RawMessage, t int64, info resultInfo) {
	b := r.d.b
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var s string
	if raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			b.rep.Malformed++
			return
		}
		textMessage(b, kind, s, t)
		return
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		b.rep.Malformed++
		return
	}
	var text []string
	flush := func() {
		if len(text) > 0 {
			textMessage(b, kind, strings.Join(text, "\n"), t)
			text = text[:0]
		}
	}
	for _, rb := range blocks {
		var bl block
		if json.Unmarshal(rb, &bl) != nil {
			b.rep.Malformed++
			continue
		}
		switch typ := bl.Type; {
		case typ == "text":
			text = append(text, bl.Text)
		case typ == "tool_use" || typ == "server_tool_use" || typ == "mcp_tool_use":
			flush()
			b.call(bl.ID, bl.Name, compactJSON(bl.Input), t)
		case typ == "tool_result" || typ == "mcp_tool_result" || strings.HasSuffix(typ, "_tool_result"):
			flush()
			ri := info
			ri.failed = ri.failed || bl.IsError || serverToolError(bl.Content)
			b.result(bl.ToolUseID, contentText(b, bl.Content), ri, t)
		case typ == "thinking" || typ == "redacted_thinking" || typ == "image" || typ == "document":
			b.rep.skip(&b.rep.Skipped, typ)
		default:
			b.rep.skip(&b.rep.Unknown, "block/"+typ)
		}
	}
	flush()
}

// serverToolError reports whether a server tool's result content is the
// error object the Messages API gives in place of a result
// ({"type": "web_search_tool_result_error", "error_code": …}).
func serverToolError(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var c struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &c) == nil && strings.HasSuffix(c.Type, "_tool_result_error")
}

// interruptNotices are the user messages Claude Code writes when the user
// interrupts the agent: the whole text of a user message, never a tool's
// result.
var interruptNotices = map[string]bool{
	"[Request interrupted by user]":              true,
	"[Request interrupted by user for tool use]": true,
}

// textMessage emits text as a message of kind; a user message that is an
// interrupt notice and nothing else (interruptNotices) is a system event,
// counted.
func textMessage(b *builder, kind tier.Kind, text string, t int64) {
	if kind == tier.KindUser && interruptNotices[strings.TrimSpace(text)] {
		b.rep.Interrupts++
		kind = tier.KindSystem
	}
	b.message(kind, text, t)
}

// contentText returns a tool result's content as text: a string as is,
// text blocks joined by newlines, other blocks as "[type]".
func contentText(b *builder, raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return string(compactJSON(raw)) // an object: keep it as JSON
	}
	var parts []string
	for _, rb := range blocks {
		var bl block
		if json.Unmarshal(rb, &bl) != nil {
			b.rep.Malformed++
			continue
		}
		switch bl.Type {
		case "text", "input_text", "output_text":
			parts = append(parts, bl.Text)
		default:
			parts = append(parts, "["+tier.TruncateUTF8(bl.Type, 40)+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// compactJSON returns raw without insignificant space ("" for none).
func compactJSON(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}
