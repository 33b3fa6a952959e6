package transcript_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// readFile reads a fixture, failing the test on any error.
func readFile(t *testing.T, f transcript.Format, path string, opts transcript.Options) ([]tier.Event, transcript.Report) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	opts.File = path
	evs, rep, err := readEvents(t, f, fh, opts)
	if err != nil {
		t.Fatalf("Read %s: %v", path, err)
	}
	return evs, rep
}

// readEvents reads a transcript of one session (or none, for bad input)
// and returns its events.
func readEvents(t *testing.T, f transcript.Format, r io.Reader, opts transcript.Options) ([]tier.Event, transcript.Report, error) {
	t.Helper()
	ss, rep, err := transcript.Read(f, r, opts)
	if len(ss) > 1 {
		t.Fatalf("%d sessions, want one", len(ss))
	}
	var evs []tier.Event
	for _, s := range ss {
		evs = append(evs, s.Events...)
	}
	return evs, rep, err
}

// stored appends evs to a fresh database (verified at cleanup) and returns
// the session's ledger as the store holds it.
func stored(t *testing.T, evs []tier.Event) *tier.Ledger {
	t.Helper()
	db := dbtest.Open(t, store.Options{})
	if _, err := db.Append("s", evs...); err != nil {
		t.Fatalf("Append: %v", err)
	}
	var l *tier.Ledger
	if err := db.View(func(s *store.Snapshot) (err error) { l, err = s.Ledger("s"); return err }); err != nil {
		t.Fatal(err)
	}
	return l
}

// ledgerWant is the state a transcript implies.
type ledgerWant struct {
	open      []string          // ids of the calls left open
	artifacts []string          // keys
	rejected  map[string]string // key → a part of the reason
}

func checkLedger(t *testing.T, l *tier.Ledger, w ledgerWant) {
	t.Helper()
	var open, arts []string
	for _, o := range l.OpenList() {
		open = append(open, o.ID)
	}
	for _, a := range l.ArtifactList() {
		arts = append(arts, a.Key)
	}
	if !slices.Equal(open, w.open) {
		t.Errorf("open calls %q, want %q", open, w.open)
	}
	if !slices.Equal(arts, w.artifacts) {
		t.Errorf("artifacts %q, want %q", arts, w.artifacts)
	}
	if len(l.Dispositions) != len(w.rejected) {
		t.Errorf("dispositions %+v, want the rejections %q", l.DispositionList(), w.rejected)
	}
	for k, reason := range w.rejected {
		d, ok := l.Dispositions[k]
		if !ok || d.State != tier.KindRejected || !strings.Contains(d.Reason, reason) {
			t.Errorf("disposition of %q is %+v (found %v), want rejected with %q", k, d, ok, reason)
		}
	}
}

func count(evs []tier.Event, k tier.Kind, pred func(tier.Event) bool) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k && (pred == nil || pred(e)) {
			n++
		}
	}
	return n
}

func failed(e tier.Event) bool { return e.Failed }

func TestRead_OpenAI(t *testing.T) {
	evs, rep := readFile(t, transcript.OpenAI, "testdata/openai/chat.json", transcript.Options{})
	checkLedger(t, stored(t, evs), ledgerWant{
		open:      []string{"call_7"},
		artifacts: []string{"CHANGELOG.md", "cli.py"},
	})
	if got := count(evs, tier.KindToolResult, failed); got != 1 {
		t.Errorf("%d failed results, want 1 (call_6, is_error)", got)
	}
	if rep.RenamedCalls != 1 || rep.OrphanResults != 1 || rep.Unresolved != 1 ||
		rep.Unknown["role/critic"] != 1 || rep.Skipped["image_url"] != 1 || rep.Calls != 8 || rep.Results != 7 {
		t.Errorf("report %s", rep)
	}
	// The repeated call_5 is renamed, and its results resolve the calls in order.
	var ids []string
	for _, e := range evs {
		if e.Kind == tier.KindToolResult {
			ids = append(ids, e.ID)
		}
	}
	if want := []string{"call_2", "call_1", "call_3", "call_4", "call_5", "call_5#2", "call_6"}; !slices.Equal(ids, want) {
		t.Errorf("results resolve %q, want %q", ids, want)
	}
	if evs[1].Time == 0 || evs[1].Kind != tier.KindUser {
		t.Errorf("event 2 is %+v: want the user message with its timestamp", evs[1])
	}
}

// The three OpenAI forms of the same messages (array, JSONL, an object with
// "messages") give the same events.
func TestRead_OpenAIForms(t *testing.T) {
	raw, err := os.ReadFile("testdata/openai/chat.json")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := readEvents(t, transcript.OpenAI, bytes.NewReader(raw), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	var jsonl bytes.Buffer
	for _, m := range msgs {
		var c bytes.Buffer
		_ = json.Compact(&c, m)
		jsonl.Write(c.Bytes())
		jsonl.WriteString("\n")
	}
	wrapped := `{"model":"gpt-4.1","messages":` + string(raw) + `}`
	for name, in := range map[string]string{"jsonl": jsonl.String(), "object": wrapped} {
		got, _, err := readEvents(t, transcript.OpenAI, strings.NewReader(in), transcript.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d events differ from the array's %d", name, len(got), len(want))
		}
	}
}

func TestRead_OpenAIResponses(t *testing.T) {
	evs, rep := readFile(t, transcript.OpenAI, "testdata/openai/responses.jsonl", transcript.Options{})
	checkLedger(t, stored(t, evs), ledgerWant{artifacts: []string{"strings.go"}})
	if rep.Calls != 4 || rep.Results != 4 || rep.Failed != 1 || rep.Skipped["reasoning"] != 1 || rep.Messages != 2 || rep.Quirks() != 0 {
		t.Errorf("report %s", rep)
	}
	// The mcp_call with an error is a failed call of the MCP tool, its error
	// the result's text; the other one succeeded.
	var got []string
	for _, e := range evs {
		if e.Kind == tier.KindToolCall && strings.HasPrefix(e.ID, "mcp_") {
			got = append(got, e.ID+" "+e.Name)
		}
		if e.Kind == tier.KindToolResult && strings.HasPrefix(e.ID, "mcp_") {
			got = append(got, fmt.Sprintf("%s failed=%v %s", e.ID, e.Failed, e.Text))
		}
	}
	want := []string{
		"mcp_1 mcp__github__create_pull_request", "mcp_1 failed=true 403 Forbidden: token lacks repo scope",
		"mcp_2 mcp__github__list_branches", "mcp_2 failed=false main\nrename-util",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mcp calls and results:\n%q\nwant\n%q", got, want)
	}
}

func TestRead_Anthropic(t *testing.T) {
	evs, rep := readFile(t, transcript.Anthropic, "testdata/anthropic/messages.json", transcript.Options{Dir: "/repo"})
	checkLedger(t, stored(t, evs), ledgerWant{
		open:      []string{"toolu_06"},
		artifacts: []string{"config.py", "tests/test_settings.py"}, // the view call wrote nothing
		rejected:  map[string]string{"tool/bash:git push --force origin main": "never force-push to main"},
	})
	if got := count(evs, tier.KindToolResult, failed); got != 3 {
		t.Errorf("%d failed results, want 3 (pytest, the rejected push, the web search's error)", got)
	}
	if evs[0].Kind != tier.KindSystem || !strings.Contains(evs[0].Text, "careful engineer") {
		t.Errorf("first event %+v, want the system prompt", evs[0])
	}
	if rep.OrphanResults != 1 || rep.Skipped["thinking"] != 1 || rep.Skipped["image"] != 1 ||
		rep.Unknown["block/citations_summary"] != 1 || rep.Unresolved != 1 || rep.Rejected != 1 {
		t.Errorf("report %s", rep)
	}
}

func TestRead_ClaudeCode(t *testing.T) {
	evs, rep := readFile(t, transcript.ClaudeCode, "testdata/claude-code/session.jsonl", transcript.Options{})
	checkLedger(t, stored(t, evs), ledgerWant{
		open:      []string{"toolu_06"},
		artifacts: []string{"tests/conftest.py", "tests/test_login.py"},
		rejected:  map[string]string{"tool/Edit:.github/workflows/ci.yml": "the user rejected the tool use"},
	})
	for _, e := range evs {
		if e.Time == 0 {
			t.Errorf("event %+v has no time: every record of the fixture has a timestamp", e)
		}
		if e.ID == "toolu_90" {
			t.Errorf("a sidechain call was kept: %+v", e)
		}
	}
	want := transcript.Report{DuplicateRecords: 1, Sidechain: 2, Compactions: 1, Interrupts: 1, RenamedCalls: 1,
		OrphanResults: 1, Unresolved: 1, Rejected: 1, Artifacts: 3, Calls: 7, Results: 6, Failed: 2}
	got := rep
	if got.DuplicateRecords != want.DuplicateRecords || got.Sidechain != want.Sidechain || got.Compactions != want.Compactions ||
		got.Interrupts != want.Interrupts || got.RenamedCalls != want.RenamedCalls || got.OrphanResults != want.OrphanResults ||
		got.Unresolved != want.Unresolved || got.Rejected != want.Rejected || got.Artifacts != want.Artifacts ||
		got.Calls != want.Calls || got.Results != want.Results || got.Failed != want.Failed {
		t.Errorf("report %s", rep)
	}
	for _, k := range []string{"summary", "progress", "file-history-snapshot", "system/turn_duration", "thinking"} {
		if rep.Skipped[k] != 1 {
			t.Errorf("skipped %s: %d, want 1 (report %s)", k, rep.Skipped[k], rep)
		}
	}
	if rep.Unknown["x-new-record-kind"] != 1 {
		t.Errorf("report %s: want the unknown record type counted", rep)
	}
	// The interrupt notice and the compact summary are not user turns.
	if n := count(evs, tier.KindUser, nil); n != 2 {
		t.Errorf("%d user events, want the 2 the user typed", n)
	}
	// The compact_boundary record's event, and no other, is a compaction
	// of Claude Code's, with the record's uuid as its ref.
	var compactions []tier.Event
	for _, e := range evs {
		if transcript.IsClaudeCodeCompaction(e) {
			compactions = append(compactions, e)
		}
	}
	if len(compactions) != rep.Compactions || len(compactions) != 1 || compactions[0].Ref != "c1" ||
		compactions[0].Text != transcript.ClaudeCodeCompacted+" (trigger auto, 155025 tokens before)" {
		t.Errorf("compactions %+v; want the one of record c1", compactions)
	}
}

// TestIsClaudeCodeCompaction: only a system event whose text begins as a
// compact_boundary record's does: a user saying the same words is not one.
func TestIsClaudeCodeCompaction(t *testing.T) {
	for _, c := range []struct {
		e    tier.Event
		want bool
	}{
		{tier.Event{Kind: tier.KindSystem, Text: transcript.ClaudeCodeCompacted}, true},
		{tier.Event{Kind: tier.KindSystem, Text: transcript.ClaudeCodeCompacted + " (trigger manual, 10 tokens before)"}, true},
		{tier.Event{Kind: tier.KindUser, Text: transcript.ClaudeCodeCompacted}, false},
		{tier.Event{Kind: tier.KindSystem, Text: "strata compared Claude Code's compact summary"}, false},
		{tier.Event{Kind: tier.KindSystem, Text: "Note: " + transcript.ClaudeCodeCompacted}, false},
	} {
		if got := transcript.IsClaudeCodeCompaction(c.e); got != c.want {
			t.Errorf("IsClaudeCodeCompaction(%+v) = %v, want %v", c.e, got, c.want)
		}
	}
}

func TestRead_ClaudeCodeSidechains(t *testing.T) {
	evs, rep := readFile(t, transcript.ClaudeCode, "testdata/claude-code/session.jsonl", transcript.Options{Sidechains: true})
	if rep.Sidechain != 0 || count(evs, tier.KindToolCall, func(e tier.Event) bool { return e.ID == "toolu_90" }) != 1 {
		t.Errorf("with Sidechains the sub-agent's call is kept: report %s", rep)
	}
	// A sub-agent's own file is all sidechain: read whole.
	sub := `{"type":"user","uuid":"x1","isSidechain":true,"agentId":"a1","message":{"role":"user","content":"Find wait_for."}}
{"type":"assistant","uuid":"x2","isSidechain":true,"agentId":"a1","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Grep","input":{"pattern":"wait_for"}}]}}
{"type":"user","uuid":"x3","isSidechain":true,"agentId":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"conftest.py:12"}]}}
`
	evs, rep, err := readEvents(t, transcript.ClaudeCode, strings.NewReader(sub), transcript.Options{})
	if err != nil || len(evs) != 3 || rep.Sidechain != 0 {
		t.Errorf("sub-agent file: %d events, report %s, err %v; want 3, none skipped", len(evs), rep, err)
	}
	// The same records read as the continuation of a main session's file
	// (MainSession) are its sidechain: skipped.
	main := sub + `{"type":"user","uuid":"m1","message":{"role":"user","content":"Thanks."}}` + "\n"
	evs, rep, err = readEvents(t, transcript.ClaudeCode, strings.NewReader(main), transcript.Options{MainSession: true})
	if err != nil || len(evs) != 1 || rep.Sidechain != 3 {
		t.Errorf("MainSession: %d events, report %s, err %v; want 1, 3 sidechain records skipped", len(evs), rep, err)
	}
}

func TestRead_BadInput(t *testing.T) {
	good := `{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}`
	cases := []struct {
		name   string
		format transcript.Format
		in     string
		line   int
		cause  error
	}{
		{"claude-code bad line", transcript.ClaudeCode, good + "\n\n{\"type\":\"user\",\n", 3, transcript.ErrBadJSON},
		{"claude-code not an object", transcript.ClaudeCode, good + "\n[1,2]\n", 2, transcript.ErrBadRecord},
		{"openai jsonl bad line", transcript.OpenAI, `{"role":"user","content":"a"}` + "\n" + `{"role":"assistant","content":"b"}` + "\n" + `{"role":"user",` + "\n", 3, transcript.ErrBadJSON},
		{"openai garbage line", transcript.OpenAI, `{"role":"user","content":"a"}` + "\n" + `not json` + "\n", 2, transcript.ErrBadJSON},
		{"openai array cut short", transcript.OpenAI, "[\n" + `{"role":"user","content":"a"},` + "\n" + `{"role":"assistant"`, 3, transcript.ErrBadJSON},
		{"anthropic number", transcript.Anthropic, "\n\n42\n", 3, transcript.ErrBadRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := readEvents(t, c.format, strings.NewReader(c.in), transcript.Options{File: "x.jsonl"})
			var le *transcript.LineError
			if !errors.As(err, &le) || le.File != "x.jsonl" || le.Line != c.line || !errors.Is(err, c.cause) {
				t.Fatalf("err = %v, want a LineError at x.jsonl:%d wrapping %v", err, c.line, c.cause)
			}
			if !strings.HasPrefix(err.Error(), "x.jsonl:") {
				t.Errorf("message %q does not start with the file and line", err)
			}
		})
	}
	// A line over the limit.
	long := good + "\n" + `{"type":"user","message":{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}}` + "\n"
	_, _, err := readEvents(t, transcript.ClaudeCode, strings.NewReader(long), transcript.Options{MaxRecordBytes: 1024})
	var le *transcript.LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, transcript.ErrTooLarge) {
		t.Errorf("long line: err = %v, want ErrTooLarge at line 2", err)
	}
	_, _, err = readEvents(t, transcript.OpenAI, strings.NewReader("[\n"+`{"role":"user","content":"`+strings.Repeat("x", 1<<20)+`"}]`), transcript.Options{MaxRecordBytes: 1024})
	if !errors.Is(err, transcript.ErrTooLarge) {
		t.Errorf("large document: err = %v, want ErrTooLarge", err)
	}
	if f, err := transcript.ParseFormat("gemini"); err != nil || f != transcript.Gemini {
		t.Errorf("ParseFormat(gemini) = %q, %v", f, err)
	}
	if _, err := transcript.ParseFormat("cline"); !errors.Is(err, transcript.ErrUnknownFormat) {
		t.Errorf("ParseFormat(cline) = %v", err)
	}
}

// A transcript continued in a second file, or appended to a session with
// calls already open: the open calls are passed on and the store accepts
// both files in turn.
func TestRead_ContinuedSession(t *testing.T) {
	first := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"sh","arguments":"{\"command\":\"make\"}"}},{"id":"c2","type":"function","function":{"name":"sh","arguments":"{}"}}]}
{"role":"tool","tool_call_id":"c2","content":"done"}
`
	second := `{"role":"tool","tool_call_id":"c1","content":"make: ok"}
{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"sh","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"sh","arguments":"{}"}}]}
{"role":"tool","tool_call_id":"c2","content":"a"}
`
	db := dbtest.Open(t, store.Options{})
	d, err := transcript.NewDecoder(transcript.OpenAI, strings.NewReader(first), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var evs []tier.Event
	for {
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if _, err := db.Append("s", evs...); err != nil {
		t.Fatal(err)
	}
	// The calls the decoder leaves open are the store's, with the events
	// that opened them.
	open := target(t, db, "s").Open
	show := func(evs []tier.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.ID+"/"+e.Name+"/"+e.Text)
		}
		return out
	}
	if !slices.Equal(show(open), show(d.Open(""))) || len(open) != 1 {
		t.Errorf("decoder's open calls %q, store's %q", show(d.Open("")), show(open))
	}
	evs2, rep, err := readEvents(t, transcript.OpenAI, strings.NewReader(second), transcript.Options{
		Target: func(string) (transcript.Target, error) { return transcript.Target{Session: "s", Open: open}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append("s", evs2...); err != nil {
		t.Fatalf("second file: %v", err)
	}
	if rep.OrphanResults != 0 || rep.Unresolved != 1 || rep.RenamedCalls != 1 {
		t.Errorf("report %s: want c1 resolved, one c2 renamed and one left open", rep)
	}
}

// Ids, names and texts the store would refuse are repaired, counted, and
// the events stored.
func TestRead_HostileFields(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes
	in, _ := json.Marshal([]any{
		map[string]any{"role": "assistant", "content": strings.Repeat("y", 9000), "tool_calls": []any{
			map[string]any{"id": "bad\x00id\n", "type": "function", "function": map[string]any{"name": "na\x1bme", "arguments": "{}"}},
			map[string]any{"id": long, "type": "function", "function": map[string]any{"name": "write_file", "arguments": `{"path":"` + long + `"}`}},
			map[string]any{"id": long + "x", "type": "function", "function": map[string]any{"name": "sh", "arguments": "{}"}},
			map[string]any{"type": "function", "function": map[string]any{"name": "sh", "arguments": "{}"}},
		}, "timestamp": "yesterday"},
		map[string]any{"role": "tool", "tool_call_id": "bad\x00id\n", "content": "ok"},
		map[string]any{"role": "tool", "tool_call_id": long, "content": "ok"},
		map[string]any{"role": "tool", "tool_call_id": long + "x", "content": "ok", "created_at": 1.7e9},
	})
	lim := tier.Limits{MaxEventBytes: 8192, MaxIDBytes: 1024}
	evs, rep, err := readEvents(t, transcript.OpenAI, bytes.NewReader(in), transcript.Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.Open(t, store.Options{MaxEventBytes: 8192})
	for _, e := range evs {
		if err := e.Check(lim); err != nil {
			t.Errorf("event %+v: %v", e, err)
		}
	}
	if _, err := db.Append("s", evs...); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if rep.Clipped != 1 || rep.FixedIDs < 4 || rep.MissingIDs != 1 || rep.BadTimes != 1 || rep.Unresolved != 1 || rep.Artifacts != 1 {
		t.Errorf("report %s", rep)
	}
	if evs[len(evs)-1].Time == 0 {
		t.Errorf("created_at in Unix seconds was not read")
	}
}

func TestReport_AddAndFields(t *testing.T) {
	_, a := readFile(t, transcript.ClaudeCode, "testdata/claude-code/session.jsonl", transcript.Options{})
	_, b := readFile(t, transcript.OpenAI, "testdata/openai/chat.json", transcript.Options{})
	var sum transcript.Report
	sum.Add(a)
	sum.Add(b)
	if sum.Events != a.Events+b.Events || sum.RenamedCalls != 2 || sum.Skipped["progress"] != 1 || sum.Unknown["role/critic"] != 1 {
		t.Errorf("sum %s", sum)
	}
	if a.Quirks() == 0 || !strings.Contains(a.String(), "unknown=x-new-record-kind:1") {
		t.Errorf("report %s, quirks %d", a, a.Quirks())
	}
	var clean transcript.Report
	if clean.String() != "records=0 events=0" || clean.Quirks() != 0 {
		t.Errorf("empty report %q", clean.String())
	}
}

// isErrors counts the failures a transcript's raw JSON states: every
// object with "is_error": true (a tool_result block, an OpenAI tool
// message), every server tool's *_tool_result_error content and every
// mcp_call item with an error. In a Claude Code file, records seen before
// (the same uuid) and the sidechain records of a main session are left
// out, as the importer leaves them out.
func isErrors(t *testing.T, f transcript.Format, raw []byte) int {
	t.Helper()
	var walk func(v any) int
	walk = func(v any) int {
		n := 0
		switch x := v.(type) {
		case map[string]any:
			if x["is_error"] == true {
				n++
			}
			if typ, _ := x["type"].(string); strings.HasSuffix(typ, "_tool_result_error") ||
				typ == "mcp_call" && x["error"] != nil {
				n++
			}
			for _, e := range x {
				n += walk(e)
			}
		case []any:
			for _, e := range x {
				n += walk(e)
			}
		}
		return n
	}
	var docs []any
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, v)
	}
	n := 0
	seen := map[string]bool{}
	started, subagent := false, false
	for _, d := range docs {
		if rec, ok := d.(map[string]any); ok && f == transcript.ClaudeCode {
			if uuid, _ := rec["uuid"].(string); uuid != "" {
				if seen[uuid] {
					continue
				}
				seen[uuid] = true
			}
			side, _ := rec["isSidechain"].(bool)
			if typ := rec["type"]; !started && (typ == "user" || typ == "assistant") {
				started, subagent = true, side
			}
			if side && !subagent {
				continue
			}
		}
		n += walk(d)
	}
	return n
}

// Every failure a transcript states gives a tool_result with ok:false, in
// each format's fixtures.
func TestRead_FailedResults(t *testing.T) {
	for _, tc := range []struct {
		f    transcript.Format
		path string
		want int // failures in the fixture, as a check on isErrors
	}{
		{transcript.OpenAI, "testdata/openai/chat.json", 1},
		{transcript.OpenAI, "testdata/openai/responses.jsonl", 1},
		{transcript.Anthropic, "testdata/anthropic/messages.json", 3},
		{transcript.ClaudeCode, "testdata/claude-code/session.jsonl", 2},
	} {
		t.Run(tc.path, func(t *testing.T) {
			raw, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if n := isErrors(t, tc.f, raw); n != tc.want {
				t.Fatalf("the fixture states %d failures, want %d", n, tc.want)
			}
			evs, rep := readFile(t, tc.f, tc.path, transcript.Options{})
			if got := count(evs, tier.KindToolResult, failed); got != tc.want || rep.Failed != tc.want {
				t.Errorf("%d failed tool_result events (report: %d), want %d", got, rep.Failed, tc.want)
			}
			// In the JSONL form a failed result is "ok": false.
			for _, e := range evs {
				if e.Kind != tier.KindToolResult {
					continue
				}
				b, _ := json.Marshal(e.ToJSON("s"))
				if e.Failed != bytes.Contains(b, []byte(`"ok":false`)) {
					t.Errorf("event %+v in JSONL: %s", e, b)
				}
			}
		})
	}
}

// The real Claude Code transcripts of ../shared/data/claude-code: as many
// failed tool_result events as tool results the files mark is_error.
func TestRead_ClaudeCodeRealFailures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "claude-code", "*.jsonl"))
	if len(files) == 0 {
		t.Skip("../shared/data/claude-code is absent")
	}
	total := 0
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want := isErrors(t, transcript.ClaudeCode, raw)
		total += want
		evs, rep := readFile(t, transcript.ClaudeCode, name, transcript.Options{})
		if got := count(evs, tier.KindToolResult, failed); got != want || rep.Failed != want {
			t.Errorf("%s: %d failed tool_result events (report: %d), want the %d is_error results", filepath.Base(name), got, rep.Failed, want)
		}
		stored(t, evs)
	}
	if total == 0 {
		t.Errorf("no is_error result in %d files: the check checks nothing", len(files))
	}
}

// Invalid UTF-8 and escaped lone surrogates are read as U+FFFD, as
// encoding/json reads them: each is counted as a quirk, and the events
// are valid.
func TestRead_InvalidUTF8Counted(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    transcript.Format
		in   string
		want int
	}{
		{"bytes", transcript.OpenAI, "{\"role\":\"user\",\"content\":\"caf\xe9 \xff\xfe\"}", 3},
		{"lone surrogates", transcript.OpenAI, `{"role":"user","content":"a\ud800 b\uDFFF c\ud83d\u0041"}`, 3},
		{"in an id", transcript.OpenAI, `{"role":"assistant","tool_calls":[{"id":"c\ud800","function":{"name":"sh","arguments":"{}"}}]}`, 1},
		{"in a tool result", transcript.Anthropic, `[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"\udc00"}]}]`, 1},
		{"claude-code", transcript.ClaudeCode, "{\"type\":\"user\",\"message\":{\"content\":\"\\ud800 \xc3\"}}", 2},
		{"pairs and escaped backslashes", transcript.OpenAI, `{"role":"user","content":"\ud83d\ude00 \\ud800 \\\\udc00"}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, rep, err := readEvents(t, tc.f, strings.NewReader(tc.in), transcript.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.InvalidUTF8 != tc.want || rep.Quirks() != tc.want+rep.FixedIDs {
				t.Errorf("report %s: invalid_utf8 %d, quirks %d; want %d", rep, rep.InvalidUTF8, rep.Quirks(), tc.want)
			}
			if (tc.want > 0) != strings.Contains(rep.String(), fmt.Sprintf("invalid_utf8=%d", tc.want)) {
				t.Errorf("report %q does not say invalid_utf8=%d", rep, tc.want)
			}
			if len(evs) == 0 {
				t.Fatal("no events")
			}
			for _, e := range evs {
				if err := e.Check(tier.Limits{}); err != nil {
					t.Errorf("event %+v: %v", e, err)
				}
			}
		})
	}
	var sum transcript.Report
	sum.Add(transcript.Report{InvalidUTF8: 2})
	sum.Add(transcript.Report{InvalidUTF8: 3})
	if sum.InvalidUTF8 != 5 {
		t.Errorf("Add: %d", sum.InvalidUTF8)
	}
}

// The real Claude Code 2.1.332 transcript of ../shared/data/realclient:
// the user's words are the two prompts typed; the /compact command, its
// output, the caveat before it and the compact summary are Claude Code's
// records, kept as system events.
func TestRead_ClaudeCodeBookkeepingIsNotTheUsers(t *testing.T) {
	name := filepath.Join("..", "..", "shared", "data", "realclient", "claude-code-2.1.332-print-task-compact-followup.jsonl")
	if _, err := os.Stat(name); err != nil {
		t.Skip("../shared/data/realclient is absent")
	}
	evs, _ := readFile(t, transcript.ClaudeCode, name, transcript.Options{})
	var users []string
	bookkeeping := 0
	for _, e := range evs {
		switch {
		case e.Kind == tier.KindUser:
			users = append(users, e.Text)
		case e.Kind == tier.KindSystem && (strings.Contains(e.Text, "<command-name>/compact") ||
			strings.Contains(e.Text, "<local-command-stdout>") || strings.Contains(e.Text, "<local-command-caveat>")):
			bookkeeping++
		}
	}
	want := []string{"TASK-A: write the down migration for the widgets table", "Follow-up: what is the state of the work, and did anything fail?"}
	if !slices.Equal(users, want) {
		t.Errorf("user events %q, want the %d prompts typed", users, len(want))
	}
	if bookkeeping != 3 {
		t.Errorf("%d system events of the /compact command's records, want 3 (the command, its output, the caveat)", bookkeeping)
	}
}

func TestClaudeCode_BookkeepingBlocks(t *testing.T) {
	in := `{"type":"user","uuid":"u1","message":{"role":"user","content":[{"type":"text","text":"<command-name>/review</command-name>"}]}}
{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"text","text":"review <command-name> please"}]}}
{"type":"user","uuid":"u3","message":{"role":"user","content":"<local-command-stderr>boom</local-command-stderr>"}}
`
	evs, _, err := readEvents(t, transcript.ClaudeCode, strings.NewReader(in), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []tier.Kind{}
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if !slices.Equal(kinds, []tier.Kind{tier.KindSystem, tier.KindUser, tier.KindSystem}) {
		t.Errorf("kinds %v: want the tagged records system events and the user's words a user event", kinds)
	}
}

// TestRead_ClaudeCodeClientRecordsAreNoRequests: the user records Claude
// Code writes itself — a /compact command and its output, a background
// task's notice — are system events; what the user typed is a user event.
func TestRead_ClaudeCodeClientRecordsAreNoRequests(t *testing.T) {
	lines := []string{
		`{"type":"user","uuid":"u1","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"Fix the login test"}}`,
		`{"type":"user","uuid":"u2","sessionId":"s","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":"<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args></command-args>"}}`,
		`{"type":"user","uuid":"u3","sessionId":"s","timestamp":"2026-01-01T00:00:02Z","message":{"role":"user","content":"<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>"}}`,
		`{"type":"user","uuid":"u4","sessionId":"s","timestamp":"2026-01-01T00:00:03Z","message":{"role":"user","content":[{"type":"text","text":"<task-notification>\n<task-id>b7</task-id>\n</task-notification>"}]}}`,
		`{"type":"user","uuid":"u5","sessionId":"s","timestamp":"2026-01-01T00:00:04Z","message":{"role":"user","content":"and <command-name> in a sentence is the user's"}}`,
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, _ := readFile(t, transcript.ClaudeCode, path, transcript.Options{})
	var users []string
	system := 0
	for _, e := range evs {
		switch e.Kind {
		case tier.KindUser:
			users = append(users, e.Text)
		case tier.KindSystem:
			system++
		}
	}
	if want := []string{"Fix the login test", "and <command-name> in a sentence is the user's"}; !slices.Equal(users, want) || system != 3 {
		t.Errorf("user events %q and %d system events, want %q and 3", users, system, want)
	}
}
