package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
)

// openaiMessage is a Chat Completions message or a Responses API item.
type openaiMessage struct {
	Role         string            `json:"role"`
	Content      json.RawMessage   `json:"content"`
	Name         string            `json:"name"`
	ToolCalls    []json.RawMessage `json:"tool_calls"`
	ToolCallID   string            `json:"tool_call_id"`
	FunctionCall json.RawMessage   `json:"function_call"`
	IsError      bool              `json:"is_error"` // not OpenAI's: some frameworks log it on tool messages
	From         string            `json:"from"`     // ShareGPT's role
	Value        json.RawMessage   `json:"value"`    // ShareGPT's content

	// Responses API items.
	Type        string          `json:"type"`
	ID          json.RawMessage `json:"id"`
	CallID      string          `json:"call_id"`
	Arguments   json.RawMessage `json:"arguments"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	ServerLabel json.RawMessage `json:"server_label"` // mcp_call
	Error       json.RawMessage `json:"error"`        // mcp_call: the tool's error, null when none
	Status      json.RawMessage `json:"status"`

	Timestamp json.RawMessage `json:"timestamp"`
	CreatedAt json.RawMessage `json:"created_at"`
	Created   json.RawMessage `json:"created"`
}

// openaiToolCall is an entry of an assistant message's tool_calls.
type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// openaiReader maps OpenAI chat records: messages and Responses API items
// (conversation.go finds them).
type openaiReader struct{ d *Decoder }

// text reads a content field: a string, null, or a list of parts whose
// text parts are joined by newlines (images and files are skipped and
// counted).
func (r *openaiReader) text(raw json.RawMessage) string {
	b := r.d.b
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		b.rep.Malformed++
		return ""
	}
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			out = append(out, p.Text)
		case "refusal":
			out = append(out, "refusal: "+p.Refusal)
		case "image_url", "input_image", "input_audio", "input_file", "file", "image":
			b.rep.skip(&b.rep.Skipped, p.Type)
		default:
			b.rep.skip(&b.rep.Unknown, "part/"+p.Type)
		}
	}
	return strings.Join(out, "\n")
}

// argText returns a call's arguments as text: OpenAI sends them as a
// string of JSON; an object (some logs decode it) is kept as compact JSON.
func argText(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	return compactJSON(raw)
}

// message maps one message or item. A ShareGPT message ("from" and
// "value") is read as the chat message it stands for.
func (r *openaiReader) message(raw []byte) {
	b := r.d.b
	var m openaiMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		b.rep.Malformed++
		return
	}
	if m.Role == "" && m.From != "" {
		m.Role = shareGPTRole(m.From)
		if len(m.Content) == 0 {
			m.Content = m.Value
		}
	}
	t := b.parseTime(m.Timestamp)
	for _, alt := range []json.RawMessage{m.CreatedAt, m.Created} {
		if t == 0 {
			t = b.parseTime(alt)
		}
	}
	if m.Role == "" {
		r.item(&m, t)
		return
	}
	switch m.Role {
	case "tool":
		r.d.recognized++
		b.result(m.ToolCallID, r.text(m.Content), resultInfo{failed: m.IsError}, t)
	case "function": // the legacy function-calling API: no ids, results by name
		r.d.recognized++
		b.result("fn-"+m.Name, r.text(m.Content), resultInfo{failed: m.IsError}, t)
	default:
		kind, ok := roleKind(m.Role)
		if !ok {
			b.rep.skip(&b.rep.Unknown, "role/"+m.Role)
			return
		}
		r.d.recognized++
		textMessage(b, kind, r.text(m.Content), t)
		for _, rc := range m.ToolCalls {
			var tc openaiToolCall
			if json.Unmarshal(rc, &tc) != nil {
				b.rep.Malformed++
				continue
			}
			if tc.Type != "" && tc.Type != "function" {
				b.rep.skip(&b.rep.Unknown, "tool_call/"+tc.Type)
				continue
			}
			b.call(tc.ID, tc.Function.Name, argText(tc.Function.Arguments), t)
		}
		if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
			var fc struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if json.Unmarshal(m.FunctionCall, &fc) != nil {
				b.rep.Malformed++
				return
			}
			b.call("fn-"+fc.Name, fc.Name, argText(fc.Arguments), t)
		}
	}
}

// item maps a Responses API item without a role.
func (r *openaiReader) item(m *openaiMessage, t int64) {
	b := r.d.b
	switch m.Type {
	case "function_call", "custom_tool_call", "function_call_output", "custom_tool_call_output", "mcp_call", "reasoning":
		r.d.recognized++
	}
	switch m.Type {
	case "function_call":
		b.call(m.CallID, m.Name, argText(m.Arguments), t)
	case "custom_tool_call":
		b.call(m.CallID, m.Name, argText(m.Input), t)
	case "function_call_output", "custom_tool_call_output":
		b.result(m.CallID, r.text(m.Output), resultInfo{failed: m.IsError}, t)
	case "mcp_call": // a call to a tool on an MCP server and its result, in one item
		id, name := str(m.ID), m.Name
		if label := str(m.ServerLabel); label != "" {
			name = "mcp__" + label + "__" + name // as Claude Code names MCP tools
		}
		id = b.call(id, name, argText(m.Arguments), t)
		failed := m.IsError || str(m.Status) == "failed"
		text := r.text(m.Output)
		if e := bytes.TrimSpace(m.Error); len(e) > 0 && string(e) != "null" && string(e) != `""` {
			failed = true
			msg := str(e) // a string, or an object ({"message": …}) kept as JSON
			if msg == "" {
				msg = string(compactJSON(e))
			}
			text = strings.TrimSpace(text + "\n" + msg)
		}
		b.result(id, text, resultInfo{failed: failed}, t)
	case "reasoning":
		b.rep.skip(&b.rep.Skipped, m.Type)
	case "":
		b.rep.skip(&b.rep.Unknown, "(no role or type)")
	default:
		b.rep.skip(&b.rep.Unknown, "item/"+m.Type)
	}
}
