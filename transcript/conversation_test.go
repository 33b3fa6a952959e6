package transcript_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// readSessions reads a fixture whole, failing the test on any error.
func readSessions(t *testing.T, f transcript.Format, path string, opts transcript.Options) []transcript.Session {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.File = path
	ss, _, err := transcript.Read(f, bytes.NewReader(raw), opts)
	if err != nil {
		t.Fatalf("Read %s: %v", path, err)
	}
	return ss
}

// sessionSummary is a session's id and its events' kinds, in a form a
// test can compare.
func sessionSummary(s transcript.Session) string {
	var kinds []string
	for _, e := range s.Events {
		kinds = append(kinds, e.Kind.String())
	}
	return s.ID + ": " + strings.Join(kinds, " ")
}

// storeSessions appends each session to a fresh database (verified at
// cleanup), as an import does.
func storeSessions(t *testing.T, ss []transcript.Session) *store.DB {
	t.Helper()
	db := dbtest.Open(t, store.Options{})
	for _, s := range ss {
		if len(s.Events) == 0 {
			continue
		}
		if _, err := db.Append(s.ID, s.Events...); err != nil {
			t.Fatalf("append %s: %v", s.ID, err)
		}
	}
	return db
}

// Every record carries its ref, and the events of one record share it: a
// Claude Code record's uuid.
func TestRead_ClaudeCodeRefsAreUUIDs(t *testing.T) {
	ss := readSessions(t, transcript.ClaudeCode, "testdata/claude-code/session.jsonl", transcript.Options{})
	if len(ss) != 1 || ss[0].ID != "7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41" {
		t.Fatalf("sessions %v, want the one the records' sessionId names", ids(ss))
	}
	for _, e := range ss[0].Events {
		if e.Ref == "" || strings.Contains(e.Ref, ":") {
			t.Errorf("event %+v: ref %q, want the record's uuid", e, e.Ref)
		}
	}
	storeSessions(t, ss)
}

func ids(ss []transcript.Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// Two Claude Code files of one name are the sessions their records name;
// a file whose records name two sessions gives two, the records that name
// none (the summary) in the first.
func TestRead_ClaudeCodeSessionIDs(t *testing.T) {
	var all []string
	for _, dir := range []string{"python-to-rust-port", "coverage-test-fix"} {
		ss := readSessions(t, transcript.ClaudeCode, "testdata/claude-code/sessions/"+dir+"/transcript.jsonl", transcript.Options{})
		if len(ss) != 1 || ss[0].ID == "transcript" {
			t.Fatalf("%s: sessions %v, want the one its sessionId names", dir, ids(ss))
		}
		all = append(all, ss[0].ID)
	}
	if all[0] == all[1] {
		t.Fatalf("the two transcript.jsonl files are one session %q", all[0])
	}
	ss := readSessions(t, transcript.ClaudeCode, "testdata/claude-code/two-sessions.jsonl", transcript.Options{})
	want := []string{
		"aaaaaaaa-0003-4000-8000-first0000001: user tool_call tool_result assistant",
		"bbbbbbbb-0004-4000-8000-second000002: user tool_call tool_result artifact",
	}
	var got []string
	for _, s := range ss {
		got = append(got, sessionSummary(s))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sessions\n%q\nwant\n%q", got, want)
	}
	if ss[0].Report.Skipped["summary"] != 1 || ss[0].Report.Records != 5 || ss[1].Report.Records != 3 {
		t.Errorf("reports %s / %s: the summary is the first session's", ss[0].Report, ss[1].Report)
	}
	storeSessions(t, ss)
	// --session (a Target naming one session) puts both in it.
	one := func(string) (transcript.Target, error) { return transcript.Target{Session: "s"}, nil }
	ss = readSessions(t, transcript.ClaudeCode, "testdata/claude-code/two-sessions.jsonl", transcript.Options{Target: one})
	if len(ss) != 1 || ss[0].ID != "s" || len(ss[0].Events) != 8 {
		t.Fatalf("one target: %v", ids(ss))
	}
}

// A sub-agent's file carries the sessionId of the session that started it:
// it is a session of its own, named after both.
func TestRead_ClaudeCodeSubagent(t *testing.T) {
	sub := `{"type":"user","uuid":"x1","sessionId":"main-1","isSidechain":true,"agentId":"a1","message":{"role":"user","content":"Find wait_for."}}
{"type":"assistant","uuid":"x2","sessionId":"main-1","isSidechain":true,"agentId":"a1","message":{"role":"assistant","content":"conftest.py:12"}}
`
	ss, _, err := transcript.Read(transcript.ClaudeCode, strings.NewReader(sub), transcript.Options{File: "agent-a1.jsonl"})
	if err != nil || len(ss) != 1 || ss[0].ID != "main-1/agent-a1" || len(ss[0].Events) != 2 {
		t.Fatalf("sub-agent file: sessions %v, %v; want main-1/agent-a1 with 2 events", ids(ss), err)
	}
}

// A JSON list of conversations, and JSONL whose lines are conversations:
// each is a session, named by its id or after the file and its place; the
// messages under the keys agent trajectories use are read.
func TestRead_Conversations(t *testing.T) {
	for _, tc := range []struct {
		f    transcript.Format
		path string
		want []string
	}{
		{transcript.OpenAI, "testdata/openai/conversations.json", []string{
			"conv-retry: user tool_call tool_result artifact assistant",
			"conversations-2: user tool_call tool_result",
			"42: system user",
		}},
		{transcript.OpenAI, "testdata/openai/trajectories.jsonl", []string{
			"sharegpt-7: system user assistant",
			"trajectories-2: system user assistant", // history, not its trajectory
			"trajectories-3: assistant tool_call tool_result assistant tool_call tool_result tool_call tool_result",
			"turns-1: user assistant",
		}},
		{transcript.Anthropic, "testdata/anthropic/claude-ai.json", []string{
			"c1a2b3c4-0000-4000-8000-claudeai0001: user assistant",
			"c1a2b3c4-0000-4000-8000-claudeai0002: ",
		}},
		{transcript.Anthropic, "testdata/anthropic/messages.json", nil}, // one conversation: the file's name
	} {
		t.Run(tc.path, func(t *testing.T) {
			ss := readSessions(t, tc.f, tc.path, transcript.Options{})
			if tc.want == nil {
				if len(ss) != 1 || ss[0].ID != "messages" {
					t.Fatalf("sessions %v, want messages", ids(ss))
				}
				return
			}
			var got []string
			for _, s := range ss {
				got = append(got, sessionSummary(s))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("sessions\n%q\nwant\n%q", got, tc.want)
			}
			storeSessions(t, ss)
		})
	}
	// A step's action is a call named after its first word; the failed
	// linter run is a failed result.
	ss := readSessions(t, transcript.OpenAI, "testdata/openai/trajectories.jsonl", transcript.Options{})
	var calls []string
	for _, e := range ss[2].Events {
		if e.Kind == tier.KindToolCall {
			calls = append(calls, e.ID+" "+e.Name)
		}
	}
	if want := []string{"step-1 find_file", "step-2 edit", "step-3 submit"}; !slices.Equal(calls, want) {
		t.Errorf("step calls %q, want %q", calls, want)
	}
	ss = readSessions(t, transcript.OpenAI, "testdata/openai/conversations.json", transcript.Options{})
	if n := count(ss[1].Events, tier.KindToolResult, failed); n != 1 {
		t.Errorf("%d failed results in conversations-2, want the linter's", n)
	}
}

// Where a conversation has no id: alone in its file it is the file's name;
// one of a list, "<file>-<n>"; messages that name their conversation are
// grouped by it.
func TestRead_ConversationNames(t *testing.T) {
	conv := `{"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"one object", conv, []string{"x"}},
		{"one object, then space", conv + "\n\n", []string{"x"}},
		{"an array of one", "[" + conv + "]", []string{"x-1"}},
		{"JSONL of two", conv + "\n" + conv + "\n", []string{"x-1", "x-2"}},
		{"an id and none", `{"id":"a","messages":[{"role":"user","content":"hi"}]}` + "\n" + conv, []string{"a", "x-2"}},
		{"messages naming their sessions", `{"role":"user","content":"a","session_id":"s1"}` + "\n" +
			`{"role":"user","content":"b","conversation_id":"s2"}` + "\n" + `{"role":"assistant","content":"c","session_id":"s1"}`, []string{"s1", "s2"}},
		{"loose messages", `{"role":"user","content":"a"}` + "\n" + `{"role":"assistant","content":"b"}`, []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, _, err := transcript.Read(transcript.OpenAI, strings.NewReader(tc.in), transcript.Options{File: "dir/x.json"})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(ss); !slices.Equal(got, tc.want) {
				t.Errorf("sessions %q, want %q", got, tc.want)
			}
		})
	}
	// stdin: a lone conversation has no name; a list's are "stdin-<n>".
	ss, _, err := transcript.Read(transcript.OpenAI, strings.NewReader(conv+"\n"+conv), transcript.Options{})
	if err != nil || !slices.Equal(ids(ss), []string{"stdin-1", "stdin-2"}) {
		t.Errorf("stdin list: %q, %v", ids(ss), err)
	}
	ss, _, err = transcript.Read(transcript.OpenAI, strings.NewReader(conv), transcript.Options{})
	if err != nil || !slices.Equal(ids(ss), []string{""}) {
		t.Errorf("stdin: %q, %v", ids(ss), err)
	}
}

// A file in which no record is of a kind the format knows is an error
// naming the file and what it holds, never an empty success.
func TestRead_NothingRecognized(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    transcript.Format
		in   string
		says string
	}{
		{"an object without messages", transcript.OpenAI, `{"a":1,"b":[1,2],"c":{"messages":[]}}`,
			`x.json: a JSON object with keys "a", "b", "c": no list of messages under messages, input, chat_messages, history, conversation, conversations, turns, steps, trajectory`},
		{"messages not a list", transcript.Anthropic, `{"messages":{"role":"user"}}`, `a JSON object with keys "messages": no list of messages`},
		{"an empty array", transcript.OpenAI, `[]`, "x.json: the input holds no records"},
		{"an empty file", transcript.Anthropic, "", "x.json: the input holds no records"},
		{"an empty conversation", transcript.OpenAI, `{"messages":[]}`, "x.json: the input holds no records"},
		{"unknown roles", transcript.OpenAI, `{"role":"critic","content":"a"}` + "\n" + `{"role":"critic","content":"b"}`, "x.json: records=2 unknown=role/critic:2"},
		{"unknown Claude Code records", transcript.ClaudeCode, `{"type":"x-thing","uuid":"1"}`, "x.json: records=1 unknown=x-thing:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, _, err := transcript.Read(tc.f, strings.NewReader(tc.in), transcript.Options{File: "x.json"})
			if !errors.Is(err, transcript.ErrNothingRecognized) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want nothing recognized, saying %q", err, tc.says)
			}
			for _, s := range ss {
				if len(s.Events) > 0 {
					t.Errorf("session %s: %d events", s.ID, len(s.Events))
				}
			}
		})
	}
	// Records of a known kind that give no event are recognized: a Claude
	// Code file of file snapshots imports as nothing, without an error.
	if _, _, err := transcript.Read(transcript.ClaudeCode, strings.NewReader(`{"type":"file-history-snapshot","messageId":"m"}`), transcript.Options{}); err != nil {
		t.Errorf("a file of snapshots: %v", err)
	}
}

// storedRefs returns a Target.Stored over the refs of ss.
func storedRefs(ss []transcript.Session) func(string) (transcript.Target, error) {
	refs := map[string]map[string]bool{}
	for _, s := range ss {
		refs[s.ID] = map[string]bool{}
		for _, e := range s.Events {
			refs[s.ID][e.Ref] = true
		}
	}
	return func(conv string) (transcript.Target, error) {
		return transcript.Target{Session: conv, Stored: func(ref string) (bool, error) { return refs[conv][ref], nil }}, nil
	}
}

// A transcript read again with what its sessions hold gives no event;
// every record is known. Derived refs are stable: the same bytes give the
// same refs, whatever the form (array, JSONL, object).
func TestRead_KnownRecordsAreSkipped(t *testing.T) {
	for _, tc := range []struct {
		f    transcript.Format
		path string
	}{
		{transcript.OpenAI, "testdata/openai/chat.json"},
		{transcript.OpenAI, "testdata/openai/conversations.json"},
		{transcript.Anthropic, "testdata/anthropic/messages.json"},
		{transcript.ClaudeCode, "testdata/claude-code/session.jsonl"},
		{transcript.ClaudeCode, "testdata/claude-code/two-sessions.jsonl"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			first := readSessions(t, tc.f, tc.path, transcript.Options{})
			again := readSessions(t, tc.f, tc.path, transcript.Options{Target: storedRefs(first)})
			for i, s := range again {
				if len(s.Events) != 0 || s.Report.Known == 0 {
					t.Errorf("session %s read again: %d events, report %s; want none, the records known", s.ID, len(s.Events), s.Report)
				}
				if i < len(first) && first[i].ID != s.ID {
					t.Errorf("session %d is %s, was %s", i, s.ID, first[i].ID)
				}
			}
		})
	}
}

// A file that grew gives, read with what the store holds of it, only the
// events of its new records — and they are the events the whole file gives
// at their place: the store ends as if the file had been read once.
func TestRead_GrownFileAddsItsNewRecords(t *testing.T) {
	for _, tc := range []struct {
		f     transcript.Format
		path  string
		split func(raw []byte) []byte // the file as it was
	}{
		{transcript.ClaudeCode, "testdata/claude-code/session.jsonl", func(raw []byte) []byte {
			lines := bytes.SplitAfter(raw, []byte("\n"))
			return bytes.Join(lines[:12], nil)
		}},
		{transcript.OpenAI, "testdata/openai/responses.jsonl", func(raw []byte) []byte {
			lines := bytes.SplitAfter(raw, []byte("\n"))
			return bytes.Join(lines[:4], nil)
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			full, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			read := func(raw []byte, db *store.DB) []transcript.Session {
				opts := transcript.Options{File: tc.path}
				if db != nil {
					opts.Target = func(conv string) (transcript.Target, error) { return target(t, db, conv), nil }
				}
				ss, _, err := transcript.Read(tc.f, bytes.NewReader(raw), opts)
				if err != nil {
					t.Fatal(err)
				}
				return ss
			}
			once := storeSessions(t, read(full, nil))

			twice := dbtest.Open(t, store.Options{})
			for _, raw := range [][]byte{tc.split(full), full, full} {
				for _, s := range read(raw, twice) {
					if len(s.Events) > 0 {
						if _, err := twice.Append(s.ID, s.Events...); err != nil {
							t.Fatalf("append %s: %v", s.ID, err)
						}
					}
				}
			}
			a, b := dumpEvents(t, once), dumpEvents(t, twice)
			if a != b {
				t.Errorf("the file read whole and read as it grew give other events:\n%s\nwant\n%s", b, a)
			}
		})
	}
}

// target is what an importer passes for a conversation: the session of its
// name, its open calls and its refs in db.
func target(t *testing.T, db *store.DB, conv string) transcript.Target {
	tg := transcript.Target{Session: conv, Stored: func(ref string) (ok bool, err error) {
		err = db.View(func(s *store.Snapshot) (err error) {
			_, ok, err = s.Ref(conv, ref)
			return err
		})
		return ok, err
	}}
	err := db.View(func(s *store.Snapshot) error {
		l, err := s.Ledger(conv)
		if errors.Is(err, store.ErrSessionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, o := range l.OpenList() {
			if err := s.Events(conv, o.Seq, o.Seq, func(e tier.Event) error { tg.Open = append(tg.Open, e); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// dumpEvents renders every session's events without their times.
func dumpEvents(t *testing.T, db *store.DB) string {
	var b strings.Builder
	err := db.View(func(s *store.Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			err := s.Events(id, 1, ^uint64(0), func(e tier.Event) error {
				e.Time = 0
				_, err := fmt.Fprintf(&b, "%s %+v\n", id, e)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A value that is neither a message nor a conversation is counted once in
// the total, and with the file's first session.
func TestRead_OutsideAnyConversation(t *testing.T) {
	in := `{"note":"exported by a tool"}` + "\n" + `{"messages":[{"role":"user","content":"hi"}]}` + "\n"
	ss, rep, err := transcript.Read(transcript.OpenAI, strings.NewReader(in), transcript.Options{File: "x.jsonl"})
	if err != nil || !slices.Equal(ids(ss), []string{"x-1"}) {
		t.Fatalf("sessions %q, %v; want x-1 (the first conversation of a list)", ids(ss), err)
	}
	const what = "(no role or messages)"
	if rep.Unknown[what] != 1 || rep.Records != 2 || ss[0].Report.Unknown[what] != 1 || ss[0].Report.Records != 2 {
		t.Errorf("total %s, session %s: want the note counted once in each", rep, ss[0].Report)
	}
}
