// Package fakemodel serves scripted stand-ins for model APIs on 127.0.0.1 —
// Anthropic's Messages API, OpenAI's Responses API and the Gemini API,
// streaming SSE — so that the real coding-agent clients (Claude Code,
// Codex, Gemini CLI) can be run offline in tests. A Script answers each request; the server keeps every
// request it was sent, so that a test can read what the client sent the
// model (strata's injected context among it).
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Request is one request a client sent: its path and its JSON body.
type Request struct {
	Path string
	Body []byte
	// Text is every string in the body joined by newlines: the messages,
	// the system prompt, the tools' descriptions.
	Text string
	// Last is the text the client sent since the model last spoke: the
	// messages (Anthropic), input items (Responses) or contents (Gemini)
	// after the last of the assistant's (the model's) — the user's
	// prompt, the tools' results, the client's reminders.
	Last string
	// LastUser is the text of the last message (input item, content) of
	// role user: where a client puts its request for a compaction's
	// summary.
	LastUser string
	// Stream says the client asked for server-sent events.
	Stream bool
	// Tools says the request offers the model tools: a turn of the
	// agent's loop, not a side request (a title, a quota check).
	Tools bool
}

// Block is one part of a scripted answer: text, or a tool call.
type Block struct {
	Text string
	// Tool, when set, makes the block a call of that tool with Input (a
	// JSON object; for an OpenAI custom tool such as apply_patch, the raw
	// text in Custom).
	Tool   string
	Input  map[string]any
	Custom string
	// ID is the call's id (the client sends it back with the result);
	// empty means one made from the request's number.
	ID string
}

func (b Block) id(def string) string {
	if b.ID != "" {
		return b.ID
	}
	return def
}

// Reply is a scripted answer.
type Reply struct {
	Blocks []Block
	// InputTokens is the usage the answer reports: a large figure makes a
	// client compact (Codex's model_auto_compact_token_limit).
	InputTokens int
}

// Script answers a request; it is called with the requests in the order
// they come, one at a time.
type Script func(r *Request) Reply

// Server is a scripted model API on 127.0.0.1.
type Server struct {
	URL string // http://127.0.0.1:PORT

	srv    *http.Server
	script Script
	mu     sync.Mutex
	reqs   []*Request
	calls  int
}

// Start serves script on a free port of 127.0.0.1 until the test ends.
// The three APIs are served: POST /v1/messages (Anthropic), POST
// /v1/responses (OpenAI), and the Gemini API's POST
// /v1beta/models/MODEL:generateContent, :streamGenerateContent (SSE) and
// :countTokens; every other path answers 404 and is recorded.
func Start(t testing.TB, script Script) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), script: script}
	s.srv = &http.Server{Handler: s}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Requests returns the requests served so far, in order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	body, _ := io.ReadAll(hr.Body)
	r := &Request{Path: hr.URL.Path, Body: body}
	var v any
	if json.Unmarshal(body, &v) == nil {
		r.Text = allText(v)
		if m, ok := v.(map[string]any); ok {
			r.Stream, _ = m["stream"].(bool)
			tools, _ := m["tools"].([]any)
			r.Tools = len(tools) > 0
			for _, k := range []string{"messages", "input", "contents"} {
				if l, ok := m[k].([]any); ok && len(l) > 0 {
					r.Last = sinceAssistant(l)
					for i := len(l) - 1; i >= 0; i-- {
						if m, _ := l[i].(map[string]any); m["role"] == "user" {
							r.LastUser = allText(m)
							break
						}
					}
				}
			}
		}
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	post := hr.Method == http.MethodPost
	switch {
	case post && strings.HasSuffix(r.Path, "/messages"):
		reply, n := s.answer(r)
		anthropic(w, r, reply, n)
	case post && strings.HasSuffix(r.Path, "/responses"):
		reply, n := s.answer(r)
		responses(w, reply, n)
	case post && strings.HasSuffix(r.Path, ":countTokens"):
		countTokens(w, r)
	case post && (strings.HasSuffix(r.Path, ":generateContent") || strings.HasSuffix(r.Path, ":streamGenerateContent")):
		r.Stream = strings.HasSuffix(r.Path, ":streamGenerateContent")
		reply, n := s.answer(r)
		gemini(w, r, reply, n)
	default:
		http.NotFound(w, hr)
	}
}

// answer runs the script on r, one request at a time, and returns its
// reply and the request's number (from 1) among those answered.
func (s *Server) answer(r *Request) (Reply, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply := s.script(r)
	s.calls++
	return reply, s.calls
}

// sinceAssistant returns the text of the messages or items after the
// last the assistant produced.
func sinceAssistant(l []any) string {
	i := len(l)
	for i > 0 {
		m, _ := l[i-1].(map[string]any)
		if m["role"] == "assistant" || m["role"] == "model" || m["type"] == "function_call" || m["type"] == "custom_tool_call" {
			break
		}
		i--
	}
	var b strings.Builder
	for _, m := range l[i:] {
		b.WriteString(allText(m))
	}
	return b.String()
}

// allText returns the strings of a decoded JSON value, each on a line of
// its own, an object's members in the order of their names.
func allText(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
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
	walk(v)
	return b.String()
}

// sse writes one server-sent event.
func sse(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// anthropic answers a Messages API request, streamed when asked.
func anthropic(w http.ResponseWriter, r *Request, reply Reply, n int) {
	id := fmt.Sprintf("msg_fake%04d", n)
	var content []map[string]any
	stop := "end_turn"
	for i, b := range reply.Blocks {
		if b.Tool != "" {
			stop = "tool_use"
			content = append(content, map[string]any{"type": "tool_use", "id": b.id(fmt.Sprintf("toolu_fake%04d_%d", n, i)), "name": b.Tool, "input": b.Input})
		} else {
			content = append(content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	in := max(reply.InputTokens, 10)
	usage := map[string]any{"input_tokens": in, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !r.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": "claude-fake",
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": "claude-fake", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	for i, c := range content {
		if c["type"] == "tool_use" {
			input, _ := json.Marshal(c["input"])
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		} else {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// responses answers a Responses API request, streamed (Codex always
// streams).
func responses(w http.ResponseWriter, reply Reply, n int) {
	id := fmt.Sprintf("resp_fake%04d", n)
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "status": "in_progress", "output": []any{}}})
	var items []any
	for i, b := range reply.Blocks {
		var item map[string]any
		switch {
		case b.Tool != "" && b.Input == nil:
			item = map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_fake%04d_%d", n, i), "status": "completed",
				"call_id": b.id(fmt.Sprintf("call_fake%04d_%d", n, i)), "name": b.Tool, "input": b.Custom}
		case b.Tool != "":
			args, _ := json.Marshal(b.Input)
			item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%04d_%d", n, i), "status": "completed",
				"call_id": b.id(fmt.Sprintf("call_fake%04d_%d", n, i)), "name": b.Tool, "arguments": string(args)}
		default:
			item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%04d_%d", n, i), "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": b.Text, "annotations": []any{}}}}
		}
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		if b.Tool == "" {
			sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": i,
				"content_index": 0, "item_id": item["id"], "delta": b.Text})
		}
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
		items = append(items, item)
	}
	in := max(reply.InputTokens, 10)
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "status": "completed", "output": items,
		"usage": map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + 10}}})
}
