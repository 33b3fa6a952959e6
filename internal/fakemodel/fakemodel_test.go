package fakemodel_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/fakemodel"
)

// stream posts body to url and returns the server-sent events it
// answers: each one's event name ("" for none) and its data.
func stream(t *testing.T, url, body string) (names []string, data []map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
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
			names, data = append(names, event), append(data, m)
			event = ""
		}
	}
	return names, data
}

// events posts body to url and returns the data of each server-sent
// event, checking that each names its type.
func events(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	names, data := stream(t, url, body)
	for i, m := range data {
		if m["type"] != names[i] {
			t.Errorf("event %q carries type %v", names[i], m["type"])
		}
	}
	return data
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
	if r := srv.Requests()[0]; !slices.Contains(strings.Split(r.LastUser, "\n"), "go") {
		t.Errorf("LastUser %q", r.LastUser)
	}
}

// geminiData posts body to url and returns the data of each server-sent
// event: the Gemini API's events carry no event name.
func geminiData(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	names, data := stream(t, url, body)
	for _, n := range names {
		if n != "" {
			t.Errorf("an event name: %q", n)
		}
	}
	return data
}

// parts returns the parts of a GenerateContentResponse's first candidate,
// and its finish reason.
func parts(t *testing.T, resp map[string]any) ([]any, any) {
	t.Helper()
	cands, _ := resp["candidates"].([]any)
	if len(cands) != 1 {
		t.Fatalf("candidates %v", resp["candidates"])
	}
	c := cands[0].(map[string]any)
	return c["content"].(map[string]any)["parts"].([]any), c["finishReason"]
}

func TestServer_GeminiStream(t *testing.T) {
	srv := fakemodel.Start(t, func(r *fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "hi"}, {Tool: "run_shell_command", ID: "run_shell_command__1", Input: map[string]any{"command": "ls"}}}, InputTokens: 900000}
	})
	body := `{"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}],"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"x"}}]},{"role":"user","parts":[{"functionResponse":{"name":"x","response":{"output":"out"}}}]}]}`
	evs := geminiData(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
	if len(evs) != 2 {
		t.Fatalf("%d events, want one a part: %v", len(evs), evs)
	}
	p0, fin0 := parts(t, evs[0])
	p1, fin1 := parts(t, evs[1])
	if len(p0) != 1 || p0[0].(map[string]any)["text"] != "hi" || fin0 != nil || evs[0]["usageMetadata"] != nil {
		t.Errorf("first event %v: want the text, no finish reason, no usage", evs[0])
	}
	call, _ := p1[0].(map[string]any)["functionCall"].(map[string]any)
	if call["name"] != "run_shell_command" || call["id"] != "run_shell_command__1" || call["args"].(map[string]any)["command"] != "ls" || fin1 != "STOP" {
		t.Errorf("last event %v: want the call and STOP", evs[1])
	}
	if u := evs[1]["usageMetadata"].(map[string]any); u["promptTokenCount"] != float64(900000) {
		t.Errorf("usage %v", u)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !reqs[0].Stream || !reqs[0].Tools || !strings.Contains(reqs[0].Last, "out") || strings.Contains(reqs[0].Last, "go") {
		t.Errorf("request %+v: want stream, tools, and the text since the model's content", reqs[0])
	}
}

func TestServer_GeminiGenerateAndCount(t *testing.T) {
	srv := fakemodel.Start(t, func(r *fakemodel.Request) fakemodel.Reply {
		if strings.Contains(r.LastUser, "<state_snapshot>") {
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "the summary"}}}
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "other"}}}
	})
	body := `{"contents":[{"role":"user","parts":[{"text":"task"}]},{"role":"model","parts":[{"text":"done"}]},{"role":"user","parts":[{"text":"Generate a new <state_snapshot> based on the provided history."}]}]}`
	resp, err := http.Post(srv.URL+"/v1beta/models/gemini-2.5-flash:generateContent", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, fin := parts(t, doc)
	if len(p) != 1 || p[0].(map[string]any)["text"] != "the summary" || fin != "STOP" || doc["usageMetadata"] == nil {
		t.Errorf("response %v: want the summary, STOP and the usage", doc)
	}
	resp, err = http.Post(srv.URL+"/v1beta/models/gemini-2.5-flash:countTokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var count struct{ TotalTokens int }
	err = json.NewDecoder(resp.Body).Decode(&count)
	resp.Body.Close()
	if err != nil || count.TotalTokens <= 0 {
		t.Errorf("countTokens: %v %+v", err, count)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Stream || reqs[0].Tools || !strings.Contains(reqs[0].LastUser, "<state_snapshot>") || strings.Contains(reqs[0].Last, "task") {
		t.Errorf("requests %+v", reqs)
	}
}
