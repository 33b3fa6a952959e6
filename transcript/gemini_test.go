package transcript_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// geminiCounts is what a Gemini CLI chat says, read here without the
// package: the tool calls that ran, those a structured field marks failed
// (a status other than success, an error in the function response, the
// shell tool's exit code or signal), the files the successful write_file and
// replace calls name, the items of write_todos calls, the user's
// messages (their own records, not Gemini CLI's context) and the
// compressions' summaries (user messages only a "$set" history holds).
type geminiCounts struct {
	calls, failures, files, planItems, userWords, summaries int
}

var exitCodeLine = regexp.MustCompile(`\n(Exit Code: [1-9][0-9]*\n(Signal: .*\n)?|Signal: .*\n)(Process Group PGID: [0-9]+\n)?</untrusted_context>$`)

func readGeminiCounts(t *testing.T, raw []byte) geminiCounts {
	t.Helper()
	type call struct {
		ID, Name, Status string
		Args             map[string]any
		Result           []struct {
			FunctionResponse struct {
				Response map[string]any
			}
		}
	}
	type message struct {
		ID, Type  string
		Content   any
		ToolCalls []call
	}
	var own, set []message
	if doc := (struct{ Messages []message }{}); bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{\n")) && json.Unmarshal(raw, &doc) == nil && doc.Messages != nil {
		own = doc.Messages
	} else {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var l struct {
				message
				Set struct{ Messages []message } `json:"$set"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			if l.ID != "" {
				own = append(own, l.message)
			}
			set = append(set, l.Set.Messages...)
		}
	}
	text := func(m message) string {
		if s, ok := m.Content.(string); ok {
			return s
		}
		var out []string
		parts, _ := m.Content.([]any)
		for _, p := range parts {
			if s, ok := p.(map[string]any)["text"].(string); ok && !strings.HasPrefix(s, "<session_context>") && !strings.HasPrefix(s, "<hook_context>") {
				out = append(out, s)
			}
		}
		return strings.Join(out, "\n")
	}
	var c geminiCounts
	calls := map[string]call{}
	said := map[string]bool{}
	users := map[string]bool{}
	for _, m := range own {
		for _, tc := range m.ToolCalls {
			if tc.Status == "success" || tc.Status == "error" || tc.Status == "cancelled" {
				calls[tc.ID] = tc
			}
		}
		if m.Type == "user" && text(m) != "" && !users[m.ID] {
			users[m.ID] = true
			said[text(m)] = true
			c.userWords++
		}
	}
	files := map[string]bool{}
	for _, tc := range calls {
		c.calls++
		failed := tc.Status != "success"
		for _, r := range tc.Result {
			out, _ := r.FunctionResponse.Response["output"].(string)
			if tc.Name == "run_shell_command" && exitCodeLine.MatchString(out) {
				failed = true
			}
			if r.FunctionResponse.Response["error"] != nil {
				failed = true
			}
		}
		if failed {
			c.failures++
			continue
		}
		if p, _ := tc.Args["file_path"].(string); p != "" && (tc.Name == "write_file" || tc.Name == "replace") {
			files[p] = true
		}
		if tc.Name == "write_todos" {
			todos, _ := tc.Args["todos"].([]any)
			c.planItems += len(todos)
		}
	}
	c.files = len(files)
	summaries := map[string]bool{}
	for _, m := range set {
		if m.Type == "user" && text(m) != "" && !said[text(m)] {
			summaries[text(m)] = true
		}
	}
	c.summaries = len(summaries)
	return c
}

// geminiEventCounts counts what the events of a chat hold.
func geminiEventCounts(t *testing.T, evs []tier.Event) geminiCounts {
	var c geminiCounts
	for i, e := range evs {
		switch e.Kind {
		case tier.KindToolCall:
			c.calls++
			if e.Name == "write_todos" {
				var a struct{ Todos []any }
				if err := json.Unmarshal([]byte(e.Text), &a); err != nil {
					t.Errorf("write_todos call %s: its input is not the list: %v", e.ID, err)
				}
				c.planItems += len(a.Todos)
			}
		case tier.KindToolResult:
			if e.Failed {
				c.failures++
			}
		case tier.KindArtifact:
			c.files++
		case tier.KindUser:
			c.userWords++
			if strings.Contains(e.Text, "hook_context") || strings.Contains(e.Text, "# strata") || strings.Contains(e.Text, "<session_context>") {
				t.Errorf("user event %q holds what Gemini CLI or a hook wrote", e.Text)
			}
		case tier.KindSystem:
			if transcript.IsGeminiCompression(e) {
				if i+1 >= len(evs) || evs[i+1].Kind != tier.KindSystem || evs[i+1].Ref == e.Ref || evs[i+1].Ref == "" {
					t.Errorf("compression %q: no summary after it", e.Text)
				}
				c.summaries++
			}
		}
	}
	return c
}

// geminiChats are the real chats: the one recorded from Gemini CLI 0.61.0
// (testdata) and the public ones of ../shared/data/transcripts/gemini.
func geminiChats(t *testing.T) []string {
	shared, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "transcripts", "gemini", "*"))
	if len(shared) == 0 {
		t.Log("../shared/data/transcripts/gemini is absent: the recorded chat alone")
	}
	return append([]string{"testdata/gemini/session-0.61.0.jsonl"}, shared...)
}

// Every real chat: the calls, failures, written files, plan items, the
// user's words and the compressions the importer finds are those an
// independent reading of the file counts; the events pass the store.
func TestRead_GeminiRealChats(t *testing.T) {
	var total geminiCounts
	for _, name := range geminiChats(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			want := readGeminiCounts(t, raw)
			evs, rep := readFile(t, transcript.Gemini, name, transcript.Options{})
			if got := geminiEventCounts(t, evs); got != want {
				t.Errorf("the importer found %+v, the file says %+v", got, want)
			}
			if rep.Calls != want.calls || rep.Failed != want.failures || rep.Artifacts != want.files || rep.Compactions != want.summaries || rep.Quirks() != 0 {
				t.Errorf("report %s, want calls=%d failed=%d artifacts=%d compactions=%d and no quirk", rep.String(), want.calls, want.failures, want.files, want.summaries)
			}
			total.calls += want.calls
			total.failures += want.failures
			total.files += want.files
			total.planItems += want.planItems
			total.summaries += want.summaries
			stored(t, evs)
		})
	}
	if total.failures == 0 || total.files == 0 || total.planItems == 0 || total.summaries == 0 {
		t.Errorf("totals %+v: a count the check compares is zero in every file", total)
	}
}

// The fixture: what each structured field gives, and what is left out.
func TestRead_Gemini(t *testing.T) {
	ss := readSessions(t, transcript.Gemini, "testdata/gemini/chat.jsonl", transcript.Options{Dir: "/work/app"})
	if len(ss) != 1 || ss[0].ID != "5f0c1a2b-0000-4000-8000-00000000abcd" {
		t.Fatalf("sessions %v, want the one sessionId names", ids(ss))
	}
	s := ss[0]
	var failedIDs, users, systems []string
	keptFrom := ""
	for _, e := range s.Events {
		switch {
		case e.Kind == tier.KindToolResult && e.Failed:
			failedIDs = append(failedIDs, e.ID)
		case e.Kind == tier.KindUser:
			users = append(users, e.Text)
		case e.Kind == tier.KindSystem:
			systems = append(systems, e.Text)
			if transcript.IsGeminiCompression(e) {
				keptFrom = transcript.GeminiKeptFrom(e)
			}
		}
	}
	// make (the shell tool's exit code 2, its status "success"), the
	// cancelled write, the read that failed; not echo, whose output holds
	// "Exit Code: 1" among its own lines.
	if want := []string{"run_shell_command__make", "write_file__notes", "read_file__missing"}; !slices.Equal(failedIDs, want) {
		t.Errorf("failed results %q, want %q", failedIDs, want)
	}
	// The question kept by the compression under a new id is not the
	// user's again, nor the hook's context in the first message.
	if want := []string{"Fix the build and plan the release.", "Did anything fail?", "Thanks."}; !slices.Equal(users, want) {
		t.Errorf("user events %q, want %q", users, want)
	}
	if len(systems) != 4 || !strings.HasPrefix(systems[0], "<session_context>") || systems[1] != "Request cancelled." ||
		!strings.HasPrefix(systems[2], transcript.GeminiCompressed) || systems[3] != "<state_snapshot>the build was fixed</state_snapshot>" {
		t.Errorf("system events %q, want the context, the info message, the compression and its summary", systems)
	}
	if keptFrom != "u2" {
		t.Errorf("the compression kept from %q, want u2: the question it kept is that message", keptFrom)
	}
	rep := s.Report
	if rep.Rejected != 1 || rep.Compactions != 1 || rep.Skipped["hook_context"] != 1 || rep.Skipped["compression_ack"] != 1 ||
		rep.Skipped["history_copy"] != 2 || rep.Skipped["tool_call/executing"] != 1 || rep.Skipped["$rewindTo"] != 1 || rep.Quirks() != 0 {
		t.Errorf("report %s: want the cancelled call rejected, one compression, the hook's context, the acknowledgement, two kept copies, the call still executing and the rewind counted", rep.String())
	}
	checkLedger(t, stored(t, s.Events), ledgerWant{artifacts: []string{"src/build.go"}, rejected: map[string]string{"tool/write_file:NOTES.md": "rejected"}})
}

// A chat read as it grew — line by line, from the first line to each —
// and again whole, stores what one read of the whole stores; a last read
// adds nothing (refs are the chat's own ids).
func TestRead_GeminiGrownAndAgain(t *testing.T) {
	for _, name := range []string{"testdata/gemini/chat.jsonl", "testdata/gemini/session-0.61.0.jsonl"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			full, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			read := func(raw []byte, db *store.DB) []transcript.Session {
				opts := transcript.Options{File: name}
				if db != nil {
					opts.Target = func(conv string) (transcript.Target, error) { return target(t, db, conv), nil }
				}
				ss, _, err := transcript.Read(transcript.Gemini, bytes.NewReader(raw), opts)
				if err != nil {
					t.Fatal(err)
				}
				return ss
			}
			once := storeSessions(t, read(full, nil))
			lines := bytes.SplitAfter(full, []byte("\n"))
			grown := dbtest.Open(t, store.Options{})
			for i := 1; i <= len(lines)+1; i++ {
				raw := bytes.Join(lines[:min(i, len(lines))], nil)
				for _, s := range read(raw, grown) {
					if i == len(lines)+1 && len(s.Events) > 0 {
						t.Errorf("a last read gives %d events, want none", len(s.Events))
					}
					if len(s.Events) > 0 {
						if _, err := grown.Append(s.ID, s.Events...); err != nil {
							t.Fatalf("append %s after line %d: %v", s.ID, i, err)
						}
					}
				}
			}
			if a, b := dumpEvents(t, once), dumpEvents(t, grown); a != b {
				t.Errorf("read as it grew:\n%s\nwant\n%s", b, a)
			}
		})
	}
}

// Bad input is an error naming the file and the line: a line that is not
// JSON, a record that is not an object, a .json chat's message that is
// not one.
func TestRead_GeminiBadInput(t *testing.T) {
	good := `{"sessionId":"s1","projectHash":"p"}` + "\n" + `{"id":"u1","type":"user","content":"hi"}` + "\n"
	legacy := "{\n  \"sessionId\": \"s1\",\n  \"projectHash\": \"p\",\n  \"messages\": [\n    {\"id\": \"u1\", \"type\": \"user\", \"content\": \"hi\"},\n    7\n  ]\n}\n"
	for _, c := range []struct {
		name, in string
		line     int
		cause    error
	}{
		{"not JSON", good + "{\"id\": \"g1\", \"type\": \n", 3, transcript.ErrBadJSON},
		{"not an object", good + "\"text\"\n", 3, transcript.ErrBadRecord},
		{"a message that is no object", legacy, 6, transcript.ErrBadRecord},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := transcript.Read(transcript.Gemini, strings.NewReader(c.in), transcript.Options{File: "chats/session-x.jsonl"})
			var le *transcript.LineError
			if !errors.As(err, &le) || le.File != "chats/session-x.jsonl" || le.Line != c.line || !errors.Is(err, c.cause) {
				t.Errorf("err = %v, want %v at chats/session-x.jsonl:%d", err, c.cause, c.line)
			}
		})
	}
	_, _, err := transcript.Read(transcript.Gemini, strings.NewReader(`{"type":"x"}`+"\n"), transcript.Options{File: "f.jsonl"})
	if !errors.Is(err, transcript.ErrNothingRecognized) || !strings.Contains(err.Error(), "f.jsonl") {
		t.Errorf("no record of the format: err = %v", err)
	}
}
