package fakemodel_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/fakemodel"
)

// events posts body to path and returns the data of each server-sent
// event, by event name, in order.
func events(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatal(err)
			}
			if m["type"] != event {
				t.Errorf("event %q carries type %v", event, m["type"])
			}
			out = append(out, m)
		}
	}
	return out
}

func types(evs []map[string]any) string {
	var s []string
	for _, e := range evs {
		s = append(s, e["type"].(string))
	}
	return strings.Join(s, " ")
}

func TestServer_AnthropicStream(t *testing.T) {
	srv := fakemodel.Start(t, func(r *fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "hi"}, {Tool: "Bash", ID: "toolu_1", Input: map[string]any{"command": "ls"}}}}
	})
	evs := events(t, srv.URL+"/v1/messages", `{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"a"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"out"}]}]}`)
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := types(evs); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if d := evs[5]["delta"].(map[string]any); d["partial_json"] != `{"command":"ls"}` {
		t.Errorf("tool input %v", d)
	}
	if d := evs[7]["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Errorf("stop %v", d)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !reqs[0].Tools || !reqs[0].Stream || !strings.Contains(reqs[0].Last, "out") || strings.Contains(reqs[0].Last, "go") {
		t.Errorf("request %+v: want tools, stream, and the text since the assistant's message", reqs[0])
	}
}

func TestServer_ResponsesStream(t *testing.T) {
	srv := fakemodel.Start(t, func(r *fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Tool: "apply_patch", Custom: "*** Begin Patch"}, {Tool: "exec_command", Input: map[string]any{"cmd": "ls"}}}, InputTokens: 400000}
	})
	evs := events(t, srv.URL+"/v1/responses", `{"stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`)
	want := "response.created response.output_item.added response.output_item.done response.output_item.added response.output_item.done response.completed"
	if got := types(evs); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if it := evs[2]["item"].(map[string]any); it["type"] != "custom_tool_call" || it["input"] != "*** Begin Patch" {
		t.Errorf("item %v", it)
	}
	if it := evs[4]["item"].(map[string]any); it["type"] != "function_call" || it["arguments"] != `{"cmd":"ls"}` {
		t.Errorf("item %v", it)
	}
	u := evs[5]["response"].(map[string]any)["usage"].(map[string]any)
	if u["input_tokens"] != float64(400000) {
		t.Errorf("usage %v", u)
	}
	if r := srv.Requests()[0]; !strings.Contains(r.LastUser, "\ngo\n") {
		t.Errorf("LastUser %q", r.LastUser)
	}
}
