package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// gemini answers a Gemini API generateContent request, or with
// server-sent events a streamGenerateContent one (Gemini CLI asks for
// ?alt=sse): each event's data is a GenerateContentResponse, the text and
// the function calls of the answer in one candidate, the last event
// carrying the finish reason and the usage.
func gemini(w http.ResponseWriter, r *Request, reply Reply, n int) {
	var parts []map[string]any
	for i, b := range reply.Blocks {
		if b.Tool != "" {
			args := b.Input
			if args == nil {
				args = map[string]any{}
			}
			parts = append(parts, map[string]any{"functionCall": map[string]any{
				"id": b.id(fmt.Sprintf("call_fake%04d_%d", n, i)), "name": b.Tool, "args": args}})
		} else {
			parts = append(parts, map[string]any{"text": b.Text})
		}
	}
	in := max(reply.InputTokens, 10)
	usage := map[string]any{"promptTokenCount": in, "candidatesTokenCount": 10, "totalTokenCount": in + 10}
	response := func(parts []map[string]any, last bool) map[string]any {
		c := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": parts}}
		resp := map[string]any{"candidates": []any{c}, "modelVersion": "gemini-fake", "responseId": fmt.Sprintf("resp_fake%04d", n)}
		if last {
			c["finishReason"] = "STOP"
			resp["usageMetadata"] = usage
		}
		return resp
	}
	if !r.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(response(parts, true))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, p := range parts {
		data(w, response([]map[string]any{p}, i == len(parts)-1))
	}
	if len(parts) == 0 {
		data(w, response([]map[string]any{}, true))
	}
}

// countTokens answers a countTokens request: a token for every four bytes
// of the request's text.
func countTokens(w http.ResponseWriter, r *Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"totalTokens": max(len(r.Text)/4, 1)})
}

// data writes one server-sent event without an event name, as the Gemini
// API streams.
func data(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
